package breakglass

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/run"
	"gantry/models/runport"
)

var (
	t0  = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	env = environment.Environment{ID: "env-1", OrganizationID: "org-1", Name: "production"}
)

func actor(id string, role authz.Role, live bool) run.Actor {
	return run.Actor{Subject: authz.Subject{UserID: id, Name: id, OrganizationID: "org-1", Role: role}, CloudLive: live}
}

func requested() Window {
	w := Window{ID: "bgw-1", OrganizationID: "org-1", EnvironmentID: env.ID, WorkspaceID: "ws-1", State: Requested, Reason: "INC-42 database failover",
		DurationMinutes: 60, RequestedBy: "usr-op", RequestedByName: "Olivia", DecisionDeadline: t0.Add(time.Hour)}
	w.TermsDigest = TermsOf(w).Digest()
	return w
}

// TestWhoDecidesAWindow: an admin or owner with cloud.live decides, never the
// requester; operators and auditors do not; another organization or a hidden
// environment is not found; after the deadline a decision is APPROVAL_EXPIRED.
func TestWhoDecidesAWindow(t *testing.T) {
	t.Parallel()
	w := requested()
	for _, c := range []struct {
		who  run.Actor
		code errs.Code
	}{
		{actor("usr-admin", authz.RoleAdmin, true), ""},
		{actor("usr-owner", authz.RoleOwner, true), ""},
		{actor("usr-op", authz.RoleAdmin, true), errs.CodeForbidden}, // the requester, even as an admin
		{actor("usr-op2", authz.RoleOperator, true), errs.CodeForbidden},
		{actor("usr-aud", authz.RoleAuditor, true), errs.CodeForbidden},
		{actor("usr-admin2", authz.RoleAdmin, false), errs.CodeForbidden}, // no cloud.live
	} {
		p := PermissionsOf(w, c.who, env, t0)
		require.Equal(t, c.code, codeOf(p.Approve), c.who.UserID)
	}
	admin := actor("usr-admin", authz.RoleAdmin, false)
	require.True(t, PermissionsOf(w, admin, env, t0).Reject.Allowed(), "rejecting needs no cloud.live")

	other := actor("usr-admin", authz.RoleAdmin, true)
	other.OrganizationID = "org-2"
	require.Equal(t, errs.CodeNotFound, codeOf(PermissionsOf(w, other, env, t0).Approve))
	hidden := env
	hidden.Restricted = true
	op := actor("usr-op2", authz.RoleOperator, true)
	require.Equal(t, errs.CodeNotFound, codeOf(PermissionsOf(w, op, hidden, t0).Cancel))
	require.False(t, PermissionsOf(w, op, hidden, t0).Visible)

	late := PermissionsOf(w, actor("usr-admin", authz.RoleAdmin, true), env, t0.Add(time.Hour))
	require.Equal(t, errs.CodeApprovalExpired, codeOf(late.Approve))
}

// TestApprovalBindsTheTerms: an approval names the terms digest the page showed; a
// digest of other terms (another length, reason, workspace or requester) is stale
// evidence, and the approval is good for run.ApprovalValidity to open the window.
func TestApprovalBindsTheTerms(t *testing.T) {
	t.Parallel()
	w := requested()
	longer := w
	longer.DurationMinutes = 240
	require.NotEqual(t, TermsOf(w).Digest(), TermsOf(longer).Digest())
	require.Equal(t, errs.CodeStaleEvidence, errs.CodeOf(w.Approve(Decider{UserID: "usr-admin"}, TermsOf(longer).Digest(), t0, run.ApprovalValidity)))
	require.Equal(t, Requested, w.State)

	require.NoError(t, w.Approve(Decider{UserID: "usr-admin", Name: "Ada"}, w.TermsDigest, t0, run.ApprovalValidity))
	require.Equal(t, Approved, w.State)
	require.Equal(t, t0.Add(run.ApprovalValidity), *w.ApprovalExpiresAt)
	requester := actor("usr-op", authz.RoleOperator, true)
	require.True(t, PermissionsOf(w, requester, env, t0.Add(time.Minute)).Open.Allowed())
	require.Equal(t, errs.CodeForbidden, codeOf(PermissionsOf(w, actor("usr-admin", authz.RoleAdmin, true), env, t0).Open), "only the requester opens it")
	require.Equal(t, errs.CodeApprovalExpired, codeOf(PermissionsOf(w, requester, env, t0.Add(run.ApprovalValidity)).Open))

	demoted := actor("usr-op", authz.RoleViewer, true)
	require.Equal(t, errs.CodeForbidden, codeOf(PermissionsOf(w, demoted, env, t0).Open), "a requester demoted since opens nothing")
	require.NoError(t, w.OpenNow(Decider{UserID: "usr-op"}, t0.Add(time.Minute)))
	require.Equal(t, errs.CodeForbidden, codeOf(PermissionsOf(w, demoted, env, t0.Add(2*time.Minute)).Credentials), "nor gets credentials")
	require.Equal(t, t0.Add(time.Minute+time.Hour), *w.EndsAt)
	p := PermissionsOf(w, requester, env, t0.Add(2*time.Minute))
	require.True(t, p.Credentials.Allowed())
	require.True(t, p.End.Allowed())
	require.False(t, p.Codify.Allowed(), "nothing to codify while it is open")
	require.Equal(t, errs.CodeConflict, codeOf(PermissionsOf(w, requester, env, *w.EndsAt).Credentials), "no credentials once its time is up")
}

