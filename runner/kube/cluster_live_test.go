//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package kube_test

// On the real single-node cluster: runs whose phases are Kubernetes Jobs running the
// runner image, against the sandbox cloud. These tests need root and the Debian packages
// the test cluster needs (kubetest says which); they fail without them.

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/db/dbtest"
	"gantry/models/idempotency"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/kube"
	"gantry/sandbox/sandboxtest"
)

// TestLiveRunAsJobs: the postgres template is planned, approved, applied and verified,
// each phase a Job; the live log reaches the run while the pods run; nothing of the
// Jobs stays in the namespace; a destroy removes everything.
func TestLiveRunAsJobs(t *testing.T) {
	e, ce := startOnCluster(t, envOptions{})
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	owner := e.LoggedIn(t, "owner@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")

	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	require.Equal(t, kube.Name, r.Runner)
	require.Equal(t, 3, r.PlanSummary.Create, e.App.RunLogs(t, r))
	approve(t, e.App, admin, r)
	r = e.App.WaitForRun(t, r.ID, run.Succeeded, phaseWait)
	require.Equal(t, 1, e.cloudObjects(t, "database"))
	require.Equal(t, 1, e.cloudObjects(t, "network"))
	require.Contains(t, string(r.Outputs), "orders.db.sandbox.internal:5432")
	logs := e.App.RunLogs(t, r)
	require.Regexp(t, `(?m)^\$ tofu apply .*plan\.bin$`, logs)
	require.Contains(t, logs, "Apply complete! Resources: 3 added")
	require.Contains(t, logs, "from the shared cache directory", "init linked the image's plugin cache")
	for _, phase := range []string{"plan", "apply", "verify"} {
		require.Positive(t, logChunks(t, e.App, r.ID, phase), "the %s's live log was stored from the pod's log", phase)
	}
	require.Len(t, e.applies(t, r), 1)
	page := webtest.ReadBody(t, e.App.Get(t, operator, "/runs/"+r.ID))
	require.Contains(t, page, `data-testid="executor">tofu/kubernetes · isolated (Kubernetes pod)<`, "the run page says where it ran")
	// Another organization's admin finds nothing of it, its logs included.
	globex := e.LoggedIn(t, "admin@globex.test")
	for _, path := range []string{"/runs/" + r.ID, "/runs/" + r.ID + "/plan.json", "/runs/" + r.ID + "/review"} {
		resp := e.App.Get(t, globex, path)
		webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	specs := ce.rec.launched()
	require.Equal(t, []string{kube.PhasePlan, kube.PhaseApply, kube.PhaseVerify}, phasesOf(specs))
	ce.requireNothingLeft(t, 30*time.Second)

	d := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindDestroy)), run.PendingApproval, phaseWait)
	require.Equal(t, 3, d.PlanSummary.Delete, e.App.RunLogs(t, d))
	approve(t, e.App, owner, d)
	e.App.WaitForRun(t, d.ID, run.Succeeded, phaseWait)
	for _, kind := range []string{"database", "subnet", "network"} {
		require.Zero(t, e.cloudObjects(t, kind), kind)
	}
	ce.requireNothingLeft(t, 30*time.Second)
	require.Zero(t, e.Portal.Sessions())
}

// TestPodDeletedMidApply: the apply's pod deleted while tofu creates the resources ends
// the run APPLY_INTERRUPTED (the lease decides, as for a dead portal); the plan is never
// applied again, and nothing of the Job stays.
func TestPodDeletedMidApply(t *testing.T) {
	cloud, written := writeSeen(3 * time.Second)
	e, ce := startOnCluster(t, envOptions{cloud: cloud})
	ce.rec.on(kube.PhaseApply, "Creating...", func(spec kube.PodSpec) {
		<-written // mid-apply: the cloud has made the first change
		ce.deletePod(t, spec)
	})
	dbtest.HoldAdvisoryLock(t, e.DB, runner.SweepLockKey)
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")

	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	approve(t, e.App, admin, r)
	interruptedForGood(t, e, r)
	require.Equal(t, []string{kube.PhasePlan, kube.PhaseApply}, phasesOf(ce.rec.launched()), "one apply Job, never another")
	ce.requireNothingLeft(t, 30*time.Second)
}

