//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu) and runc (as root).

package main

import (
	"path/filepath"
	"testing"
)

// TestLoadLiveRunc: 20 requests at once (GANTRY_LOAD_LIVE_RUNS) to two portals running
// live OpenTofu in runc containers against the sandbox cloud, as TestLoadConcurrentRequests
// does with the mock executor; each development run's plan applied once by the cloud's
// ledger (GANTRY_LOAD_LIVE_REPORT names a file for the report).
func TestLoadLiveRunc(t *testing.T) {
	t.Parallel()
	n := envInt(t, "GANTRY_LOAD_LIVE_RUNS", 20)
	r := newReplicas(t)
	dir := t.TempDir()
	f := &fleet{r: r, live: map[string]*replica{}}
	cloudDir := filepath.Join(dir, "cloud")
	f.args = liveArgs(t, f, "tofu/oci", cloudDir, filepath.Join(dir, "work"))
	load(t, f, n, "live OpenTofu in runc", func() (int, error) { return ledgerCount(cloudLedger(cloudDir)) }, "GANTRY_LOAD_LIVE_REPORT")
}
