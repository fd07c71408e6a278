package kube

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"gantry/runner/oci"
	"gantry/runner/tofurun"
)

// oomExplainer runs the pod's tofu commands and explains a memory kill as the runc
// executor does. The kernel's OOM killer picks the largest process of the pod's memory
// cgroup, which is tofu (or a provider), not gantry-phase: the container lives on and
// Kubernetes sees no OOM kill, so the pod reads its own cgroup's kill counter.
type oomExplainer struct {
	tofurun.Executor
	cgroup string // the cgroup filesystem's root ("": /sys/fs/cgroup)
}

func (o *oomExplainer) Run(ctx context.Context, workdir string, c tofurun.Command) (int, string, error) {
	before, _, _ := memoryCgroup(o.cgroup)
	code, explain, err := o.Executor.Run(ctx, workdir, c)
	if err != nil || explain != "" || code != 128+int(syscall.SIGKILL) {
		return code, explain, err
	}
	if after, limit, ok := memoryCgroup(o.cgroup); ok && after > before {
		res := oci.Result{ExitCode: code, OOMKilled: true, Limits: oci.Limits{MemoryBytes: limit}}
		return code, res.Explain(), nil
	}
	return code, explain, err
}

// memoryCgroup reads the OOM kills so far and the memory limit of the cgroup the pod
// sees at root: cgroup v2 (memory.events, memory.max) or v1 (memory/memory.oom_control,
// memory/memory.limit_in_bytes). ok is false when neither can be read.
func memoryCgroup(root string) (kills, limit int64, ok bool) {
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	for _, layout := range []struct{ dir, events, limit string }{
		{root, "memory.events", "memory.max"},
		{filepath.Join(root, "memory"), "memory.oom_control", "memory.limit_in_bytes"},
	} {
		data, err := os.ReadFile(filepath.Join(layout.dir, layout.events))
		if err != nil {
			continue
		}
		kills, found := counter(data, "oom_kill")
		if !found {
			continue
		}
		raw, _ := os.ReadFile(filepath.Join(layout.dir, layout.limit))
		limit, _ = strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64) // "max": no limit, 0
		return kills, limit, true
	}
	return 0, 0, false
}

// counter reads "name value" from a cgroup's flat keyed file.
func counter(data []byte, name string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == name {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
