package bench

import (
	"strconv"
	"strings"
)

// Goal is what one figure of one benchmark should be: at most Max (or, with AtLeast, at
// least Max). A benchmark can have several goals (one per metric it reports); a figure
// with no limit (Report) is shown for information and counts as met.
type Goal struct {
	Package   string // import path, "gantry/web"
	Benchmark string // function name, "BenchmarkRequestToPendingApproval50"
	Metric    string // the unit it reports, "ratio", "p99_ms", "ns/op"
	Max       float64
	AtLeast   bool   // the figure must be at least Max instead
	Report    bool   // no limit: reported only
	Why       string // where the goal comes from
	// Quick benchmarks take seconds: `go tool task bench:quick` runs only them.
	Quick bool
}

// Met says whether figure meets the goal.
func (g Goal) Met(figure float64) bool {
	switch {
	case g.Report:
		return true
	case g.AtLeast:
		return figure >= g.Max
	}
	return figure <= g.Max
}

// Text is the goal as the summary shows it: "≤ 1.1", "≥ 3", "reported".
func (g Goal) Text() string {
	switch {
	case g.Report:
		return "reported"
	case g.AtLeast:
		return "≥ " + Format(g.Max)
	}
	return "≤ " + Format(g.Max)
}

// Format prints a figure: whole numbers from 1000 up (bytes, nanoseconds), else four
// significant digits.
func Format(v float64) string {
	if v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// Goals are every benchmark of the repository with its goals: `go tool task bench`
// prints them as a table with the figures of one run. A test holds it complete: a
// benchmark without a goal, or a goal without a benchmark, fails it. Every later issue
// adds its benchmarks here.
var Goals = []Goal{
	// A request costs no more than raw OpenTofu (issues 4 and 10).
	{Package: "gantry/web", Benchmark: "BenchmarkRequestToPendingApproval50", Metric: "ratio", Max: 1.1,
		Why: "request → PENDING_APPROVAL over raw tofu init && plan -out, 50 resources, runc, median of 5"},
	{Package: "gantry/web", Benchmark: "BenchmarkRequestToPendingApproval50", Metric: "portal_s", Report: true,
		Why: "the portal's median, seconds"},
	{Package: "gantry/web", Benchmark: "BenchmarkRequestToPendingApproval50", Metric: "timeouts", Max: 0,
		Why: "waits that ran out of their machine-scaled deadline"},
	// A portal serving in seconds on a fresh machine (issue 10).
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkColdDevStart", Metric: "healthz_s", Max: 30,
		Why: "cold gantry dev (no .data/, no bin/tofu, empty Go build cache) to /healthz answering"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkColdDevStart", Metric: "first_live_run_s", Report: true,
		Why: "cold gantry dev to the live executor ready (OpenTofu built from source), seconds"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkColdDevStart", Metric: "timeouts", Max: 0,
		Why: "waits that ran out of their machine-scaled deadline"},
	// The first ten minutes (issue 31): the README's first command on a fresh clone with
	// empty Go caches, to a live run.
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "serve_s", Max: 240,
		Why: "go tool task dev on a fresh clone, empty GOCACHE and GOMODCACHE, to /healthz answering"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "first_live_run_s", Max: 600,
		Why: "the same, to a bucket requested through the API in development SUCCEEDED"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "toolchain_ready_s", Report: true,
		Why: "the same, to the live executor ready (OpenTofu, the provider and gantry-fwd built)"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "runner_build_s", Report: true,
		Why: "the task runner built (go-task's first line)"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "gantry_build_s", Report: true,
		Why: "Gantry compiled (gantry dev's first line)"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "opentofu_s", Report: true,
		Why: "bin/tofu built (tools/tofubuild ready)"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineStart", Metric: "cpu_s", Report: true,
		Why: "CPU seconds of the command's process tree"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkSecondCloneStart", Metric: "serve_s", Max: 5,
		Why: "go tool task dev in a second clone on the same machine (warm Go caches), to /healthz answering"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineTest", Metric: "first_test_s", Report: true,
		Why: "go tool task test on a fresh clone, empty GOCACHE and GOMODCACHE, to the first test's start"},
	{Package: "gantry/cmd/gantry", Benchmark: "BenchmarkFreshMachineTest", Metric: "runner_build_s", Report: true,
		Why: "the task runner built (go-task's first line)"},
	// An approval starts its apply at once (issue 3), every re-check of DESIGN §3 made
	// (issue 30): the total holds both parts. The queue's part: commit of APPROVED to
	// the worker picking the job up (transactional enqueue, LISTEN/NOTIFY, fetch). The
	// worker's re-checks before any side effect, the policy evaluation with the current
	// bundle and modes included, are reported on their own.
	{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "pickup_p50_ms", Max: 20,
		Why: "commit of APPROVED to the apply worker picking the job up, 200 runs, median"},
	{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "pickup_p99_ms", Max: 100,
		Why: "the same, 99th percentile"},
	{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "checks_p50_ms", Report: true,
		Why: "the worker's re-checks (validity, plan digest, entitlements, policy re-evaluation, predecessor), median"},
	{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "p50_ms", Max: 20,
		Why: "commit of APPROVED to the apply about to run, its re-checks passed (both parts), median"},
	{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "p99_ms", Max: 100,
		Why: "the same, 99th percentile"},
	{Package: "gantry/runner", Benchmark: "BenchmarkApprovalToApplyStart", Metric: "timeouts", Max: 0,
		Why: "applies that never started within their machine-scaled deadline"},
	// Rate limits shared by every replica (issue 39): each decision first takes a token
	// from its session's and its address's buckets in the database, one statement. At the
	// decision rate above it must stay a small part of a decision's path: a tenth of the
	// time the approval may take to start its apply (20 ms median, 100 ms p99).
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "p50_us", Max: 2000,
		Why: "one check (session and address, two replicas), open loop at 30 a second (BenchmarkApprovalToApplyStart's 28, rounded up), median: a tenth of the approval-to-apply median's 20 ms"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "p99_us", Max: 10_000,
		Why: "the same, 99th percentile: a tenth of the approval-to-apply p99's 100 ms"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "errors", Max: 0,
		Why: "checks the database did not answer"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "ratio", Max: 2,
		Why: "the check's median over SELECT 1's at the same rate: one statement, at most one more round trip's worth"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "roundtrip_p50_us", Report: true,
		Why: "SELECT 1 at the same rate, median: the round trip alone, to read the check's figures against on a busy machine"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "flood_p99_us", Report: true,
		Why: "a flood of 1,000 checks at 500 a second, each a session and an address never seen (two new rows), 99th percentile"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "flood_p50_us", Report: true,
		Why: "the same, median"},
	{Package: "gantry/models/ratelimit", Benchmark: "BenchmarkRateLimitCheck", Metric: "flood_req_per_s", Report: true,
		Why: "the flood's rate achieved"},
	// Auditors (issue 11): a signed export of a million events, and the history page
	// of an organization with a million events.
	{Package: "gantry/models/audit", Benchmark: "BenchmarkExport1M", Metric: "events_per_s", Max: 100_000, AtLeast: true,
		Why: "an unfiltered JSON Lines export of 1,000,000 events, built by its own process"},
	{Package: "gantry/models/audit", Benchmark: "BenchmarkExport1M", Metric: "peak_rss_mb", Max: 100,
		Why: "the maximum resident set of the exporting process"},
	{Package: "gantry/models/audit", Benchmark: "BenchmarkExport1M", Metric: "build_s", Report: true,
		Why: "the build's time, seconds"},
	{Package: "gantry/models/audit", Benchmark: "BenchmarkExport1M", Metric: "file_mb", Report: true,
		Why: "the export file's size, MiB"},
	{Package: "gantry/web", Benchmark: "BenchmarkAuditHistory1M", Metric: "p99_ms", Max: 50,
		Why: "the audit history's first page with 1,000,000 events in the organization, 99th percentile of 100"},
	{Package: "gantry/web", Benchmark: "BenchmarkAuditHistory1M", Metric: "p50_ms", Report: true,
		Why: "the same, median"},
	{Package: "gantry/web", Benchmark: "BenchmarkAuditHistory1M", Metric: "filtered_p99_ms", Report: true,
		Why: "a first page filtered by environment and action, 99th percentile"},
	{Package: "gantry/web", Benchmark: "BenchmarkAuditHistory1M", Metric: "filtered_p50_ms", Report: true,
		Why: "the same, median"},
	// Everyday use (issue 12): the personal inbox with 10,000 waiting runs across two
	// organizations, under an open-loop load at a fixed rate (GANTRY_BENCH_RATE, 50/s by
	// default, for GANTRY_BENCH_SECONDS, 30).
	{Package: "gantry/web", Benchmark: "BenchmarkInbox10k", Metric: "p99_ms", Max: 50,
		Why: "the inbox's first page, 99th percentile, measured from each request's scheduled time"},
	{Package: "gantry/web", Benchmark: "BenchmarkInbox10k", Metric: "errors", Max: 0,
		Why: "answers that were not a full first page"},
	{Package: "gantry/web", Benchmark: "BenchmarkInbox10k", Metric: "p50_ms", Report: true,
		Why: "the same, median"},
	{Package: "gantry/web", Benchmark: "BenchmarkInbox10k", Metric: "req_per_s", Report: true,
		Why: "the rate achieved"},
	// The workspaces list at 10,000 workspaces across two organizations, under the same
	// open-loop load as the inbox (issue 12).
	{Package: "gantry/web", Benchmark: "BenchmarkWorkspaces10k", Metric: "p99_ms", Max: 50,
		Why: "the list's first page, 99th percentile, measured from each request's scheduled time"},
	{Package: "gantry/web", Benchmark: "BenchmarkWorkspaces10k", Metric: "errors", Max: 0,
		Why: "answers that were not a full page, each row with its last run"},
	{Package: "gantry/web", Benchmark: "BenchmarkWorkspaces10k", Metric: "p50_ms", Report: true,
		Why: "the first page, median"},
	{Package: "gantry/web", Benchmark: "BenchmarkWorkspaces10k", Metric: "req_per_s", Report: true,
		Why: "the rate achieved"},
	{Package: "gantry/web", Benchmark: "BenchmarkWorkspaces10k", Metric: "filtered_p99_ms", Report: true,
		Why: "a search, a sort by last activity and an environment filter in turn, same load, 99th percentile"},
	// API clients listing runs with 10,000 runs in the organization, with a token, under
	// the same open-loop load (issue 14).
	{Package: "gantry/web", Benchmark: "BenchmarkAPIRuns10k", Metric: "p99_ms", Max: 50,
		Why: "GET /api/v1/runs, the first page, 99th percentile, measured from each request's scheduled time"},
	{Package: "gantry/web", Benchmark: "BenchmarkAPIRuns10k", Metric: "errors", Max: 0,
		Why: "answers that were not a full page with the total"},
	{Package: "gantry/web", Benchmark: "BenchmarkAPIRuns10k", Metric: "p50_ms", Report: true,
		Why: "the first page, median"},
	{Package: "gantry/web", Benchmark: "BenchmarkAPIRuns10k", Metric: "req_per_s", Report: true,
		Why: "the rate achieved"},
	{Package: "gantry/web", Benchmark: "BenchmarkAPIRuns10k", Metric: "filtered_p99_ms", Report: true,
		Why: "a state filter, a search and the second page by its cursor in turn, same load, 99th percentile"},
	// What a browser downloads per page after the first, cache warm (issue 12).
	{Package: "gantry/web/e2e", Benchmark: "BenchmarkBytesPerNavigation", Metric: "max_kb", Max: 20,
		Why: "the largest of nine navigations (lists, run, review, workspace, dashboard), compressed on the wire, headers included"},
	{Package: "gantry/web/e2e", Benchmark: "BenchmarkBytesPerNavigation", Metric: "mean_kb", Report: true,
		Why: "the same, mean"},
	{Package: "gantry/web/e2e", Benchmark: "BenchmarkBytesPerNavigation", Metric: "first_page_kb", Report: true,
		Why: "sign-in and the first page with a cold cache (assets included), for comparison"},
	// Plan review at 10,000 changes, each a ratio to a plain encoding/json decode of the
	// same plan measured in the same run (issue 5).
	{Package: "gantry/models/classify", Benchmark: "BenchmarkClassify10k", Metric: "ratio", Max: 2, Quick: true,
		Why: "classification with dependents over the plain decode"},
	{Package: "gantry/policies", Benchmark: "BenchmarkEvaluate10k", Metric: "ratio", Max: 5, Quick: true,
		Why: "every built-in policy over the plain decode"},
	{Package: "gantry/web", Benchmark: "BenchmarkReviewPage10k", Metric: "ratio", Max: 3, Quick: true,
		Why: "the review page's first response over the plain decode"},
	{Package: "gantry/web", Benchmark: "BenchmarkReviewPage10k", Metric: "page-bytes", Max: 200 * 1024, Quick: true,
		Why: "the review page's first response stays small"},
	{Package: "gantry/models/review", Benchmark: "BenchmarkLoad10k", Metric: "ratio", Max: 2, Quick: true,
		Why: "loading a plan for review (decode and index) over the plain decode"},
	{Package: "gantry/models/review", Benchmark: "BenchmarkGraph10k", Metric: "ns/op", Max: 50e6, Quick: true,
		Why: "the blast-radius graph of a 10k plan in at most 50 ms (part of the first response)"},
	{Package: "gantry/models/review", Benchmark: "BenchmarkAttributes10k", Metric: "ns/op", Max: 10e6, Quick: true,
		Why: "one page of 50 attribute diffs (an htmx page request) in at most 10 ms"},
	// Phases as Kubernetes Jobs (issue 16): the runner's Plan called (the Job created) to
	// tofu init's first line (the container runtime's timestamp of it), 20 phases each on
	// the test cluster and in runc.
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "kube_p50_ms", Max: 2000,
		Why: "a phase's Job created to tofu started, on the single-node cluster, median of 20"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "kube_p90_ms", Max: 4000,
		Why: "the same, 90th percentile"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "kube_p99_ms", Report: true,
		Why: "the same, 99th percentile"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "kube_seen_p50_ms", Report: true,
		Why: "the same line read by the portal from the pod's followed log (the live log's lag included), median"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "kube_seen_p90_ms", Report: true,
		Why: "the same, 90th percentile"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "kube_seen_p99_ms", Report: true,
		Why: "the same, 99th percentile"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "runc_p50_ms", Report: true,
		Why: "the runc executor's start of the same phase, median of 20"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "runc_p90_ms", Report: true,
		Why: "the same, 90th percentile"},
	{Package: "gantry/runner/kube", Benchmark: "BenchmarkPhaseStart", Metric: "runc_p99_ms", Report: true,
		Why: "the same, 99th percentile"},
}

// QuickPattern is the -bench regular expression of the quick benchmarks.
func QuickPattern() string {
	seen := map[string]bool{}
	var names []string
	for _, g := range Goals {
		if g.Quick && !seen[g.Benchmark] {
			seen[g.Benchmark] = true
			names = append(names, strings.TrimPrefix(g.Benchmark, "Benchmark"))
		}
	}
	return "^Benchmark(" + strings.Join(names, "|") + ")$"
}
