package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/run"
)

// TestPromotion: a database applied in staging is promoted to production, the next
// environment of the organization's order: changing a fixed input (the network range)
// is refused with both values side by side and nothing requested; changing only a
// capacity input (storage) requests a normal run in production that records its source
// and goes through production's gates (risk 2 or more, an admin decides). The target
// must come next in the order, and the order is the organization's to change; a
// workspace with nothing applied, another organization's and a viewer are refused.
func TestPromotion(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	dev, staging, prod := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging"), app.OrgEnvironmentID(t, "acme", "production")
	waiting := waitForState(t, app, app.RequestRun(t, operator, url.Values{"template": {"postgres"}, "environment": {staging},
		"workspace": {"orders-db"}, "kind": {"apply"}, "inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
		"inputs.storage_gb": {"20"}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {"10.30.0.0/16"}}), run.PendingApproval)
	resp := app.PostForm(t, admin, "/runs/"+waiting.ID+"/approve", decisionForm(t, app, admin, waiting))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	source := waitForState(t, app, waiting.ID, run.Succeeded)
	promote := "/workspaces/" + source.WorkspaceID + "/promote"

	// The form: production only (next after staging), the inputs of the applied run.
	page := webtest.ReadBody(t, app.Get(t, operator, promote))
	require.Contains(t, page, `<option value="`+prod+`" selected>`)
	require.NotContains(t, page, `<option value="`+dev+`"`)
	require.Regexp(t, `name="inputs.storage_gb"[^>]*value="20"`, page)
	require.Contains(t, page, `data-testid="note-network_cidr">Fixed: it stays as in staging`)
	// A fixed input is drawn read-only with its value (the form still sends it); one that
	// may differ stays editable.
	require.Regexp(t, `name="inputs.network_cidr" value="10.30.0.0/16" readonly`, page)
	require.NotRegexp(t, `name="inputs.storage_gb"[^>]*readonly`, page)
	require.Contains(t, page, `data-testid="note-storage_gb">May differ from staging (capacity).`)

	form := func(env, cidr, storage string) url.Values {
		return url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"postgres"}, "kind": {"apply"}, "environment": {env},
			"workspace": {"orders-db"}, "inputs.name": {"orders"}, "inputs.engine_version": {"16"}, "inputs.size": {"small"},
			"inputs.storage_gb": {storage}, "inputs.backup_retention_days": {"7"}, "inputs.network_cidr": {cidr}}
	}
	countIn := func(env string) int64 {
		var n int64
		require.NoError(t, app.DB.Raw("SELECT count(*) FROM runs WHERE environment_id = ?", env).Scan(&n).Error)
		return n
	}

	// A fixed input changed: refused, side by side, nothing requested.
	resp = app.PostForm(t, operator, promote, form(prod, "10.40.0.0/16", "20"))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Regexp(t, `(?s)data-testid="difference-network_cidr".*data-testid="source-value">10\.30\.0\.0/16<.*data-testid="requested-value">10\.40\.0\.0/16<`, body)
	require.NotContains(t, body, `data-testid="difference-storage_gb"`)
	// A fixed input is drawn again read-only as the source has it (only a stale or
	// tampered form sends another value); what may differ keeps what was typed.
	require.Regexp(t, `name="inputs.network_cidr" value="10.30.0.0/16" readonly`, body)
	require.Zero(t, countIn(prod))

	// Not next in the order: refused at the field.
	resp = app.PostForm(t, operator, promote, form(dev, "10.30.0.0/16", "20"))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, "Choose one of the environments that come next in this organization&#39;s promotion order.")
	require.Zero(t, countIn(dev))

	// Only a capacity input changed: a normal run in production, through its gates.
	resp = app.PostForm(t, operator, promote, form(prod, "10.30.0.0/16", "50"))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	m := webtest.RunPath.FindStringSubmatch(resp.Header.Get("Location"))
	require.NotNil(t, m)
	promoted := waitForState(t, app, m[1], run.PendingApproval)
	require.Equal(t, prod, promoted.EnvironmentID)
	require.Equal(t, source.ID, *promoted.PromotedFromRunID)
	require.Equal(t, source.TemplateVersion, promoted.TemplateVersion)
	require.Equal(t, source.ModuleDigest, promoted.ModuleDigest)
	require.GreaterOrEqual(t, *promoted.RiskClass, 2, "any change in production is risk 2 or more")
	require.Equal(t, "admin", promoted.RequiredApprover)
	require.Contains(t, string(promoted.Inputs), `"storage_gb": 50`)
	require.True(t, strings.HasPrefix(promoted.StateReason, "risk 2"), promoted.StateReason)
	var reason string
	require.NoError(t, app.DB.Raw(`SELECT body FROM audit_events WHERE action = 'run.queued' AND run_id = ?`, promoted.ID).Scan(&reason).Error)
	require.Contains(t, reason, `"promoted_from":"`+source.ID+`"`)

	// The order is the organization's: with staging placed after production, nothing
	// comes after staging, and development promotes to production.
	var updated map[string]any
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+staging,
		`{"name":"staging","tier":"staging","requires_approval":true,"promotion_order":5}`, &updated), "%v", updated)
	require.EqualValues(t, 5, updated["promotion_order"])
	resp = app.Get(t, operator, promote)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotContains(t, body, `id="promote"`)
	require.Contains(t, body, "No environment comes after staging in this organization&#39;s promotion order")

	// Refusals.
	empty := waitingIn(t, app, operator, "promotion-empty")
	resp = app.Get(t, operator, "/workspaces/"+empty.WorkspaceID+"/promote")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "Nothing has been applied to this workspace yet")
	status, body := postPromotion(t, app, operator, empty.WorkspaceID)
	require.Equal(t, http.StatusConflict, status, "posting it anyway is refused")
	require.Contains(t, body, "Nothing has been applied to this workspace yet")
	devSource := bucketRequest(dev, "eu-west")
	devSource.Set("workspace", "promotion-dev")
	devRun := waitForState(t, app, app.RequestRun(t, operator, devSource), run.Succeeded)
	page = webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+devRun.WorkspaceID+"/promote"))
	require.Contains(t, page, `<option value="`+prod+`" selected>`, "development is followed by production now")
	require.NotContains(t, page, `<option value="`+staging+`"`)
	// A workspace whose newest applied change was its destroy has nothing to promote.
	destroy := bucketRequest(dev, "eu-west")
	destroy.Set("workspace", "promotion-dev")
	destroy.Set("kind", "destroy")
	gone := waitForState(t, app, app.RequestRun(t, operator, destroy), run.PendingApproval)
	owner := app.LoggedIn(t, "owner@acme.test")
	resp = app.PostForm(t, owner, "/runs/"+gone.ID+"/approve", decisionForm(t, app, owner, gone))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	waitForState(t, app, gone.ID, run.Succeeded)
	page = webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+devRun.WorkspaceID+"/promote"))
	require.Contains(t, page, "destroyed what this workspace held: there is nothing to promote")
	require.NotContains(t, page, `id="promote"`)
	resp = app.Get(t, app.LoggedIn(t, "owner@globex.test"), promote)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp = app.Get(t, app.LoggedIn(t, "viewer@acme.test"), promote)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// TestPromotionDoorsRefuseStrangers: the two doors of the run lifecycle that
