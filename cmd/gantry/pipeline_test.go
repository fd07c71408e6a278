package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	runs "gantry/models/run"
)

var reviewURL = regexp.MustCompile(`/runs/(run-[a-z0-9]+)/review`)

// TestPipelineCommands drives the CLI end to end against a portal wired as gantry dev
// wires it, with API tokens in GANTRY_TOKEN: a request that applies exits 0, one still
// waiting for a decision at --timeout exits 2, one rejected while it waits exits 1;
// gantry approve approves only the plan digest it was given; gantry runs lists; gantry
// audit export saves an export that gantry audit verify accepts.
func TestPipelineCommands(t *testing.T) {
	app := webtest.Start(t)
	requester := app.NewMember(t, "acme", "Pia Pipeline", authz.RoleOperator, false)
	approver := app.NewMember(t, "acme", "Ada Approver", authz.RoleAdmin, false)
	auditor := app.NewMember(t, "acme", "Aldo Auditor", authz.RoleAuditor, false)
	requesterToken, approverToken := app.Token(t, requester, "read", "plan", "apply"), app.Token(t, approver, "read", "decide")
	t.Setenv("GANTRY_URL", app.URL)
	cli := func(token string, args ...string) (int, string) {
		t.Helper()
		t.Setenv("GANTRY_TOKEN", token)
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	// cliAsync runs the CLI as token on a goroutine of its own (the environment is set
	// first, on the test's goroutine) and delivers its exit code and output. The test
	// bounds the wait for it with a budget, so a command that waits (--wait) is given a
	// --timeout (forever) that the budget always ends first.
	type cliResult struct {
		code int
		out  string
	}
	const forever = "1h"
	cliAsync := func(token string, args ...string) <-chan cliResult {
		t.Helper()
		t.Setenv("GANTRY_TOKEN", token)
		done := make(chan cliResult, 1)
		go func() {
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			done <- cliResult{code, out.String() + errOut.String()}
		}()
		return done
	}
	bucket := func(env, workspace, timeout string) []string {
		return []string{"request", "--template", "bucket", "--env", env, "--workspace", workspace, "--var", "name=" + workspace,
			"--var", "retention_days=30", "--var", "region=eu-west", "--wait", "--timeout", timeout, "--poll", "50ms"}
	}
	stateOf := func(id string) runs.State {
		var r runs.Run
		require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
		return r.State
	}

	// Without the environment, a usage error; without a token, one too.
	code, out := cli(requesterToken, "request", "--template", "bucket")
	require.Equal(t, 2, code, out)
	code, out = cli("", bucket("development", "cli-dev", "1s")...)
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "GANTRY_TOKEN")
	// A refusal names its field.
	code, out = cli(requesterToken, bucket("nowhere", "cli-dev", "1s")...)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "INVALID_INPUT")
	require.Contains(t, out, "environment: There is no environment named")

	// Development applies without a decision: exit 0.
	applied := bench.Receive(t, "gantry request --wait to see the development run applied", 2*time.Minute,
		cliAsync(requesterToken, bucket("development", "cli-dev", forever)...))
	require.Equal(t, 0, applied.code, applied.out)
	require.Contains(t, applied.out, "SUCCEEDED")
	require.Regexp(t, reviewURL, applied.out, "the review URL is printed")

	// Staging waits for an operator who is not the requester: exit 2 at the timeout.
	// The 1 s --timeout is the subject (fixed); which state the run is still in after it
	// depends on the machine's pace (planning may outlast it), so any state before the
	// decision will do, and the test then waits for the decision's.
	code, out = cli(requesterToken, bucket("staging", "cli-staging", "1s")...)
	require.Equal(t, 2, code, out)
	require.Regexp(t, `Still (QUEUED|PLANNING|PLANNED|PENDING_APPROVAL) after 1s`, out)
	waiting := reviewURL.FindStringSubmatch(out)[1]
	app.WaitForRun(t, waiting, runs.PendingApproval, 20*time.Second)

	// gantry approve binds to the digest the person reviewed: another digest approves
	// nothing; the reviewed one approves, and the run applies.
	code, out = cli(approverToken, "approve", waiting, "--plan-digest", "sha256:not-the-reviewed-plan")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "not the plan you reviewed")
	require.Equal(t, runs.PendingApproval, stateOf(waiting))
	resp := app.API(t, approverToken, http.MethodGet, "/api/v1/runs/"+waiting+"/review", "")
	reviewJSON := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, reviewJSON)
	var review struct {
		Evidence struct {
			PlanDigest string `json:"plan_digest"`
		} `json:"evidence"`
	}
	require.NoError(t, json.Unmarshal([]byte(reviewJSON), &review))
	saved := filepath.Join(t.TempDir(), "review.json")
	require.NoError(t, os.WriteFile(saved, []byte(reviewJSON), 0o600))
	code, out = cli(requesterToken, "approve", waiting, "--plan-digest", review.Evidence.PlanDigest, "--evidence", saved)
	require.Equal(t, 1, code, "four eyes, over the CLI too: %s", out)
	require.Contains(t, out, "FORBIDDEN")
	code, out = cli(approverToken, "approve", waiting, "--plan-digest", review.Evidence.PlanDigest, "--evidence", saved)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Approved run #1")
	app.WaitForRun(t, waiting, runs.Succeeded, 20*time.Second)

	// Rejected while the CLI waits: exit 1.
	wake, stop := app.Server.Changes.Subscribe(app.Orgs["acme"], "")
	defer stop()
	done := cliAsync(requesterToken, bucket("staging", "cli-rejected", forever)...)
	var rejected runs.Run
	bench.Eventually(t, "the CLI's run to wait for its decision", 20*time.Second, func() (bool, any) {
		select {
		case got := <-done:
			t.Fatalf("the CLI returned before its run waited for a decision: %d %s", got.code, got.out)
		default:
		}
		err := app.DB.Where("template_name = 'bucket' AND state = ? AND id <> ?", runs.PendingApproval, waiting).Order("created_at DESC").Take(&rejected).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return false, "no such run yet"
		}
		require.NoError(t, err)
		return true, nil
	}, bench.Wake(wake))
	resp = app.API(t, approverToken, http.MethodGet, "/api/v1/runs/"+rejected.ID+"/review", "")
	var ev struct {
		Evidence json.RawMessage `json:"evidence"`
	}
	require.NoError(t, json.Unmarshal([]byte(webtest.ReadBody(t, resp)), &ev))
	resp = app.API(t, approverToken, http.MethodPost, "/api/v1/runs/"+rejected.ID+"/reject",
		`{"evidence":`+string(ev.Evidence)+`,"reason":"not this bucket"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, webtest.ReadBody(t, resp))
	got := bench.Receive(t, "the CLI to see the rejection", 40*time.Second, done)
	require.Equal(t, 1, got.code, got.out)
	require.Contains(t, got.out, "REJECTED")

	// gantry runs lists what the token may see.
	code, out = cli(requesterToken, "runs", "--mine")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, waiting)
	require.Contains(t, out, rejected.ID)
	require.Contains(t, out, "REJECTED")

	// gantry audit export saves an export gantry audit verify accepts with the
	// organization's published keys.
	auditToken := app.Token(t, auditor, "audit")
	dir := t.TempDir()
	file := filepath.Join(dir, "audit.ndjson")
	code, out = cli(auditToken, "audit", "export", "-o", file)
	require.Equal(t, 0, code, out)
	resp = app.API(t, auditToken, http.MethodGet, "/api/v1/audit/keys", "")
	keys := filepath.Join(dir, "keys.json")
	require.NoError(t, os.WriteFile(keys, []byte(webtest.ReadBody(t, resp)), 0o600))
	code, out = cli("", "audit", "verify", file, "--keys-url", keys)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "OK")
	code, out = cli(requesterToken, "audit", "export", "-o", filepath.Join(dir, "refused.ndjson"))
	require.Equal(t, 1, code, "an operator's token exports nothing: %s", out)
	require.Contains(t, out, "FORBIDDEN")
}
