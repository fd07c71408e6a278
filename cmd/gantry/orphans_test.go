package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReplicasSweepOnlyTheirOwnOrphans: two replicas sharing a node and a work
// directory have their own scratch, runc and cgroup roots, tagged with their replica
// ids; a restarted replica removes the scratch directories its dead jobs left and
// leaves the other replica's (live) ones alone.
func TestReplicasSweepOnlyTheirOwnOrphans(t *testing.T) {
	work := t.TempDir()
	a := systemFlags{}
	a.leases.Holder = "portal-a"
	b := systemFlags{}
	b.leases.Holder = "portal-b"
	da, db := a.replicaDirs(work), b.replicaDirs(work)
	require.NotEqual(t, da.Jobs, db.Jobs)
	require.NotEqual(t, da.Runc, db.Runc)
	require.NotEqual(t, da.Bundles, db.Bundles)
	require.NotEqual(t, da.Cgroup, db.Cgroup)
	require.Contains(t, da.Jobs, "portal-a")
	require.Contains(t, da.Runc, "portal-a")

	// A replica id that is not a safe path element stays inside the work directory.
	evil := systemFlags{}
	evil.leases.Holder = "../../etc"
	de := evil.replicaDirs(work)
	for _, dir := range []string{de.Jobs, de.Runc, de.Bundles} {
		require.True(t, strings.HasPrefix(filepath.Clean(dir), filepath.Join(work, "jobs")+"/") || strings.HasPrefix(filepath.Clean(dir), filepath.Join(work, "replicas")+"/"), dir)
	}

	for _, dir := range []string{filepath.Join(da.Jobs, "job-1"), filepath.Join(da.Jobs, "job-2", ".terraform"), filepath.Join(db.Jobs, "job-3")} {
		require.NoError(t, os.MkdirAll(dir, 0o700))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	require.NoError(t, da.sweepScratch(quiet))
	left, err := os.ReadDir(da.Jobs)
	require.NoError(t, err)
	require.Empty(t, left, "a's orphans are gone")
	theirs, err := os.ReadDir(db.Jobs)
	require.NoError(t, err)
	require.Len(t, theirs, 1, "b's job directory is left alone")
	// Nothing to sweep is not an error.
	fresh := systemFlags{}
	fresh.leases.Holder = "new"
	require.NoError(t, fresh.replicaDirs(work).sweepScratch(quiet))
}
