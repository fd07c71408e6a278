package web_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/authz"
	"gantry/models/scim"
)

// scimStep is one request of a directory's published provisioning flow (testdata/scim):
// Entra's from Microsoft's "Develop and plan provisioning for a SCIM endpoint" request
// examples, Okta's from its SCIM 2.0 test requests.
type scimStep struct {
	What        string          `json:"what"`
	Method      string          `json:"method"`
	Path        string          `json:"path"`
	Body        json.RawMessage `json:"body"`
	Status      int             `json:"status"`
	Save        string          `json:"save"`
	Expect      string          `json:"expect"`
	Deactivates bool            `json:"deactivates"`
}

func scimToken(t *testing.T, app *webtest.App, slug string) string {
	t.Helper()
	owner := app.NewMember(t, slug, "Olga Owner", authz.RoleOwner, false)
	issued, err := app.System.SCIM.Rotate(authz.WithSubject(t.Context(), owner.Subject(time.Now())))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(issued.Secret, scim.TokenPrefix))
	return issued.Secret
}

func scimCall(t *testing.T, app *webtest.App, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, app.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/scim+json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return resp.StatusCode, webtest.ReadBody(t, resp)
}

// TestSCIMProvisioningFlows replays Entra's and Okta's create, add-to-group and
// deactivate requests: after deactivation the person's API token answers 401 and their
// browser session is gone, with an audit row saying so.
func TestSCIMProvisioningFlows(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	token := scimToken(t, app, "acme")
	for _, idp := range []string{"entra", "okta"} {
		t.Run(idp, func(t *testing.T) {
			person := app.NewMember(t, "acme", "Dee Provisioned "+idp, authz.RoleAdmin, false)
			var subject string
			require.NoError(t, app.DB.Raw("SELECT subject FROM users WHERE id = ?", person.UserID).Scan(&subject).Error)
			apiToken := app.Token(t, person, "admin")
			browser := app.SessionFor(t, person.UserID, person.OrgID, time.Now())
			resp := app.Get(t, browser, "/environments")
			webtest.ReadBody(t, resp)
			require.Equal(t, http.StatusOK, resp.StatusCode)

			raw, err := os.ReadFile("testdata/scim/" + idp + ".json")
			require.NoError(t, err)
			var steps []scimStep
			require.NoError(t, json.Unmarshal(raw, &steps))
			// Okta's externalId is the sub its ID tokens carry. Entra's sub is pairwise
			// (one per application): its provisioning app sends the objectId, which the
			// person's last sign-in asserted as oid, and the sub never matches it.
			externalID := subject
			if idp == "entra" {
				externalID = "5ab3e8d4-6f1c-4b7e-9d2a-0c4e1f8b7a63"
				require.NoError(t, app.DB.Exec(`UPDATE users SET last_sign_in = jsonb_build_object('oid', ?::text) WHERE id = ?`, externalID, person.UserID).Error)
			}
			vars := map[string]string{"subject": externalID}
			fill := func(s string) string {
				for k, v := range vars {
					s = strings.ReplaceAll(s, "{{"+k+"}}", v)
				}
				return s
			}
			for _, step := range steps {
				if step.Deactivates {
					resp := app.API(t, apiToken, http.MethodGet, "/api/v1/environments", "")
					webtest.ReadBody(t, resp)
					require.Equal(t, http.StatusOK, resp.StatusCode, "before deactivation the token works")
				}
				status, body := scimCall(t, app, token, step.Method, fill(step.Path), fill(string(step.Body)))
				require.Equal(t, step.Status, status, "%s: %s", step.What, body)
				require.Contains(t, body, fill(step.Expect), step.What)
				if step.Save != "" {
					vars[step.Save] = regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(body)[1]
				}
			}
			require.NotContains(t, func() string { _, b := scimCall(t, app, token, "GET", "/scim/v2/Users/"+vars["user"], ""); return b }(), "password")

			resp = app.API(t, apiToken, http.MethodGet, "/api/v1/environments", "")
			body := webtest.ReadBody(t, resp)
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the deactivated person's API token: %s", body)
			requireSignedOut(t, app, browser)
			var data string
			require.NoError(t, app.DB.Raw(`SELECT data::text FROM audit_events WHERE organization_id = ? AND action = 'scim.user_deprovisioned' AND target_id = ?`,
				person.OrgID, vars["user"]).Scan(&data).Error)
			require.Contains(t, data, person.UserID)
			require.Contains(t, data, `"sessions_ended": 1`)
		})
	}
}

