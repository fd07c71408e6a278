package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
)

// scrape reads the metrics as Prometheus does: over HTTP, in the text format.
func scrape(t *testing.T, app *webtest.App) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(app.System.Metrics.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// sample finds the metric of family name whose labels include want; nil when none.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f, ok := families[name]
	if !ok {
		return nil
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// TestMetricsAfterARun: after a run is requested, approved by another person, applied
// and verified, /metrics counts it by state (read from the database), and shows the
// phase durations, the queue latency, the approval wait, the decision, the policy
// evaluation and the request latency by route observed.
func TestMetricsAfterARun(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	before := scrape(t, app)
	require.Nil(t, sample(before, "gantry_runs", map[string]string{"organization": "acme", "environment": "staging", "state": "SUCCEEDED"}),
		"no run yet")

	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	r := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(staging, "eu-west")), run.PendingApproval)
	approve(t, app, admin, r)
	waitForState(t, app, r.ID, run.Succeeded)

	families := scrape(t, app)
	succeeded := sample(families, "gantry_runs", map[string]string{"organization": "acme", "environment": "staging", "state": "SUCCEEDED"})
	require.NotNil(t, succeeded, "the run counted by state")
	require.EqualValues(t, 1, succeeded.GetGauge().GetValue())
	require.EqualValues(t, 1, sample(families, "gantry_database_gauges_up", nil).GetGauge().GetValue())

	for _, phase := range []string{"plan", "apply", "verify"} {
		m := sample(families, "gantry_run_phase_duration_seconds", map[string]string{"phase": phase, "executor": "mock", "outcome": "ok"})
		require.NotNil(t, m, "the %s duration observed", phase)
		require.GreaterOrEqual(t, m.GetHistogram().GetSampleCount(), uint64(1), phase)
		require.Positive(t, m.GetHistogram().GetSampleSum(), phase)
	}
	for _, kind := range []string{"run.plan", "run.apply", "run.verify"} {
		m := sample(families, "gantry_queue_latency_seconds", map[string]string{"kind": kind})
		require.NotNil(t, m, "the queue latency of %s observed", kind)
		require.GreaterOrEqual(t, m.GetHistogram().GetSampleCount(), uint64(1), kind)
	}
	decisions := sample(families, "gantry_decisions_total", map[string]string{"outcome": "approve"})
	require.NotNil(t, decisions)
	require.EqualValues(t, 1, decisions.GetCounter().GetValue())
	wait := sample(families, "gantry_approval_wait_seconds", map[string]string{"outcome": "approve"})
	require.NotNil(t, wait, "the approval wait observed")
	require.EqualValues(t, 1, wait.GetHistogram().GetSampleCount())
	policy := sample(families, "gantry_policy_evaluation_seconds", map[string]string{"outcome": "ok"})
	require.NotNil(t, policy)
	require.GreaterOrEqual(t, policy.GetHistogram().GetSampleCount(), uint64(1))
	requests := sample(families, "gantry_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/requests", "status": "3xx"})
	require.NotNil(t, requests, "the request form's post observed by its route")
	approvals := sample(families, "gantry_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/runs/:id/:action", "status": "3xx"})
	require.NotNil(t, approvals, "routes are patterns, never ids")
	for _, m := range families["gantry_http_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			require.NotContains(t, l.GetValue(), r.ID, "no id becomes a label")
		}
	}
	// The run's decision deadline and its approval validity are scheduled jobs: the queue
	// depth is read from River's table.
	require.NotNil(t, sample(families, "gantry_queue_jobs", map[string]string{"state": "scheduled"}), "queue depth by state")
}
