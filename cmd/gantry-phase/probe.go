package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gantry/runner/kube"
)

// probe prints, as JSON, what a pod of the runner image sees of itself and its
// surroundings instead of running a phase: its ids, capabilities and seccomp mode, what
// it may write, its service-account token (there should be none), the names (never the
// values) of its Secret's files and its environment, and the answers it gets from its own
// phase endpoint session, from others (urls, with its own token) and from the apiserver
// without credentials. Operators check a cluster's pod security with it; the isolation
// test runs it as a Job.
func probe(ctx context.Context, cfg kube.PodConfig, urls []string, out io.Writer) error {
	r := map[string]any{"uid": os.Getuid(), "gid": os.Getgid(), "euid": os.Geteuid()}
	groups, _ := os.Getgroups()
	r["groups"] = groups
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && slices.Contains([]string{"CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"}, k) {
				r[k] = strings.TrimSpace(v)
			}
		}
	}
	r["write_root"] = tryWrite("/probe")
	r["write_bin"] = tryWrite("/bin/probe")
	r["write_secrets"] = tryWrite(filepath.Join(cfg.Secrets, "probe"))
	r["write_work"] = tryWrite(filepath.Join(cfg.WorkRoot, "probe"))
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount")
	r["service_account_token"] = err == nil
	var secrets []string
	ents, _ := os.ReadDir(cfg.Secrets)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			secrets = append(secrets, e.Name())
		}
	}
	r["secret_files"] = secrets
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		env = append(env, name)
	}
	slices.Sort(env)
	r["env"] = env
	token, _ := os.ReadFile(filepath.Join(cfg.Secrets, kube.SecretEndpointToken))
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the probe only reads status codes
	get := func(url string, withToken bool) string {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err.Error()
		}
		if withToken {
			req.Header.Set("Authorization", "Bearer "+string(token))
		}
		resp, err := c.Do(req)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.Status
	}
	r["own"] = get(cfg.Endpoint, true)
	others := map[string]string{}
	for _, u := range urls {
		if strings.HasPrefix(u, "https://") {
			others[u] = get(u, false) // the apiserver: anonymous
		} else {
			others[u] = get(u, true)
		}
	}
	r["others"] = others
	return json.NewEncoder(out).Encode(r)
}

// tryWrite creates and removes a file, and says what went wrong ("": it could).
func tryWrite(p string) string {
	f, err := os.Create(p)
	if err != nil {
		return err.Error()
	}
	f.Close()
	os.Remove(p)
	return ""
}
