package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/models/run"
)

// addRule maps group to role in organization slug, as a new owner of it.
func addRule(t *testing.T, app *webtest.App, slug, group string, role authz.Role, live bool) org.GroupRule {
	t.Helper()
	owner := app.NewMember(t, slug, "Rule Owner", authz.RoleOwner, false)
	rule, err := app.System.GroupRules.AddRule(authz.WithSubject(context.Background(), owner.Subject(time.Now())),
		org.RuleInput{Group: group, Role: role, CloudLive: live})
	require.NoError(t, err)
	return rule
}

// membershipOf is subject's membership of organization orgID (nil: none).
func membershipOf(t *testing.T, app *webtest.App, orgID, subject string) *org.Membership {
	t.Helper()
	var ms []org.Membership
	require.NoError(t, app.DB.Raw(`SELECT m.* FROM memberships m JOIN users u ON u.id = m.user_id
	        WHERE m.organization_id = ? AND u.subject = ?`, orgID, subject).Scan(&ms).Error)
	if len(ms) == 0 {
		return nil
	}
	return &ms[0]
}

// ruleAudit is the data of the last audit event action about user userID.
func ruleAudit(t *testing.T, app *webtest.App, action, userID string) map[string]any {
	t.Helper()
	var raw []string
	require.NoError(t, app.DB.Raw("SELECT data::text FROM audit_events WHERE action = ? AND target_id = ? ORDER BY id DESC LIMIT 1",
		action, userID).Scan(&raw).Error)
	require.Len(t, raw, 1, "an audit event %s about %s", action, userID)
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw[0]), &data))
	return data
}

// signInWithGroups signs the development provider's user subject (password) in with
// groups as their groups claim, in a new browser, and returns the landing response's
// status and body.
func signInWithGroups(t *testing.T, app *webtest.App, subject, username, password string, groups ...string) (int, string) {
	t.Helper()
	require.NoError(t, app.IDP.SetGroups(subject, groups))
	resp := app.LoginAs(t, app.Client(t), username, password)
	return resp.StatusCode, webtest.ReadBody(t, resp)
}

