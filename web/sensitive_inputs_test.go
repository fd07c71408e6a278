package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/bundle"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// notedManifest and notedModule are a test-only template with a sensitive input used
// the way a template should use one: the access note reaches no resource attribute in
// clear (so OpenTofu's state holds only its digest, marked sensitive), and a
// precondition checks it.
const notedManifest = `name: noted
version: 1.0.0
title: Bucket with an access note
description: A private bucket labelled with the digest of a sensitive access note.
owner: platform-test
inputs:
  - name: name
    label: Bucket name
    type: string
    required: true
    pattern: "^[a-z][a-z0-9-]{2,40}$"
    divergence: fixed
  - name: access_note
    label: Access note
    type: string
    required: true
    sensitive: true
    help: At least 12 characters; only its digest is kept, as a label.
    divergence: fixed
  - name: retention_days
    label: Retention (days)
    type: number
    integer: true
    default: 30
    min: 0
    max: 3650
    divergence: retention
prices:
  sandbox_bucket: 2.3
irreversible: [sandbox_bucket]
rollback: A new run with the previous inputs.
`

const notedModule = `# A private bucket labelled with the digest of a sensitive access note.

resource "sandbox_bucket" "this" {
  name           = var.name
  region         = "eu-west"
  versioning     = true
  retention_days = var.retention_days
  public         = false
  labels = {
    managed_by = "gantry"
    template   = "noted"
    key_digest = sha256(var.access_note)
  }

  lifecycle {
    precondition {
      condition     = length(var.access_note) >= 12
      error_message = "The access note must be at least 12 characters."
    }
  }
}
`

const notedVariables = `variable "name" {
  type = string
}

variable "access_note" {
  type = string
}

variable "retention_days" {
  type = number
}
`

const notedOutputs = `output "bucket_id" {
  value = sandbox_bucket.this.id
}
`

// notedCatalog is the shipped catalog with the noted template beside the others.
func notedCatalog(t testing.TB) fstest.MapFS {
	t.Helper()
	m := catalogWith(t, map[string]string{
		"templates/noted/template.yaml":       notedManifest,
		"templates/noted/module/main.tf":      notedModule,
		"templates/noted/module/variables.tf": notedVariables,
		"templates/noted/module/outputs.tf":   notedOutputs,
	})
	m["templates/noted/.terraform.lock.hcl"] = m["templates/bucket/.terraform.lock.hcl"]
	m["templates/noted/module/versions.tf"] = m["templates/bucket/module/versions.tf"]
	return m
}

