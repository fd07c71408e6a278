package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	runs "gantry/models/run"
	"gantry/models/state"
	"gantry/models/state/statetest"
)

var reviewURL = regexp.MustCompile(`/runs/(run-[a-z0-9]+)/review`)

// cliAs runs the CLI with a token in GANTRY_TOKEN and answers its exit code and output.
func cliAs(t *testing.T) func(token string, args ...string) (int, string) {
	return func(token string, args ...string) (int, string) {
		t.Helper()
		t.Setenv("GANTRY_TOKEN", token)
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
}

// TestPipelineCommands drives the CLI end to end against a portal wired as gantry dev
// wires it, with API tokens in GANTRY_TOKEN: a request that applies exits 0, one still
// waiting for a decision at --timeout exits 2, one rejected (gantry reject) while it
// waits exits 1; gantry approve approves the review gantry review saved; gantry runs
// lists; gantry audit export saves an export that gantry audit verify accepts.
func TestPipelineCommands(t *testing.T) {
	app := webtest.Start(t)
	requester := app.NewMember(t, "acme", "Pia Pipeline", authz.RoleOperator, false)
	approver := app.NewMember(t, "acme", "Ada Approver", authz.RoleAdmin, false)
	auditor := app.NewMember(t, "acme", "Aldo Auditor", authz.RoleAuditor, false)
	requesterToken, approverToken := app.Token(t, requester, "read", "plan", "apply"), app.Token(t, approver, "read", "decide")
	t.Setenv("GANTRY_URL", app.URL)
	cli := cliAs(t)
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

	// gantry review saves what the approver reads, and gantry approve binds to that file
	// (TestDecisionsBindToTheReviewedEvidence holds the refusals): with a digest handed
	// over apart from the file that names another plan, nothing is approved; the
	// requester's approval is refused (four eyes); the approver's approves, and the run
	// applies.
	saved := filepath.Join(t.TempDir(), "review.json")
	code, out = cli(approverToken, "review", waiting, "--json", "-o", saved)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Saved to "+saved)
	reviewJSON, err := os.ReadFile(saved)
	require.NoError(t, err)
	var review struct {
		Evidence struct {
			PlanDigest string `json:"plan_digest"`
		} `json:"evidence"`
	}
	require.NoError(t, json.Unmarshal(reviewJSON, &review))
	code, out = cli(approverToken, "approve", waiting, "--evidence", saved, "--plan-digest", "sha256:not-the-reviewed-plan")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "not of sha256:not-the-reviewed-plan")
	require.Equal(t, runs.PendingApproval, stateOf(waiting))
	code, out = cli(requesterToken, "approve", waiting, "--evidence", saved)
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
	rejectedReview := filepath.Join(t.TempDir(), "rejected.json")
	code, out = cli(approverToken, "review", rejected.ID, "-o", rejectedReview)
	require.Equal(t, 0, code, out)
	code, out = cli(approverToken, "reject", rejected.ID, "--evidence", rejectedReview, "--reason", "not this bucket")
	require.Equal(t, 0, code, out)
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
	// Without --to it runs to now, this second's events included: the audit token's
	// issue, made just before it, is in the file.
	var issued string
	require.NoError(t, app.DB.Raw("SELECT target_id FROM audit_events WHERE action = 'api_token.issued' ORDER BY id DESC LIMIT 1").Scan(&issued).Error)
	exported, readErr := os.ReadFile(file)
	require.NoError(t, readErr)
	require.Contains(t, string(exported), issued, "the newest event before the export")
	resp := app.API(t, auditToken, http.MethodGet, "/api/v1/audit/keys", "")
	keys := filepath.Join(dir, "keys.json")
	require.NoError(t, os.WriteFile(keys, []byte(webtest.ReadBody(t, resp)), 0o600))
	code, out = cli("", "audit", "verify", file, "--keys-url", keys)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "OK")
	code, out = cli(requesterToken, "audit", "export", "-o", filepath.Join(dir, "refused.ndjson"))
	require.Equal(t, 1, code, "an operator's token exports nothing: %s", out)
	require.Contains(t, out, "FORBIDDEN")
}