// models/promotion calls from outside keep their own checks: another organization's
// run is not found, a run that applied nothing cannot be promoted (and nothing is
// requested), and the inputs of a run, sensitive values in, are only for those who may
// request runs.
func TestPromotionDoorsRefuseStrangers(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	applied := waitForState(t, app, app.RequestRun(t, operator, bucketRequest(dev, "eu-central")), run.Succeeded)
	waiting := waitingIn(t, app, operator, "promotion-doors")
	runs := app.System.Runs
	as := func(m webtest.Member) context.Context { return authz.WithSubject(t.Context(), m.Subject(time.Now())) }
	stranger := as(app.NewMember(t, "globex", "Stranger", authz.RoleOwner, true))
	member := as(app.NewMember(t, "acme", "Promoter", authz.RoleOperator, true))
	viewer := as(app.NewMember(t, "acme", "Onlooker", authz.RoleViewer, false))
	req := run.Request{EnvironmentID: dev, Workspace: "promotion-doors-target", Template: "bucket", Kind: run.KindApply,
		Inputs: map[string]string{"name": "doors", "retention_days": "30", "region": "eu-central"}}

	_, err := runs.Reads.InputsOf(stranger, applied.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, err = runs.Requests.RequestPromoted(stranger, req, applied.ID, "assets #1 in development")
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, err = runs.Reads.InputsOf(viewer, applied.ID)
	require.ErrorIs(t, err, errs.ErrForbidden)
	_, err = runs.Requests.RequestPromoted(member, req, waiting.ID, "assets #1 in staging")
	require.ErrorIs(t, err, errs.ErrConflict)
	var n int64
	require.NoError(t, app.DB.Raw("SELECT count(*) FROM runs WHERE promoted_from_run_id IS NOT NULL").Scan(&n).Error)
	require.Zero(t, n, "nothing was requested")

	inputs, err := runs.Reads.InputsOf(member, applied.ID)
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
}

func postPromotion(t *testing.T, app *webtest.App, c *http.Client, workspaceID string) (int, string) {
	t.Helper()
	resp := app.PostForm(t, c, "/workspaces/"+workspaceID+"/promote", url.Values{"_csrf": {app.CSRF(t, c)}, "environment": {"env-x"}})
	return resp.StatusCode, webtest.ReadBody(t, resp)
}

// TestRefusedFormsDoNotEchoSecrets: a request or a promotion refused for another field
// comes back without the sensitive input just typed (the page reflects what was asked,
// and a secret must not sit beside it): it is typed again.
func TestRefusedFormsDoNotEchoSecrets(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{CatalogFS: sensitiveBucketCatalog(t)})
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	const secret = "wombat-quiet-9k3m"
	req := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "environment": {dev}, "workspace": {"echo-bucket"},
		"kind": {"apply"}, "inputs.name": {secret}, "inputs.retention_days": {"99999"}, "inputs.region": {"eu-west"}}
	resp := app.PostForm(t, operator, "/requests", req)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="error-summary"`)
	require.NotContains(t, body, secret, "the refused request writes the secret back")

	req.Set("inputs.retention_days", "30")
	source := waitForState(t, app, app.RequestRun(t, operator, req), run.Succeeded)
	promote := url.Values{"_csrf": {app.CSRF(t, operator)}, "template": {"bucket"}, "kind": {"apply"},
		"environment": {app.OrgEnvironmentID(t, "acme", "staging")}, "workspace": {"echo-bucket"},
		"inputs.name": {secret}, "inputs.retention_days": {"30"}, "inputs.region": {"us-east"}}
	resp = app.PostForm(t, operator, "/workspaces/"+source.WorkspaceID+"/promote", promote)
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="difference-region"`)
	require.NotContains(t, body, secret, "the refused promotion writes the secret back")
}