// TestSensitiveInputsTravelSealed (on the mock, which refuses to plan a bundle whose
// sensitive root variable it is given no value for): a sensitive input is in no config
// bundle and no stored plan JSON (nor is its digest, which the plan marks sensitive);
// it is sealed with its run, in no column in clear; every run that plans the same
// configuration again carries it (a drift check, a rollback), the preview prices with
// it, a promotion compares it (the same value passes, another is a changed fixed input),
// and the forms asking for a change never fill it in.
func TestSensitiveInputsTravelSealed(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{CatalogFS: notedCatalog(t)})
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	dev, staging := app.OrgEnvironmentID(t, "acme", "development"), app.OrgEnvironmentID(t, "acme", "staging")
	const secret = "numbat-sealed-4q7w-note"
	sum := sha256.Sum256([]byte(secret))
	digest := hex.EncodeToString(sum[:])
	noted := func(env, note, retention string) url.Values {
		return url.Values{"template": {"noted"}, "environment": {env}, "workspace": {"sealed-bucket"}, "kind": {"apply"},
			"inputs.name": {"sealed-bucket"}, "inputs.access_note": {note}, "inputs.retention_days": {retention}}
	}
	failed := waitForState(t, app, app.RequestRun(t, operator, noted(dev, "too-short", "30")), run.Failed)
	require.Contains(t, failed.StateReason, "The access note must be at least 12 characters.", "the precondition is checked")
	first := waitForState(t, app, app.RequestRun(t, operator, noted(dev, secret, "30")), run.Succeeded)
	second := waitForState(t, app, app.RequestRun(t, operator, noted(dev, secret, "60")), run.Succeeded)

	// Sealed with each run; the bundle only declares it, the stored plan JSON masks it
	// and what derives from it (the mock, as tofu, writes both there in clear); only the
	// saved plan holds it, as tofu's does.
	for _, r := range []run.Run{first, second} {
		var sealed struct {
			KeyID      *string
			Ciphertext []byte
		}
		require.NoError(t, app.DB.Raw("SELECT variables_key_id AS key_id, variables_ciphertext AS ciphertext FROM runs WHERE id = ?", r.ID).Scan(&sealed).Error)
		require.NotNil(t, sealed.KeyID, "run %s has no sealed inputs", r.ID)
		require.NotContains(t, string(sealed.Ciphertext), secret)
		require.Contains(t, string(r.Inputs), `"access_note": "(sensitive)"`)
		b, err := bundle.FromTar(artifactOf(t, app, r, r.ConfigArtifactID))
		require.NoError(t, err)
		require.Contains(t, string(b.Files["main.tf"]), "access_note    = var.access_note")
		for name, body := range b.Files {
			require.NotContains(t, string(body), secret, "%s of run %s", name, r.ID)
		}
		planJSON := string(artifactOf(t, app, r, *r.PlanJSONArtifactID))
		require.NotContains(t, planJSON, secret)
		require.NotContains(t, planJSON, digest)
		require.Contains(t, planJSON, `"access_note":{"value":"(sensitive)"}`)
		require.Contains(t, planJSON, `"key_digest":"(sensitive)"`)
		require.Contains(t, string(artifactOf(t, app, r, *r.PlanArtifactID)), secret)
		for _, id := range []*string{r.PlanLogArtifactID, r.ApplyLogArtifactID, r.VerifyLogArtifactID} {
			log := string(artifactOf(t, app, r, *id))
			require.NotContains(t, log, secret)
			require.NotContains(t, log, digest)
		}
	}
	require.Zero(t, countRows(t, app, `SELECT count(*) FROM runs WHERE runs::text LIKE '%`+secret+`%'`), "a runs row holds the secret in clear")
	require.Zero(t, countRows(t, app, `SELECT count(*) FROM audit_events WHERE audit_events::text LIKE '%`+secret+`%'`), "an audit event holds the secret")
	require.Positive(t, countRows(t, app, `SELECT count(*) FROM audit_events WHERE action = 'run.queued' AND data->'sealed_inputs' = '["access_note"]'::jsonb`),
		"the audit says which inputs were sealed")

	// A drift check plans the writer's configuration: with its values.
	resp := app.PostForm(t, operator, "/workspaces/"+second.WorkspaceID+"/drift", url.Values{"_csrf": {app.CSRF(t, operator)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	check := waitForState(t, app, runIDOf(t, resp), run.NoChanges)
	require.Equal(t, second.ID, *check.SourceRunID)

	// A rollback re-plans the first run's configuration: with its values.
	versions := stateVersions(t, app, first.WorkspaceID)
	require.Len(t, versions, 2)
	resp = app.PostForm(t, operator, "/workspaces/"+first.WorkspaceID+"/rollback", url.Values{"_csrf": {app.CSRF(t, operator)}, "version": {versions[0]}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	rb := waitForState(t, app, runIDOf(t, resp), run.Succeeded)
	require.Equal(t, first.ConfigDigest, rb.ConfigDigest)
	require.NotContains(t, string(artifactOf(t, app, rb, *rb.PlanJSONArtifactID)), secret)

	// The preview prices the request with the value it is given.
	form := noted(dev, secret, "30")
	form.Set("_csrf", app.CSRF(t, operator))
	resp = app.PostForm(t, operator, "/requests/preview", form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "$2.30 a month")
	require.NotContains(t, body, secret)

	// "Change" and a request again from a run: the sensitive field is typed again.
	for _, p := range []string{"/workspaces/" + first.WorkspaceID + "/change", "/requests/new?template=noted&from_run=" + first.ID} {
		page := webtest.ReadBody(t, app.Get(t, operator, p))
		require.Regexp(t, `name="inputs.retention_days"[^>]*value="30"`, page, p)
		require.NotContains(t, page, secret, p)
		require.NotRegexp(t, `name="inputs.access_note"[^>]*value="[^"]`, page, p)
	}

	// A promotion: the same value typed again passes the fixed input; another is refused.
	promote := func(note string) *http.Response {
		return app.PostForm(t, operator, "/workspaces/"+rb.WorkspaceID+"/promote", url.Values{"_csrf": {app.CSRF(t, operator)},
			"template": {"noted"}, "kind": {"apply"}, "environment": {staging}, "workspace": {"sealed-bucket"},
			"inputs.name": {"sealed-bucket"}, "inputs.access_note": {note}, "inputs.retention_days": {"90"}})
	}
	page := webtest.ReadBody(t, app.Get(t, operator, "/workspaces/"+rb.WorkspaceID+"/promote"))
	require.NotContains(t, page, secret)
	require.Contains(t, page, "Sensitive: type it again")
	resp = promote("another-note-value-9z")
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="difference-access_note"`)
	require.NotContains(t, body, secret)
	resp = promote(secret)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	promoted := waitForState(t, app, runIDOf(t, resp), run.PendingApproval)
	require.Equal(t, rb.ID, *promoted.PromotedFromRunID)
	require.NotContains(t, string(artifactOf(t, app, promoted, *promoted.PlanJSONArtifactID)), secret)
	resp = app.PostForm(t, admin, "/runs/"+promoted.ID+"/approve", decisionForm(t, app, admin, promoted))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, webtest.ReadBody(t, resp))
	waitForState(t, app, promoted.ID, run.Succeeded)
}

// artifactOf is an artifact of run r, decrypted.
func artifactOf(t *testing.T, app *webtest.App, r run.Run, id string) []byte {
	t.Helper()
	data, _, err := app.System.Artifacts.Get(t.Context(), r.OrganizationID, id)
	require.NoError(t, err)
	require.NotEmpty(t, bytes.TrimSpace(data))
	return data
}

// driftingVerify is the mock, except that every verification finds drift: a refresh-only
// plan as OpenTofu writes it, the sensitive variables' values (as the job got them) in
// clear, and a drifted label derived from one.
type driftingVerify struct{ runner.Runner }

func (d driftingVerify) Verify(_ context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	note := req.Variables["access_note"]
	sum := sha256.Sum256([]byte(note))
	drift := fmt.Sprintf(`{"format_version":"1.2","variables":{"access_note":{"value":%q}},
		"configuration":{"root_module":{"variables":{"access_note":{"sensitive":true}}}},
		"resource_drift":[{"address":"module.noted.sandbox_bucket.this","mode":"managed","type":"sandbox_bucket",
		"change":{"actions":["update"],"before":{"labels":{"key_digest":%q}},"after":{"labels":{"key_digest":"edited"}},
		"before_sensitive":{"labels":{"key_digest":true}},"after_sensitive":{"labels":{"key_digest":true}}}}]}`, note, hex.EncodeToString(sum[:]))
	return runner.VerifyResult{Converged: false, DriftJSON: []byte(drift), Log: []byte("drift found\n")}, nil
}

// TestVerificationDriftIsRedacted: a verification gets the run's sensitive variables (its
// refresh-only plan evaluates the configuration), and the drift it found is stored with
// its log redacted as a plan is: neither the value nor what derives from it.
func TestVerificationDriftIsRedacted(t *testing.T) {
	t.Parallel()
	app := webtest.StartWith(t, webtest.Options{CatalogFS: notedCatalog(t), Runner: driftingVerify{mock.New()}})
	operator := app.LoggedIn(t, "operator@acme.test")
	const secret = "quokka-drifted-note-2p8d"
	sum := sha256.Sum256([]byte(secret))
	r := waitForState(t, app, app.RequestRun(t, operator, url.Values{"template": {"noted"}, "environment": {app.OrgEnvironmentID(t, "acme", "development")},
		"workspace": {"drifted-bucket"}, "kind": {"apply"}, "inputs.name": {"drifted-bucket"}, "inputs.access_note": {secret}}), run.Failed)
	require.Contains(t, r.StateReason, "verification found drift")
	log := string(artifactOf(t, app, r, *r.VerifyLogArtifactID))
	require.Contains(t, log, `"access_note":{"value":"(sensitive)"}`, "the verification got the variable, and its value was redacted")
	require.Contains(t, log, `"before":{"labels":{"key_digest":"(sensitive)"}}`)
	require.NotContains(t, log, secret)
	require.NotContains(t, log, hex.EncodeToString(sum[:]))
}