// directoryGroup provisions, with SCIM token, one active directory user per user (the
// JSON members after "schemas", such as `"externalId":"x","userName":"x@y"`) and a group
// displayed as name holding them all; it returns the users' ids and the group's id.
func directoryGroup(t *testing.T, app *webtest.App, token, name string, users ...string) ([]string, string) {
	t.Helper()
	var ids, members []string
	for _, u := range users {
		status, body := scimCall(t, app, token, "POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],`+u+`,"active":true}`)
		require.Equal(t, http.StatusCreated, status, body)
		var user struct{ ID string }
		require.NoError(t, json.Unmarshal([]byte(body), &user))
		ids = append(ids, user.ID)
		members = append(members, `{"value":"`+user.ID+`"}`)
	}
	status, body := scimCall(t, app, token, "POST", "/scim/v2/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],
		"displayName":"`+name+`","members":[`+strings.Join(members, ",")+`]}`)
	require.Equal(t, http.StatusCreated, status, body)
	var group struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &group))
	return ids, group.ID
}

// TestGroupRuleAdmitsAndEnds: a sign-in with a mapped group makes a member with that
// rule's role; the next sign-in without it ends the membership, with an audit row, and
// the person's approval and place among a waiting run's deciders go: the decision waits
// for the others.
func TestGroupRuleAdmitsAndEnds(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme := app.Orgs["acme"]
	addRule(t, app, "acme", "/platform/approvers", authz.RoleAdmin, false)
	addRule(t, app, "acme", "engineers", authz.RoleOperator, true)

	status, body := signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "/platform/approvers", "engineers", "other")
	require.Equal(t, http.StatusOK, status, body)
	m := membershipOf(t, app, acme, "newcomer")
	require.NotNil(t, m, "a mapped group admits")
	require.Equal(t, authz.RoleAdmin, m.Role, "the highest mapped role")
	require.True(t, m.CloudLive, "cloud.live from the engineers rule")
	require.Equal(t, org.SourceRule, m.Source)
	admitted := ruleAudit(t, app, "membership.rule_admitted", m.UserID)
	require.Equal(t, "admin", admitted["role"])
	require.Equal(t, []any{"/platform/approvers", "engineers"}, admitted["groups"])
	require.Nil(t, membershipOf(t, app, app.Orgs["globex"], "newcomer"), "another organization's rules are its own")

	// A run waits for a decision the newcomer may make; another one they approve.
	operator := app.LoggedIn(t, "operator@acme.test")
	waiting := waitingIn(t, app, operator, "rules-waiting")
	approved := waitingIn(t, app, operator, "rules-approved")
	app.StopQueue(t) // the approved run waits for its apply
	newcomer := webtest.Member{UserID: m.UserID, Name: "Nora Newcomer", OrgID: acme, Role: authz.RoleAdmin, CloudLive: true}
	approvedBy(t, app, approved, newcomer)
	require.EqualValues(t, 1, countRows(t, app, "SELECT count(*) FROM run_deciders WHERE run_id = ? AND user_id = ? AND decides", waiting.ID, m.UserID),
		"the rule's admin decides the waiting run")
	others := countRows(t, app, "SELECT count(*) FROM run_deciders WHERE run_id = ? AND decides", waiting.ID) - 1
	require.Positive(t, others)

	// Same groups: nothing changes and nothing is audited.
	events := countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action LIKE 'membership.rule_%'", m.UserID)
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "engineers", "/platform/approvers")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, events, countRows(t, app, "SELECT count(*) FROM audit_events WHERE target_id = ? AND action LIKE 'membership.rule_%'", m.UserID))

	// Fewer groups: the role follows them down.
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "engineers")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, authz.RoleOperator, membershipOf(t, app, acme, "newcomer").Role)
	changed := ruleAudit(t, app, "membership.rule_changed", m.UserID)
	require.Equal(t, map[string]any{"role": "admin", "cloud_live": true}, changed["before"])
	require.Equal(t, "operator", changed["role"])
	require.Equal(t, run.PendingApproval, waitForState(t, app, approved.ID, run.PendingApproval).State,
		"an admin's approval turned operator's is void: the run waits again")

	// No mapped group: the membership ends, audited; the decisions go to the others.
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "other")
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "not a member")
	require.Nil(t, membershipOf(t, app, acme, "newcomer"))
	ended := ruleAudit(t, app, "membership.rule_ended", m.UserID)
	require.Equal(t, "no group rule maps their groups any more", ended["reason"])
	require.Equal(t, "signed in", ended["why"])
	require.Equal(t, map[string]any{"role": "operator", "cloud_live": true}, ended["before"])
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM run_deciders WHERE user_id = ?", m.UserID), "no decision waits for them")
	require.Equal(t, others, countRows(t, app, "SELECT count(*) FROM run_deciders WHERE run_id = ? AND decides", waiting.ID),
		"the waiting run's other deciders remain")
	require.Equal(t, run.PendingApproval, waitForState(t, app, waiting.ID, run.PendingApproval).State)

	// Back in the group: admitted again.
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "engineers")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, authz.RoleOperator, membershipOf(t, app, acme, "newcomer").Role)
}

// TestNoRuleMakesAnOwner: owner stays invitation-only — refused with a field error,
// nothing stored, and the table refuses such a row even written by hand.
func TestNoRuleMakesAnOwner(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	owner := app.NewMember(t, "acme", "Rule Owner", authz.RoleOwner, false)
	asOwner := authz.WithSubject(context.Background(), owner.Subject(time.Now()))
	_, err := app.System.GroupRules.AddRule(asOwner, org.RuleInput{Group: "owners", Role: authz.RoleOwner})
	var v *errs.Validation
	require.ErrorAs(t, err, &v)
	require.Contains(t, v.Fields["role"], "invitation-only")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM group_rules"))
	require.Error(t, app.DB.Exec(`INSERT INTO group_rules (id, organization_id, group_name, role, created_by)
	        VALUES ('grp-x', ?, 'owners', 'owner', 'x')`, app.Orgs["acme"]).Error)

	// An admin may read the rules but not make one: a rule hands out roles.
	admin := app.NewMember(t, "acme", "Rule Admin", authz.RoleAdmin, false)
	_, err = app.System.GroupRules.AddRule(authz.WithSubject(context.Background(), admin.Subject(time.Now())),
		org.RuleInput{Group: "engineers", Role: authz.RoleViewer})
	require.ErrorIs(t, err, errs.ErrForbidden)

	// A member in a group mapped to every role a rule may give is no owner.
	for _, r := range org.RuleRoles {
		_, err := app.System.GroupRules.AddRule(asOwner, org.RuleInput{Group: "g-" + string(r), Role: r})
		require.NoError(t, err)
	}
	status, body := signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "g-viewer", "g-auditor", "g-operator", "g-admin", "owners")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, authz.RoleAdmin, membershipOf(t, app, app.Orgs["acme"], "newcomer").Role)
}

// TestRulesNeverChangeAnInvitedMember: a membership an invitation (or a person) made is
// never changed by a rule, up or down, nor ended.
func TestRulesNeverChangeAnInvitedMember(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme := app.Orgs["acme"]
	addRule(t, app, "acme", "admins", authz.RoleAdmin, true)
	addRule(t, app, "acme", "readers", authz.RoleViewer, false)

	// A demo operator (a direct member) in a group mapped to admin: not raised.
	before := membershipOf(t, app, acme, "acme-operator")
	for _, groups := range [][]string{{"admins"}, {"readers"}, {}} {
		status, body := signInWithGroups(t, app, "acme-operator", "operator@acme.test", "operator-acme", groups...)
		require.Equal(t, http.StatusOK, status, body)
		m := membershipOf(t, app, acme, "acme-operator")
		require.NotNil(t, m, "groups %v", groups)
		require.Equal(t, authz.RoleOperator, m.Role, "groups %v", groups)
		require.Equal(t, before.CloudLive, m.CloudLive, "groups %v", groups)
		require.Equal(t, org.SourceDirect, m.Source)
	}

	// An invited newcomer in a group mapped to admin: the invitation's role, kept.
	owner := app.NewMember(t, "acme", "Inviting Owner", authz.RoleOwner, false)
	require.NoError(t, app.System.Members.Invite(authz.WithSubject(context.Background(), owner.Subject(time.Now())), webtest.NewcomerEmail, authz.RoleViewer))
	status, body := signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "admins")
	require.Equal(t, http.StatusOK, status, body)
	m := membershipOf(t, app, acme, "newcomer")
	require.Equal(t, authz.RoleViewer, m.Role)
	require.Equal(t, org.SourceDirect, m.Source)
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, authz.RoleViewer, membershipOf(t, app, acme, "newcomer").Role, "no group: still invited")
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM audit_events WHERE action LIKE 'membership.rule_%'"))
}

// TestAPersonsChangeTakesARuleMembershipOver: an admin's role change makes a rule's
// membership theirs; removing the rule then leaves it alone. Removing a rule ends the
// memberships only it made, at once.
func TestAPersonsChangeTakesARuleMembershipOver(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme := app.Orgs["acme"]
	owner := app.NewMember(t, "acme", "Rule Owner", authz.RoleOwner, false)
	asOwner := authz.WithSubject(context.Background(), owner.Subject(time.Now()))
	rule, err := app.System.GroupRules.AddRule(asOwner, org.RuleInput{Group: "engineers", Role: authz.RoleOperator})
	require.NoError(t, err)

	status, body := signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "engineers")
	require.Equal(t, http.StatusOK, status, body)
	status, body = signInWithGroups(t, app, "globex-viewer", "viewer@globex.test", "viewer-globex", "engineers")
	require.Equal(t, http.StatusOK, status, body)
	nora := membershipOf(t, app, acme, "newcomer")
	require.Equal(t, org.SourceRule, nora.Source)
	require.Equal(t, org.SourceRule, membershipOf(t, app, acme, "globex-viewer").Source)

	require.NoError(t, app.System.Members.SetRole(asOwner, nora.UserID, authz.RoleViewer))
	require.Equal(t, org.SourceDirect, membershipOf(t, app, acme, "newcomer").Source)
	require.Equal(t, "rule", ruleAudit(t, app, "membership.role_changed", nora.UserID)["source_before"])

	require.NoError(t, app.System.GroupRules.RemoveRule(asOwner, rule.ID))
	require.Equal(t, authz.RoleViewer, membershipOf(t, app, acme, "newcomer").Role, "the admin's change is theirs")
	require.Nil(t, membershipOf(t, app, acme, "globex-viewer"), "the rule's own membership ended with it")
	require.Equal(t, "the group rules changed", ruleAudit(t, app, "membership.rule_ended", membershipUser(t, app, "globex-viewer"))["why"])
	require.NotNil(t, membershipOf(t, app, app.Orgs["globex"], "globex-viewer"), "their invitation's organization keeps them")

	// Another organization's owner cannot remove acme's rule: it is not there for them.
	globexOwner := app.NewMember(t, "globex", "Globex Owner", authz.RoleOwner, false)
	rule2, err := app.System.GroupRules.AddRule(asOwner, org.RuleInput{Group: "ops", Role: authz.RoleViewer})
	require.NoError(t, err)
	err = app.System.GroupRules.RemoveRule(authz.WithSubject(context.Background(), globexOwner.Subject(time.Now())), rule2.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
}

// membershipUser is the user id of subject.
func membershipUser(t *testing.T, app *webtest.App, subject string) string {
	t.Helper()
	var id string
	require.NoError(t, app.DB.Raw("SELECT id FROM users WHERE subject = ?", subject).Scan(&id).Error)
	return id
}

// TestSCIMGroupsFeedRules: a directory group mapped by a rule admits its members at once
// (no sign-in needed) when the directory user names the person by externalId and by
// their verified address (an externalId alone admits nobody), and removing them from it
// ends the rule's membership; deactivating
// the person ends it too, with their sessions and tokens, and a later sign-in whose
// claims still map is not admitted while the directory says inactive.
func TestSCIMGroupsFeedRules(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme := app.Orgs["acme"]
	token := scimToken(t, app, "acme")
	addRule(t, app, "acme", "Platform approvers", authz.RoleAdmin, false)

	status, body := signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword)
	require.Equal(t, http.StatusForbidden, status, "no group yet: %s", body)
	nora := membershipUser(t, app, "newcomer")

	users, groupID := directoryGroup(t, app, token, "Platform approvers", `"externalId":"newcomer","userName":"newcomer@example.test"`)
	userID := users[0]
	m := membershipOf(t, app, acme, "newcomer")
	require.NotNil(t, m, "the directory's group admits at once: externalId and address are the newcomer's")
	require.Equal(t, authz.RoleAdmin, m.Role)
	require.Equal(t, "the directory changed group Platform approvers", ruleAudit(t, app, "membership.rule_admitted", nora)["why"])

	// An externalId alone admits nobody: a directory user naming globex's admin by
	// subject, under another address, in the mapped group, leaves them out of acme.
	status, body = signInWithGroups(t, app, "globex-admin", "admin@globex.test", "admin-globex")
	require.Equal(t, http.StatusOK, status, body)
	status, body = scimCall(t, app, token, "POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],
		"externalId":"globex-admin","userName":"not-adam@acme.test","emails":[{"value":"not-adam@acme.test","primary":true}]}`)
	require.Equal(t, http.StatusCreated, status, body)
	var spoof struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &spoof))
	status, body = scimCall(t, app, token, "PATCH", "/scim/v2/Groups/"+groupID, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Add","path":"members","value":[{"value":"`+spoof.ID+`"}]}]}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Nil(t, membershipOf(t, app, acme, "globex-admin"), "the directory named someone else's address")

	// Entra removes the member (capitalised op, filtered path): the rule's membership ends.
	status, body = scimCall(t, app, token, "PATCH", "/scim/v2/Groups/"+groupID, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Remove","path":"members[value eq \"`+userID+`\"]"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Nil(t, membershipOf(t, app, acme, "newcomer"))
	require.Equal(t, "no group rule maps their groups any more", ruleAudit(t, app, "membership.rule_ended", nora)["reason"])

	// Back in the group, signed in, with an API token; then deactivated.
	status, body = scimCall(t, app, token, "PATCH", "/scim/v2/Groups/"+groupID, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Add","path":"members","value":[{"value":"`+userID+`"}]}]}`)
	require.Equal(t, http.StatusOK, status, body)
	require.NotNil(t, membershipOf(t, app, acme, "newcomer"))
	browser := app.Client(t)
	require.NoError(t, app.IDP.SetGroups("newcomer", []string{"Platform approvers"}))
	resp := app.LoginAs(t, browser, webtest.NewcomerEmail, webtest.NewcomerPassword)
	require.Equal(t, http.StatusOK, resp.StatusCode, webtest.ReadBody(t, resp))
	apiToken := app.Token(t, webtest.Member{UserID: nora, Name: "Nora Newcomer", OrgID: acme, Role: authz.RoleAdmin}, "admin")
	resp = app.API(t, apiToken, "GET", "/api/v1/environments", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, webtest.ReadBody(t, resp))

	status, body = scimCall(t, app, token, "PATCH", "/scim/v2/Users/"+userID, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Replace","path":"active","value":"False"}]}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Nil(t, membershipOf(t, app, acme, "newcomer"), "deactivation ends the rule's membership")
	require.Equal(t, "the directory deactivated them", ruleAudit(t, app, "membership.rule_ended", nora)["reason"])
	deprovisioned := map[string]any{}
	var raw string
	require.NoError(t, app.DB.Raw("SELECT data::text FROM audit_events WHERE action = 'scim.user_deprovisioned' ORDER BY id DESC LIMIT 1").Scan(&raw).Error)
	require.NoError(t, json.Unmarshal([]byte(raw), &deprovisioned))
	require.Equal(t, []any{nora}, deprovisioned["memberships_removed"])
	require.Equal(t, []any{nora}, deprovisioned["linked_user_ids"])
	resp = app.API(t, apiToken, "GET", "/api/v1/environments", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, webtest.ReadBody(t, resp))
	require.Zero(t, countRows(t, app, "SELECT count(*) FROM sessions WHERE user_id = ?", nora), "their browser session is gone")

	// The provider still sends the mapped group; the directory says inactive.
	status, body = signInWithGroups(t, app, "newcomer", webtest.NewcomerEmail, webtest.NewcomerPassword, "Platform approvers")
	require.Equal(t, http.StatusForbidden, status, body)
	require.Nil(t, membershipOf(t, app, acme, "newcomer"))
}

// TestASignInVisitsOnlyTheOrganizationsItConcerns: a sign-in applies the rules of the
// organizations whose rules can concern the person, and no others. Acme's directory
// provisions the newcomer into a mapped group before they ever sign in: their first
// sign-in, with no groups claimed, makes them acme's admin through the directory alone.
// Meanwhile globex, whose rule maps a group they are not in, has its member lock held by
// a change that has not finished: the sign-in neither reads nor waits for it.
func TestASignInVisitsOnlyTheOrganizationsItConcerns(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme, globex := app.Orgs["acme"], app.Orgs["globex"]
	addRule(t, app, "acme", "Platform approvers", authz.RoleAdmin, false)
	addRule(t, app, "globex", "globex-engineers", authz.RoleOperator, false)

	token := scimToken(t, app, "acme")
	directoryGroup(t, app, token, "Platform approvers", `"externalId":"newcomer","userName":"newcomer@example.test"`)
	require.Nil(t, membershipOf(t, app, acme, "newcomer"), "nobody to admit before the first sign-in")

	// A member change of globex's holds its member lock, until the sign-in is over or
	// (when the sign-in waits for it) until five load-scaled seconds have passed.
	held := app.DB.Begin()
	require.NoError(t, held.Error)
	require.NoError(t, held.Exec("SELECT pg_advisory_xact_lock(hashtextextended('members:' || ?, 0))", globex).Error)
	hold, over := bench.Context(t.Context(), 5*time.Second)
	var released atomic.Bool
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		<-hold.Done()
		released.Store(true)
		held.Rollback()
	}()
	t.Cleanup(func() { over(); <-gone })

	require.NoError(t, app.IDP.SetGroups("newcomer", nil))
	resp := app.LoginAs(t, app.Client(t), webtest.NewcomerEmail, webtest.NewcomerPassword)
	require.False(t, released.Load(), "the sign-in waited for globex's member lock until it was released")
	require.Equal(t, http.StatusOK, resp.StatusCode, webtest.ReadBody(t, resp))
	m := membershipOf(t, app, acme, "newcomer")
	require.NotNil(t, m, "the directory's group admits at the first sign-in")
	require.Equal(t, authz.RoleAdmin, m.Role)
	require.Equal(t, org.SourceRule, m.Source)
	require.Equal(t, "signed in", ruleAudit(t, app, "membership.rule_admitted", m.UserID)["why"])
	require.Nil(t, membershipOf(t, app, globex, "newcomer"))
}
