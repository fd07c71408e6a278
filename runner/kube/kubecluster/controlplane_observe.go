package kubecluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// What a test reads of a running control plane: whom a token authenticates as, the audit
// log, and the components' memory.

// WaitAuthenticates waits until the API server authenticates token and returns whom as. The
// API server fetches a JWT issuer's discovery document and keys in the background after it
// starts (and again every ten seconds while that fails), so a token of a trusted issuer may be
// refused for a moment after StartControlPlane returns; this is the readiness check for that.
func (c *ControlPlane) WaitAuthenticates(ctx context.Context, token string) (authenticationv1.UserInfo, error) {
	client, err := kubernetes.NewForConfig(c.TokenConfig(token))
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	var user authenticationv1.UserInfo
	s := c.procs["kube-apiserver"]
	if s == nil {
		return user, errors.New("the API server is not running")
	}
	err = c.l.waitFor(ctx, "kube-apiserver", s, func(ctx context.Context) error {
		review, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		user = review.Status.UserInfo
		return nil
	})
	return user, err
}

// AuditEvent is what the audit log says of one request (the fields a test reads).
type AuditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string              `json:"username"`
		Groups   []string            `json:"groups"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef *struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		APIGroup  string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code    int    `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// Code is the response's HTTP status (0 when the event has none).
func (e AuditEvent) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// AuditEvents reads the audit log: every request that reached the end (ResponseComplete or
// Panic), in order. The API server writes an event as its request ends (--audit-log-mode
// blocking), so a request that has returned is in it.
func (c *ControlPlane) AuditEvents() ([]AuditEvent, error) {
	data, err := os.ReadFile(c.AuditLog())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []AuditEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("reading %s: %w", c.AuditLog(), err)
		}
		if e.Stage == "ResponseComplete" || e.Stage == "Panic" {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}

// RSS returns each running component's resident memory in bytes (/proc/<pid>/status VmRSS).
func (c *ControlPlane) RSS() (map[string]int64, error) {
	out := map[string]int64{}
	for name, s := range c.procs {
		status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(s.pid), "status"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for line := range strings.Lines(string(status)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%s: VmRSS %q: %w", name, rest, err)
				}
				out[name] = kb << 10
			}
		}
	}
	return out, nil
}
