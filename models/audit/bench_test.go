package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/audit/audittest"
	"gantry/models/audit/exportfile"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/keyring"
	"gantry/models/org"
)

// exportChildEnv carries, to the child process, what to export:
// "<database URL> <keyring spec> <export id>".
const exportChildEnv = "GANTRY_BENCH_EXPORT_CHILD"

// exportChild builds one export and prints how long the build took; it is the whole
// work of the child process whose peak resident set the benchmark reports.
func exportChild() int {
	parts := strings.Fields(os.Getenv(exportChildEnv))
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "want: URL KEYSPEC EXPORT_ID")
		return 2
	}
	ctx := context.Background()
	gdb, err := db.Open(ctx, parts[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	keys, err := keyring.Parse(parts[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := audit.New(gdb)
	exports := audit.NewExports(gdb, log, keys, audit.NewKeys(gdb, keys), nil)
	if path := os.Getenv("GANTRY_BENCH_CPUPROFILE"); path != "" { // where the build's time goes
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	if err := exports.Build(ctx, parts[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	took := time.Since(start)
	hwm, err := peakResidentKB()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d %d\n", took.Nanoseconds(), hwm)
	return 0
}

// peakResidentKB is this process's peak resident set (VmHWM), in kilobytes. Not the
// rusage of the child as its parent sees it: Linux starts that from the parent's own
// peak (the exec replaces a memory map the child shared with its parent), so a parent
// that once held a big file would be measured instead of the export.
func peakResidentKB() (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// BenchmarkExport1M: an export of 1,000,000 events (unfiltered, JSON Lines), built by
// a process of its own: throughput (events per second of the build) and that process's
// peak resident set. The export is verified afterwards, so a fast wrong export fails.
func BenchmarkExport1M(b *testing.B) {
	n := 1_000_000
	ctx := context.Background()
	url := dbtest.NewURL(b)
	gdb, err := db.Open(ctx, url)
	require.NoError(b, err)
	b.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})
	log := audit.New(gdb)
	o, err := org.NewService(gdb, log).EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(b, err)
	require.NoError(b, audittest.Seed(ctx, gdb, o.ID, n-1, []string{"env-a", "env-b", "env-c"}, []string{"ws-1", "ws-2", "ws-3", "ws-4", "ws-5"}))
	spec := keyring.NewKeySpec("bench")
	keys, err := keyring.Parse(spec)
	require.NoError(b, err)
	var queued []string
	signers := audit.NewKeys(gdb, keys)
	exports := audit.NewExports(gdb, log, keys, signers, recordingEnqueuer{&queued})
	auditor := authz.WithSubject(ctx, authz.Subject{UserID: "usr-a", Name: "Ada", OrganizationID: o.ID, Role: authz.RoleAuditor})

	var buildNs, rssKB, events int64
	b.ResetTimer()
	for range b.N {
		e, err := exports.Request(auditor, audit.ExportRequest{Format: exportfile.JSONL,
			Query: audit.Query{From: time.Now().Add(-time.Duration(2*n) * time.Second), To: time.Now().Add(time.Hour)}})
		require.NoError(b, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), exportChildEnv+"="+url+" "+spec+" "+e.ID)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(b, cmd.Run(), stderr.String())
		var ns, kb int64
		_, err = fmt.Sscan(stdout.String(), &ns, &kb)
		require.NoError(b, err, stdout.String())
		buildNs += ns
		rssKB = max(rssKB, kb)

		b.StopTimer()
		e, err = exports.Get(auditor, e.ID)
		require.NoError(b, err)
		// Every event up to the pinned one is in the range: the seeded n, and two per
		// earlier export of this run (requested, exported).
		require.GreaterOrEqual(b, e.LastSeq, int64(n))
		require.EqualValues(b, e.LastSeq, e.EventsDone)
		events += e.EventsDone
		r, err := exports.Reader(auditor, e)
		require.NoError(b, err)
		set, err := signers.Published(auditor)
		require.NoError(b, err)
		// Through a file, not memory: the next child would otherwise start its
		// accounting in a parent that once held the whole export.
		file, err := os.Create(filepath.Join(b.TempDir(), "export.jsonl"))
		require.NoError(b, err)
		size, err := io.Copy(file, r)
		require.NoError(b, err)
		_, err = file.Seek(0, io.SeekStart)
		require.NoError(b, err)
		verdict := exportfile.Verify(file, exportfile.Trust{Keys: &set})
		require.NoError(b, file.Close())
		require.True(b, verdict.OK, verdict.Verdict)
		require.EqualValues(b, e.EventsDone, verdict.Manifest.Events)
		b.ReportMetric(float64(size)/(1<<20), "file_mb")
		b.StartTimer()
	}
	perBuild := time.Duration(buildNs / int64(b.N))
	b.ReportMetric(float64(events)/time.Duration(buildNs).Seconds(), "events_per_s")
	b.ReportMetric(float64(rssKB)/1024, "peak_rss_mb")
	b.ReportMetric(perBuild.Seconds(), "build_s")
}
