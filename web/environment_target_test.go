package web_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"html"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/environment"
)

// targetCA is a fresh self-signed CA certificate in PEM.
func targetCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "target CA"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// storedTarget is environment id's target column as stored.
func storedTarget(t *testing.T, app *webtest.App, id string) string {
	t.Helper()
	var raw string
	require.NoError(t, app.DB.Raw("SELECT target::text FROM environments WHERE id = ?", id).Scan(&raw).Error)
	return raw
}

// TestEnvironmentTargetForm: an admin sets an environment's target on its form. The form
// offers every kind with what each must trust (Google Cloud and Azure marked as not
// exercised here); a wrong setting comes back as a 422 with the message beside its field
// and everything typed kept (the CA's PEM too), nothing stored; a right one is stored with
// only its kind's settings, and the list, the edit page and the governance report show
// it. A form without the CSRF token, with a NUL byte or with a 70 KiB CA stores nothing;
// an operator cannot change a target.
func TestEnvironmentTargetForm(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	token := app.CSRF(t, admin)
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	ca := targetCA(t)
	require.JSONEq(t, `{"kind":"sandbox"}`, storedTarget(t, app, staging), "every environment starts in the sandbox cloud")

	page := webtest.ReadBody(t, app.Get(t, admin, "/environments/new"))
	for _, want := range []string{`id="target_kind_sandbox" value="sandbox" checked`, `id="target_kind_kubernetes"`, `id="target_kind_aws"`,
		`id="target_kind_gcp"`, `id="target_kind_azure"`, `name="target_kubernetes_ca"`, `name="target_aws_write_role_arn"`,
		`name="target_gcp_provider"`, `name="target_azure_write_client_id"`, "JWT authenticator", "sts:AssumeRoleWithWebIdentity"} {
		require.Contains(t, page, want)
	}
	require.Equal(t, 2, strings.Count(page, `data-testid="not-exercised"`), "Google Cloud and Azure say they are not exercised here")
	require.Contains(t, page, "Not exercised against the real cloud here: the files Gantry produces are unit-tested; try it in a sandbox project first.")

	edit := func(kind string, fields map[string]string) url.Values {
		form := url.Values{"_csrf": {token}, "name": {"staging"}, "tier": {"staging"}, "requires_approval": {"on"}, "target_kind": {kind}}
		for k, v := range fields {
			form.Set(k, v)
		}
		return form
	}
	before := counts(t, app)
	// A bad URL: its field's message, everything typed kept (CRLF as a browser sends it).
	typedCA := strings.ReplaceAll(ca, "\n", "\r\n")
	resp := app.PostForm(t, admin, "/environments/"+staging, edit("kubernetes", map[string]string{
		"target_kubernetes_server": "k8s.example.com:6443", "target_kubernetes_ca": typedCA, "target_audience": "kube.gantry",
		"target_aws_region": "eu-west-1"}))
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, body)
	require.Contains(t, body, `data-testid="error-target_kubernetes_server"`)
	require.Contains(t, body, "An https URL without credentials or query")
	require.NotContains(t, body, `data-testid="error-target_kubernetes_ca"`, "the CA is fine")
	require.Contains(t, body, `id="target_kind_kubernetes" value="kubernetes" checked`)
	require.Contains(t, body, `value="k8s.example.com:6443"`)
	require.Contains(t, body, `value="kube.gantry"`)
	require.Contains(t, body, `value="eu-west-1"`, "another kind's typing is kept too")
	require.Contains(t, html.UnescapeString(body), strings.TrimSpace(ca), "the CA is kept")
	require.Regexp(t, `id="target_kubernetes_server"[^>]*aria-invalid="true"[^>]*autofocus`, body)
	require.Equal(t, before, counts(t, app))
	require.JSONEq(t, `{"kind":"sandbox"}`, storedTarget(t, app, staging), "nothing stored")

	// Without the CSRF token, with a NUL byte, with a 70 KiB CA: nothing stored.
	good := map[string]string{"target_kubernetes_server": "https://k8s.example.com:6443", "target_kubernetes_ca": typedCA}
	noCSRF := edit("kubernetes", good)
	noCSRF.Del("_csrf")
	resp = app.PostForm(t, admin, "/environments/"+staging, noCSRF)
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp = app.PostForm(t, admin, "/environments/"+staging, edit("kubernetes", map[string]string{
		"target_kubernetes_server": "https://k8s.example.com:6443\x00", "target_kubernetes_ca": typedCA}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the edge refuses a NUL byte in any field")
	resp = app.PostForm(t, admin, "/environments/"+staging, edit("kubernetes", map[string]string{
		"target_kubernetes_server": "https://k8s.example.com:6443", "target_kubernetes_ca": "-----BEGIN CERTIFICATE-----\r\n\x00\r\n"}))
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "a NUL byte in the CA too")
	huge := strings.Repeat(ca, 70<<10/len(ca)+1)
	resp = app.PostForm(t, admin, "/environments/"+staging, edit("kubernetes", map[string]string{
		"target_kubernetes_server": "https://k8s.example.com:6443", "target_kubernetes_ca": huge}))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	require.Contains(t, body, `data-testid="error-target_kubernetes_ca">At most 64 KiB.<`)
	resp = app.PostForm(t, operator, "/environments/"+staging, url.Values{"_csrf": {app.CSRF(t, operator)}, "name": {"staging"}, "tier": {"staging"},
		"target_kind": {"kubernetes"}, "target_kubernetes_server": {"https://k8s.example.com:6443"}, "target_kubernetes_ca": {ca}})
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, before, counts(t, app))
	require.JSONEq(t, `{"kind":"sandbox"}`, storedTarget(t, app, staging), "nothing stored")

	// Fixed: stored with only its kind's settings, the CA's lines as LF.
	good["target_audience"] = "kube.gantry"
	good["target_aws_region"] = "eu-west-1"
	resp = app.PostForm(t, admin, "/environments/"+staging, edit("kubernetes", good))
	body = webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	got, err := app.System.Environments.Target(context.Background(), app.Orgs["acme"], staging)
	require.NoError(t, err)
	require.Equal(t, environment.Target{Kind: environment.TargetKubernetes, Audience: "kube.gantry",
		Kubernetes: &environment.KubernetesTarget{Server: "https://k8s.example.com:6443", CA: ca}}, got)

	list := webtest.ReadBody(t, app.Get(t, admin, "/environments"))
	row := regexpFind(t, `(?s)<tr data-testid="environment-staging">.*?</tr>`, list)
	require.Contains(t, row, `data-testid="target-kind">Kubernetes<`)
	require.Contains(t, row, `data-testid="target-where">https://k8s.example.com:6443<`)
	require.Contains(t, row, `data-testid="target-audience">kube.gantry<`)
	require.Contains(t, row, `data-testid="target-credentials"`)
	require.Contains(t, row, `>federated<`)
	page = webtest.ReadBody(t, app.Get(t, admin, "/environments/"+staging+"/edit"))
	org := app.Orgs["acme"]
	require.Contains(t, page, `data-testid="target-read">groups gantry:ws:&lt;workspace&gt;:read, gantry:org:`+org+`:read (user gantry:org:`+org+`:env:`+staging+`:ws:&lt;workspace&gt;:run:&lt;run&gt;:phase:&lt;phase&gt;)<`)
	require.Contains(t, page, `data-testid="target-write">groups gantry:ws:&lt;workspace&gt;:write, gantry:org:`+org+`:write (user gantry:org:`)
	require.Contains(t, page, `id="target_kind_kubernetes" value="kubernetes" checked`)
	require.Contains(t, page, `value="https://k8s.example.com:6443"`)

	// The governance report names the integration, and says "static" once the
	// environment holds a static credential.
	auditor := app.LoggedIn(t, "auditor@acme.test")
	report := webtest.ReadBody(t, app.Get(t, auditor, "/governance"))
	section := regexpFind(t, `(?s)<section data-testid="governance-env-staging">.*?</section>`, report)
	require.Contains(t, section, `data-testid="integration-kind">Kubernetes<`)
	require.Contains(t, section, `data-testid="integration-where">https://k8s.example.com:6443<`)
	require.Contains(t, section, `data-testid="integration-read">groups gantry:ws:&lt;workspace&gt;:read, gantry:org:`+org+`:read (user gantry:org:`)
	require.Contains(t, section, `data-testid="integration-write">groups gantry:ws:&lt;workspace&gt;:write, gantry:org:`+org+`:write (user gantry:org:`)
	require.Regexp(t, `data-testid="integration-credentials">\s*<span[^>]*>federated<`, section)
	dev := regexpFind(t, `(?s)<section data-testid="governance-env-development">.*?</section>`, report)
	require.Contains(t, dev, `data-testid="integration-kind">Sandbox cloud<`)
	require.Contains(t, dev, `data-testid="integration-read">a workload token of scope read<`)
	owner := authz.WithSubject(context.Background(), app.NewMember(t, "acme", "Owen", authz.RoleOwner, false).Subject(time.Now()))
	require.NoError(t, app.System.Credentials.SetStaticReadCredential(owner, staging, "sbxk-static-target-read"))
	require.NoError(t, app.System.Credentials.SetStaticCredential(owner, staging, "sbxk-static-target-write"))
	report = webtest.ReadBody(t, app.Get(t, auditor, "/governance"))
	section = regexpFind(t, `(?s)<section data-testid="governance-env-staging">.*?</section>`, report)
	require.Regexp(t, `data-testid="integration-credentials">\s*<span[^>]*>static<`, section)
	require.Contains(t, section, `data-testid="integration-read">the environment&#39;s static read credential (standing access)<`)
	require.Contains(t, section, `data-testid="integration-write">the environment&#39;s static write credential (standing access)<`)
	require.NotContains(t, report, "sbxk-static-target")
	md := webtest.ReadBody(t, app.Get(t, auditor, "/governance.md"))
	require.Contains(t, md, "Integration: Kubernetes at https://k8s.example.com:6443, token audience kube.gantry; plans and verifications as the environment's static read credential (standing access); "+
		"applies as the environment's static write credential (standing access); static.")
}