// TestSCIMTenancyAndTokens: another organization's SCIM token sees nothing of this one;
// an API token is no SCIM token and a SCIM token no API token; a rotated token stops.
func TestSCIMTenancyAndTokens(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	acme, globex := scimToken(t, app, "acme"), scimToken(t, app, "globex")
	status, body := scimCall(t, app, acme, "POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ann@acme.example","externalId":"ann"}`)
	require.Equal(t, http.StatusCreated, status, body)
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(body)[1]

	for _, call := range [][2]string{{"GET", "/scim/v2/Users/" + id}, {"DELETE", "/scim/v2/Users/" + id}} {
		status, body = scimCall(t, app, globex, call[0], call[1], "")
		require.Equal(t, http.StatusNotFound, status, body)
		require.Contains(t, body, "urn:ietf:params:scim:api:messages:2.0:Error")
	}
	status, body = scimCall(t, app, globex, "GET", "/scim/v2/Users?filter=userName%20eq%20%22ann%40acme.example%22", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"totalResults":0`)

	admin := app.NewMember(t, "acme", "Ada Admin", authz.RoleAdmin, false)
	apiToken := app.Token(t, admin, "admin")
	for _, tok := range []string{apiToken, "", "gantryscim_nope.nope", acme + "x"} {
		status, body = scimCall(t, app, tok, "GET", "/scim/v2/Users", "")
		require.Equal(t, http.StatusUnauthorized, status, "%q: %s", tok, body)
		require.Contains(t, body, `"status":"401"`)
	}
	resp := app.API(t, acme, http.MethodGet, "/api/v1/environments", "")
	webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a SCIM token is no API token")

	owner := app.NewMember(t, "acme", "Otto Owner", authz.RoleOwner, false)
	_, err := app.System.SCIM.Rotate(authz.WithSubject(t.Context(), owner.Subject(time.Now())))
	require.NoError(t, err)
	status, _ = scimCall(t, app, acme, "GET", "/scim/v2/Users", "")
	require.Equal(t, http.StatusUnauthorized, status, "a rotated token stops at once")
	_, err = app.System.SCIM.Rotate(authz.WithSubject(t.Context(), admin.Subject(time.Now())))
	require.Error(t, err, "an admin does not make the directory's token")
}

// TestSCIMMalformedBodies: every malformed request is an RFC 7644 §3.12 error document
// and stores nothing (no row, no audit event).
func TestSCIMMalformedBodies(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	token := scimToken(t, app, "acme")
	status, body := scimCall(t, app, token, "POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"bo@acme.example","externalId":"bo"}`)
	require.Equal(t, http.StatusCreated, status, body)
	id := regexp.MustCompile(`"id":"([^"]+)"`).FindStringSubmatch(body)[1]
	count := func() (n [2]int64) {
		require.NoError(t, app.DB.Raw("SELECT count(*) FROM scim_users").Scan(&n[0]).Error)
		require.NoError(t, app.DB.Raw("SELECT count(*) FROM audit_events").Scan(&n[1]).Error)
		return n
	}
	before := count()
	patch := func(ops string) string {
		return `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":` + ops + `}`
	}
	for _, c := range []struct{ method, path, body, scimType string }{
		{"POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":`, "invalidSyntax"},
		{"POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"displayName":"no userName"}`, "invalidValue"},
		{"POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"BO@acme.example"}`, "uniqueness"},
		{"POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"x@acme.example","active":"maybe"}`, "invalidValue"},
		{"PATCH", "/scim/v2/Users/" + id, patch(`[{"op":"Explode","path":"active","value":false}]`), "invalidValue"},
		{"PATCH", "/scim/v2/Users/" + id, patch(`[{"op":"replace","path":"active","value":false},{"op":"replace","path":"userName","value":""}]`), "invalidValue"},
		{"POST", "/scim/v2/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"g","members":[{"value":"scimu-nobody"}]}`, "invalidValue"},
	} {
		status, body := scimCall(t, app, token, c.method, c.path, c.body)
		want := http.StatusBadRequest
		if c.scimType == "uniqueness" {
			want = http.StatusConflict
		}
		require.Equal(t, want, status, "%s %s: %s", c.method, c.body, body)
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &doc), body)
		require.Equal(t, []any{"urn:ietf:params:scim:api:messages:2.0:Error"}, doc["schemas"], body)
		require.Equal(t, strconv.Itoa(want), doc["status"], body)
		require.Equal(t, c.scimType, doc["scimType"], body)
		require.Equal(t, count(), before, "%s persisted something", c.body)
	}
	status, body = scimCall(t, app, token, "GET", "/scim/v2/Users/"+id, "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"active":true`, "the refused PATCH left the user active")
}