// TestCancelledPlanLeavesNothing: a plan cancelled while its pod runs (tofu refreshing
// against a slow cloud) stops at the worker's next heartbeat; its Job, pod and Secret are
// all gone when the phase returns.
func TestCancelledPlanLeavesNothing(t *testing.T) {
	// Once slow is set, the cloud holds every read for a minute.
	var slow atomic.Bool
	e, ce := startOnCluster(t, envOptions{cloud: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/") {
				select { // the slow cloud under test, not a wait
				case <-r.Context().Done():
				case <-time.After(time.Minute):
				}
			}
			next.ServeHTTP(w, r)
		})
	}})
	operator := e.LoggedIn(t, "operator@acme.test")
	dev := e.OrgEnvironmentID(t, "acme", "development")
	e.App.WaitForRun(t, e.App.RequestRun(t, operator, bucketInputs(dev, "logs", "30")), run.Succeeded, phaseWait)
	ce.requireNothingLeft(t, 30*time.Second)

	// The next plan refreshes the bucket: the cloud holds its read.
	slow.Store(true)
	refreshing := make(chan kube.PodSpec, 1)
	ce.rec.on(kube.PhasePlan, "Refreshing state...", func(spec kube.PodSpec) { refreshing <- spec })
	id := e.App.RequestRun(t, operator, bucketInputs(dev, "logs", "60"))
	spec := bench.Receive(t, "the plan to begin refreshing", phaseWait, refreshing)
	_, err := ce.client.BatchV1().Jobs(ce.ns).Get(t.Context(), spec.Job, metav1.GetOptions{})
	require.NoError(t, err, "the plan's Job runs")
	resp := e.PostForm(t, operator, "/runs/"+id+"/cancel", url.Values{"_csrf": {e.CSRF(t, operator)}, "idempotency_key": {idempotency.NewKey()},
		"reason": {"not now"}, "confirm": {"yes"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	e.App.WaitForRun(t, id, run.Cancelled, time.Minute)
	// The phase returns (its session closes) only once its Job, pod and Secret are gone.
	bench.Eventually(t, "the cancelled phase to return", 2*time.Minute, func() (bool, any) {
		n := e.Portal.Sessions()
		return n == 0, fmt.Sprintf("%d phase sessions open", n)
	}, bench.Poll(100*time.Millisecond))
	require.Empty(t, ce.leftovers(t))
}

// TestStopApplyAsJobs: an apply whose pod is halfway (the network and subnet created,
// the database's create held by the cloud) is cancelled: the run is APPLY_INTERRUPTED
// with the canceller and reason at once; the portal deletes the pod, whose SIGTERM
// reaches gantry-phase, which interrupts tofu (it says so in the log the portal follows
// to the end); tofu stores the state it wrote, which equals what the cloud holds; the
// plan was attempted once; the workspace stays the run's until an admin recovers it,
// and nothing of the Job stays.
func TestStopApplyAsJobs(t *testing.T) {
	wrap, reached, release := sandboxtest.HoldCreate("database")
	e, ce := startOnCluster(t, envOptions{cloud: wrap})
	operator := e.LoggedIn(t, "operator@acme.test")
	admin := e.LoggedIn(t, "admin@acme.test")
	staging := e.OrgEnvironmentID(t, "acme", "staging")

	r := e.App.WaitForRun(t, e.App.RequestRun(t, operator, postgresInputs(staging, "orders-db", run.KindApply)), run.PendingApproval, phaseWait)
	approve(t, e.App, admin, r)
	bench.Receive(t, "the apply to reach the database's create", phaseWait, reached)
	e.App.StopApply(t, admin, r.ID, "stop: the subnet range is wrong")
	stopped := e.App.WaitForRun(t, r.ID, run.ApplyInterrupted, phaseWait)
	require.Equal(t, run.EndApplyCancelled, stopped.Ending)
	require.Contains(t, stopped.StateReason, "stop: the subnet range is wrong")
	e.App.WaitLiveLog(t, stopped, run.JobApply, "Interrupt received", phaseWait)
	close(release)

	stopped = e.App.WaitStopped(t, r.ID, phaseWait)
	log := e.App.RunLogs(t, stopped)
	require.NotNil(t, stopped.NewStateVersionID, "the state the apply wrote is stored"+log)
	require.Equal(t, sandboxtest.ObjectIDs(t, e.CloudDir), e.App.StateIDs(t, r.OrganizationID, r.WorkspaceID), "the stored state is what the cloud holds"+log)
	require.Zero(t, e.cloudObjects(t, "database"), "the cancelled apply's token no longer changes the cloud"+log)
	require.Len(t, e.applies(t, stopped), 1, "the plan was attempted once")
	var slot string
	require.NoError(t, e.DB.Raw("SELECT coalesce(active_run_id, '') FROM workspaces WHERE id = ?", r.WorkspaceID).Scan(&slot).Error)
	require.Equal(t, r.ID, slot, "the workspace stays the stopped run's until an admin recovers it")
	ce.requireNothingLeft(t, 30*time.Second)

	// An admin recovers it: the run ends FAILED (RECOVERED) and the workspace is free.
	resp := e.PostForm(t, admin, "/runs/"+r.ID+"/recover", url.Values{"_csrf": {e.CSRF(t, admin)}, "idempotency_key": {idempotency.NewKey()},
		"reason": {"checked the network and subnet in the cloud"}})
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	recovered := e.App.WaitForRun(t, r.ID, run.Failed, phaseWait)
	require.Equal(t, run.EndRecovered, recovered.Ending)
	require.NoError(t, e.DB.Raw("SELECT coalesce(active_run_id, '') FROM workspaces WHERE id = ?", r.WorkspaceID).Scan(&slot).Error)
	require.Empty(t, slot, "recovered: the workspace is free for the next run")
}
