package kubecluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// waitFor polls check until it succeeds. It gives up when the context ends or the component
// exits, with the last error, how the component ended (its real exit status: s is the
// process this Start spawned and reaps) and the end of its log.
func (l layout) waitFor(ctx context.Context, component string, s *spawned, check func(context.Context) error) error {
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(attempt)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-s.exited:
			return &exitedError{component: component, status: s.exitErr(), last: last, log: l.logFile(component), tail: l.logTail(component)}
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v); the end of %s:\n%s", component, ctx.Err(), last, l.logFile(component), l.logTail(component))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exitedError is a component that exited while Start waited for it.
type exitedError struct {
	component string
	status    error // how it ended: "exit status 1", "signal: killed"
	last      error // what the readiness check last said
	log, tail string
}

func (e *exitedError) Error() string {
	return fmt.Sprintf("%s exited while starting (%v; the check last said: %v); the end of %s:\n%s", e.component, e.status, e.last, e.log, e.tail)
}

// addressInUse reports whether the component exited because a port it binds was taken.
func (e *exitedError) addressInUse() bool {
	return strings.Contains(e.tail, "address already in use")
}

// logTail returns the last lines of a component's log.
func (l layout) logTail(component string) string {
	data, err := os.ReadFile(l.logFile(component))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-25):], "\n")
}

func etcdHealthy(ctx context.Context) error {
	return etcdHealthyAt(ctx, "http://127.0.0.1:"+strconv.Itoa(etcdPort))
}

// etcdHealthyAt asks the etcd whose client URL is url whether it is healthy.
func etcdHealthyAt(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var health struct{ Health string }
	if err := json.NewDecoder(resp.Body).Decode(&health); err != nil {
		return err
	}
	if health.Health != "true" {
		return fmt.Errorf("etcd health: %q", health.Health)
	}
	return nil
}

func apiServerReady(ctx context.Context, c *kubernetes.Clientset) error {
	body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("readyz: %w: %s", err, bytes.TrimSpace(body))
	}
	return nil
}

// readyNode returns the node's InternalIP once its Ready condition is true.
func readyNode(ctx context.Context, c *kubernetes.Clientset) (string, error) {
	node, err := c.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	ready := false
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "", fmt.Errorf("node %s is not Ready", NodeName)
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address, nil
		}
	}
	return "", fmt.Errorf("node %s has no InternalIP", NodeName)
}

func nodeReady(ctx context.Context, c *kubernetes.Clientset) error {
	_, err := readyNode(ctx, c)
	return err
}

// podsAdmissible: a pod in the default namespace is admitted once the controller-manager has
// made the namespace's ServiceAccount and published the cluster CA into it.
func podsAdmissible(ctx context.Context, c *kubernetes.Clientset) error {
	if _, err := c.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return err
	}
	_, err := c.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	return err
}

// healthz asks a component's HTTPS /healthz on loopback (anonymous, always allowed), checking
// its certificate against the cluster CA.
func (l layout) healthz(ctx context.Context, port int) error {
	ca, err := os.ReadFile(l.pki("ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("no CA certificate in " + l.pki("ca.crt"))
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz on %d: %s", port, resp.Status)
	}
	return nil
}