// TestDecisionsBindToTheReviewedEvidence: gantry approve and gantry reject send the
// evidence gantry review saved, never the run's evidence when they are sent. Without
// the file they refuse and say how to save it; with the reviewed file they decide; with
// a file saved before a state write of the workspace the portal, comparing under the
// run's row lock, answers STALE_EVIDENCE and nothing is decided.
func TestDecisionsBindToTheReviewedEvidence(t *testing.T) {
	app := webtest.Start(t)
	requester := app.NewMember(t, "acme", "Pia Pipeline", authz.RoleOperator, false)
	approver := app.NewMember(t, "acme", "Ada Approver", authz.RoleAdmin, false)
	requesterToken, approverToken := app.Token(t, requester, "read", "plan", "apply"), app.Token(t, approver, "read", "decide")
	t.Setenv("GANTRY_URL", app.URL)
	cli := cliAs(t)
	request := func(workspace string) runs.Run {
		t.Helper()
		code, out := cli(requesterToken, "request", "--template", "bucket", "--env", "staging", "--workspace", workspace,
			"--var", "name="+workspace, "--var", "retention_days=30", "--var", "region=eu-west")
		require.Equal(t, 0, code, out)
		return app.WaitForRun(t, reviewURL.FindStringSubmatch(out)[1], runs.PendingApproval, 20*time.Second)
	}
	dir := t.TempDir()
	review := func(id string) string {
		t.Helper()
		file := filepath.Join(dir, id+".json")
		code, out := cli(approverToken, "review", id, "--json", "-o", file)
		require.Equal(t, 0, code, out)
		return file
	}
	stateOf := func(id string) runs.State {
		t.Helper()
		var r runs.Run
		require.NoError(t, app.DB.Where("id = ?", id).Take(&r).Error)
		return r.State
	}
	toApprove, toReject := request("cli-approved"), request("cli-rejected")
	moved, writer := request("cli-moved"), request("cli-moved")

	// The help says it before anyone tries.
	code, out := cli("", "help", "approve")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Without it nothing is approved")
	code, out = cli("", "help", "reject")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Without the evidence nothing is rejected")

	// The summary a person reads is of the run's plan.
	code, out = cli(approverToken, "review", toReject.ID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, toReject.PlanDigest)
	require.Regexp(t, `Changes\s+\d+ to create, 0 to update, 0 to replace, 0 to destroy`, out)
	require.Regexp(t, `You may approve\s+yes`, out)
	require.Contains(t, out, "gantry review "+toReject.ID+" --json -o review.json")

	// Without the reviewed evidence: a usage refusal that says how to get it, and the
	// runs still wait.
	for _, args := range [][]string{{"approve", toApprove.ID}, {"reject", toReject.ID, "--reason", "not this bucket"}} {
		code, out := cli(approverToken, args...)
		require.Equal(t, 2, code, out)
		require.Contains(t, out, "gantry "+args[0]+": --evidence FILE is required")
		require.Contains(t, out, "gantry review "+args[1]+" --json -o review.json")
	}
	// Another run's evidence, or a rejection without a reason, is refused before it is sent.
	code, out = cli(approverToken, "approve", toApprove.ID, "--evidence", review(toReject.ID))
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "is the evidence of run \""+toReject.ID+"\", not of "+toApprove.ID)
	code, out = cli(approverToken, "reject", toReject.ID, "--evidence", review(toReject.ID))
	require.Equal(t, 2, code, out)
	require.Contains(t, out, "--reason is required")
	require.Equal(t, runs.PendingApproval, stateOf(toApprove.ID))
	require.Equal(t, runs.PendingApproval, stateOf(toReject.ID))

	// What is sent is the file, not the run's evidence now: a file naming another plan is
	// refused on a run that still waits.
	reviewed := review(toApprove.ID)
	raw, err := os.ReadFile(reviewed)
	require.NoError(t, err)
	other := filepath.Join(dir, "other-plan.json")
	require.NoError(t, os.WriteFile(other, bytes.Replace(raw, []byte(toApprove.PlanDigest), []byte("sha256:"+strings.Repeat("0", 64)), -1), 0o600))
	code, out = cli(approverToken, "approve", toApprove.ID, "--evidence", other)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "refused: STALE_EVIDENCE")
	require.Equal(t, runs.PendingApproval, stateOf(toApprove.ID))

	// With the reviewed evidence: approved (and applied), rejected.
	code, out = cli(approverToken, "approve", toApprove.ID, "--evidence", reviewed)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Approved run #1 (plan "+toApprove.PlanDigest+")")
	app.WaitForRun(t, toApprove.ID, runs.Succeeded, 20*time.Second)
	code, out = cli(approverToken, "reject", toReject.ID, "--evidence", review(toReject.ID), "--reason", "not this bucket")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "Rejected run #1")
	require.Equal(t, runs.Rejected, stateOf(toReject.ID))

	// A file saved before a state write: another job of the workspace writes state
	// through the backend (as a live apply does), the run moves on, and the file's
	// evidence is refused.
	saved := review(moved.ID)
	ctx := context.Background()
	user, pass, err := app.System.StateStore.IssueCredentials(ctx, writer.OrganizationID, writer.WorkspaceID, writer.ID, state.PhaseApply, time.Minute)
	require.NoError(t, err)
	cred, err := app.System.State.Authenticate(ctx, user, pass)
	require.NoError(t, err)
	require.NoError(t, app.System.State.Write(ctx, cred, writer.WorkspaceID, "", statetest.StateJSON(3, "6c1d0d1e-0000-4000-8000-00000000cafe", "written")))
	app.WaitForRun(t, moved.ID, runs.Stale, 20*time.Second)
	for _, args := range [][]string{{"approve", moved.ID, "--evidence", saved}, {"reject", moved.ID, "--evidence", saved, "--reason", "too late"}} {
		code, out := cli(approverToken, args...)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "gantry "+args[0]+": refused: STALE_EVIDENCE")
	}
	require.Equal(t, runs.Stale, stateOf(moved.ID))
}