// TestEnvironmentTargetAPI: the JSON API takes and answers the target as the form does:
// absent is the sandbox cloud on create and unchanged on edit, a wrong setting is a 422
// naming its field with nothing stored, and only the kind's settings are kept.
func TestEnvironmentTargetAPI(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	admin := app.LoggedIn(t, "admin@acme.test")
	type envJSON struct {
		ID          string             `json:"id"`
		Target      environment.Target `json:"target"`
		Credentials string             `json:"credentials"`
	}
	var e envJSON
	require.Equal(t, http.StatusCreated, environmentJSON(t, app, admin, http.MethodPost, "/api/v1/environments", `{"name":"s3-store","tier":"staging"}`, &e))
	require.Equal(t, environment.Target{Kind: environment.TargetSandbox}, e.Target)
	require.Equal(t, "federated", e.Credentials)

	const aws = `{"kind":"aws","aws":{"read_role_arn":"arn:aws:iam::123456789012:role/gantry-read","write_role_arn":"arn:aws:iam::123456789012:role/gantry-write",
		"region":"us-east-1","sts_endpoint":"http://127.0.0.1:8333","s3_endpoint":"http://127.0.0.1:8333"},"gcp":{"provider":"dropped"}}`
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+e.ID, `{"name":"s3-store","tier":"staging","target":`+aws+`}`, &e))
	want := environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{ReadRoleARN: "arn:aws:iam::123456789012:role/gantry-read",
		WriteRoleARN: "arn:aws:iam::123456789012:role/gantry-write", Region: "us-east-1", STSEndpoint: "http://127.0.0.1:8333", S3Endpoint: "http://127.0.0.1:8333"}}
	require.Equal(t, want, e.Target)
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+e.ID, `{"name":"s3-store","tier":"staging"}`, &e))
	require.Equal(t, want, e.Target, "an edit without the target keeps it")
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodGet, "/api/v1/environments/"+e.ID, "", &e))
	require.Equal(t, want, e.Target)

	var refused struct {
		Fields map[string]string `json:"fields"`
	}
	before := counts(t, app)
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app, admin, http.MethodPut, "/api/v1/environments/"+e.ID,
		`{"name":"s3-store","tier":"staging","target":{"kind":"aws","aws":{"read_role_arn":"x","write_role_arn":"arn:aws:iam::123456789012:role/gantry-write","region":"Mars"}}}`, &refused))
	require.Contains(t, refused.Fields, "target_aws_read_role_arn")
	require.Contains(t, refused.Fields, "target_aws_region")
	require.Equal(t, http.StatusUnprocessableEntity, environmentJSON(t, app, admin, http.MethodPost, "/api/v1/environments",
		`{"name":"k","tier":"staging","target":{"kind":"kubernetes","kubernetes":{"server":"https://k8s.example.com","ca":"not a certificate"}}}`, &refused))
	require.Contains(t, refused.Fields, "target_kubernetes_ca")
	require.Equal(t, before, counts(t, app))
	require.Equal(t, http.StatusOK, environmentJSON(t, app, admin, http.MethodGet, "/api/v1/environments/"+e.ID, "", &e))
	require.Equal(t, want, e.Target, "nothing stored")
}

// regexpFind is the first match of pattern in s; no match fails the test.
func regexpFind(t *testing.T, pattern, s string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindString(s)
	require.NotEmpty(t, m, "nothing matches %s", pattern)
	return m
}