// TestAfterTheWindow: an ended window awaits codification, which anyone who may request
// live runs asks for; only an owner closes it uncodified; a terminal window moves no
// more.
func TestAfterTheWindow(t *testing.T) {
	t.Parallel()
	w := requested()
	require.NoError(t, w.Approve(Decider{UserID: "usr-admin"}, w.TermsDigest, t0, run.ApprovalValidity))
	require.NoError(t, w.OpenNow(Decider{UserID: "usr-op"}, t0))
	require.NoError(t, w.End("its time was up", t0.Add(time.Hour)))
	require.Equal(t, AwaitingCodification, w.State)
	op, admin, owner := actor("usr-op2", authz.RoleOperator, true), actor("usr-admin", authz.RoleAdmin, true), actor("usr-owner", authz.RoleOwner, false)
	require.True(t, PermissionsOf(w, op, env, t0).Codify.Allowed())
	require.Equal(t, errs.CodeForbidden, codeOf(PermissionsOf(w, actor("usr-v", authz.RoleViewer, true), env, t0).Codify))
	require.Equal(t, errs.CodeForbidden, codeOf(PermissionsOf(w, admin, env, t0).Close), "closing uncodified is an owner's")
	require.True(t, PermissionsOf(w, owner, env, t0).Close.Allowed())
	require.Error(t, checkCloseReason("too short"))
	require.NoError(t, checkCloseReason("handled by a forward fix in run #9"))

	d := Decider{UserID: "usr-owner", Name: "Owen"}
	require.NoError(t, w.Close(&d, "handled by a forward fix in run #9"))
	require.Equal(t, Closed, w.State)
	require.True(t, w.State.Terminal())
	require.Error(t, w.Codify("late"))
	require.Equal(t, errs.CodeConflict, codeOf(PermissionsOf(w, owner, env, t0).Close))
}

// TestRequestChecks: a reason of 10 characters at least, a length of 5 minutes to 4
// hours in whole minutes; who may ask (provisioning.plan, a grant, cloud.live).
func TestRequestChecks(t *testing.T) {
	t.Parallel()
	ok := Request{Reason: "INC-42 failover", Duration: time.Hour}
	require.Nil(t, ok.check().Err())
	for name, r := range map[string]Request{
		"short reason":   {Reason: "too short", Duration: time.Hour},
		"NUL":            {Reason: "INC-42 fail\x00over", Duration: time.Hour},
		"too short":      {Reason: "INC-42 failover", Duration: time.Minute},
		"too long":       {Reason: "INC-42 failover", Duration: 5 * time.Hour},
		"not whole":      {Reason: "INC-42 failover", Duration: 90 * time.Second},
		"negative value": {Reason: "INC-42 failover", Duration: -time.Minute},
	} {
		require.Error(t, r.check().Err(), name)
	}
	for _, c := range []struct {
		who  run.Actor
		says string
	}{{actor("usr-v", authz.RoleViewer, true), "does not change workspaces"}, {actor("usr-op", authz.RoleOperator, false), "the live-cloud entitlement"}} {
		v := &errs.Validation{}
		mayRequest(c.who, env, v)
		require.Contains(t, v.Fields["workspace"], c.says, c.who.UserID)
	}
	hidden := env
	hidden.Restricted = true
	v := &errs.Validation{}
	mayRequest(actor("usr-op", authz.RoleOperator, true), hidden, v)
	require.Contains(t, v.Fields["workspace"], "restricted")
	v = &errs.Validation{}
	mayRequest(actor("usr-op", authz.RoleOperator, true), env, v)
	require.Nil(t, v.Err())
}

func codeOf(v runport.Verdict) errs.Code {
	if v.Allowed() {
		return ""
	}
	return v.Code()
}
