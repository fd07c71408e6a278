package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/handlers/openapi"
	"gantry/models/authz"
	"gantry/models/run"
	"gantry/web"
)

// openAPIDocument fetches the served description.
func openAPIDocument(t *testing.T, app *webtest.App) []byte {
	t.Helper()
	resp, err := http.Get(app.URL + "/api/v1/openapi.json")
	require.NoError(t, err)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return []byte(body)
}

// newValidator builds pb33f's validator on doc; a document it cannot build is an error.
func newValidator(doc []byte) (validator.Validator, error) {
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return v, nil
}

// TestOpenAPIDescribesEveryRoute: the served description is valid OpenAPI 3.1 (by
// pb33f's validator against the specification's schema), and every /api/v1 route the
// server registered is in it, with its method, a success answer, a schema for each
// JSON body it sends and answers, and the Idempotency-Key a mutating call needs.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	doc := openAPIDocument(t, app)
	v, err := newValidator(doc)
	require.NoError(t, err)
	ok, problems := v.ValidateDocument()
	for _, p := range problems {
		t.Errorf("the description is not valid OpenAPI: %s: %s", p.Message, p.Reason)
		for _, sv := range p.SchemaValidationErrors {
			t.Errorf("  %s at %s", sv.Reason, sv.FieldPath+" "+sv.KeywordLocation)
		}
	}
	require.True(t, ok)

	var parsed struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Parameters []struct {
				Name     string `json:"name"`
				In       string `json:"in"`
				Required bool   `json:"required"`
			} `json:"parameters"`
			RequestBody *struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]struct {
					Schema map[string]any `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(doc, &parsed))
	require.Equal(t, "3.1.0", parsed.OpenAPI)

	routes := 0
	for _, r := range app.Server.Echo.Routes() {
		if !strings.HasPrefix(r.Path, "/api/v1") || r.Method == "echo_route_not_found" {
			continue
		}
		routes++
		p := openapi.OpenAPIPath(r.Path)
		op, found := parsed.Paths[p][strings.ToLower(r.Method)]
		if !found {
			t.Errorf("%s %s is served but not described", r.Method, p)
			continue
		}
		var success string
		for status := range op.Responses {
			if strings.HasPrefix(status, "2") {
				success = status
			}
		}
		if success == "" {
			t.Errorf("%s %s: no success answer described", r.Method, p)
			continue
		}
		for media, c := range op.Responses[success].Content {
			if media == "application/json" && r.Path != "/api/v1/openapi.json" && len(c.Schema) == 0 {
				t.Errorf("%s %s: its JSON answer has no schema", r.Method, p)
			}
		}
		for status, resp := range op.Responses {
			if strings.HasPrefix(status, "4") && resp.Content["application/problem+json"].Schema == nil {
				t.Errorf("%s %s: answer %s is not described as a problem document", r.Method, p, status)
			}
		}
		if r.Method == http.MethodGet {
			continue
		}
		keyed := false
		for _, prm := range op.Parameters {
			keyed = keyed || (prm.Name == "Idempotency-Key" && prm.In == "header" && prm.Required)
		}
		switch readOnly := r.Method == http.MethodPost && web.ReadOnlyPosts[r.Path]; {
		case readOnly && keyed:
			t.Errorf("%s %s: changes nothing (the server takes no key) but asks for an Idempotency-Key", r.Method, p)
		case !readOnly && !keyed:
			t.Errorf("%s %s: changes something but asks for no Idempotency-Key", r.Method, p)
		}
		if op.RequestBody != nil && len(op.RequestBody.Content["application/json"].Schema) == 0 {
			t.Errorf("%s %s: its body has no schema", r.Method, p)
		}
	}
	require.Greater(t, routes, 30, "the API's routes were enumerated")

	// Every described operation is served (no description of a route that is gone).
	served := map[string]bool{}
	for _, r := range app.Server.Echo.Routes() {
		served[strings.ToLower(r.Method)+" "+openapi.OpenAPIPath(r.Path)] = true
	}
	for p, ops := range parsed.Paths {
		for method := range ops {
			require.True(t, served[method+" "+p], "%s %s is described but not served", method, p)
		}
	}
}

// TestOpenAPIValidatorRejectsAPlantedBadDocument: the check above can fail. The served
// description with one planted mistake each (a parameter in the body, a path without
// its slash, a reference to a schema that is not there, a response without its
// description) is refused.
func TestOpenAPIValidatorRejectsAPlantedBadDocument(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	doc := openAPIDocument(t, app)
	plants := map[string]func(d map[string]any){
		"a parameter in the body (OpenAPI 2, not 3)": func(d map[string]any) {
			op := d["paths"].(map[string]any)["/api/v1/runs"].(map[string]any)["get"].(map[string]any)
			op["parameters"] = append(op["parameters"].([]any), map[string]any{"name": "x", "in": "body", "schema": map[string]any{}})
		},
		"a path without its leading slash": func(d map[string]any) {
			paths := d["paths"].(map[string]any)
			paths["api/v1/runs"] = paths["/api/v1/runs"]
		},
		"dangling reference": func(d map[string]any) {
			op := d["paths"].(map[string]any)["/api/v1/runs/{id}"].(map[string]any)["get"].(map[string]any)
			op["responses"].(map[string]any)["200"].(map[string]any)["content"] = map[string]any{
				"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/NoSuchRun"}}}
		},
		"response without description": func(d map[string]any) {
			op := d["paths"].(map[string]any)["/api/v1/runs"].(map[string]any)["get"].(map[string]any)
			delete(op["responses"].(map[string]any)["200"].(map[string]any), "description")
		},
	}
	for name, plant := range plants {
		var d map[string]any
		require.NoError(t, json.Unmarshal(doc, &d))
		plant(d)
		bad, err := json.Marshal(d)
		require.NoError(t, err)
		v, err := newValidator(bad)
		if err != nil {
			t.Logf("%s: refused while building: %v", name, err)
			continue
		}
		ok, problems := v.ValidateDocument()
		require.False(t, ok, "%s: a planted mistake went through", name)
		require.NotEmpty(t, problems, name)
	}
}

// apiChecker validates real API calls against the served description: the request
// and the answer (status, media type and body against the operation's schema).
type apiChecker struct {
	t   *testing.T
	app *webtest.App
	mu  sync.Mutex
	v   validator.Validator
}

func newAPIChecker(t *testing.T, app *webtest.App) *apiChecker {
	v, err := newValidator(openAPIDocument(t, app))
	require.NoError(t, err)
	return &apiChecker{t: t, app: app, v: v}
}

// call makes one API call with token and checks it against the description; it
// returns the status and the body.
func (c *apiChecker) call(token, method, path string, body any) (int, string) {
	c.t.Helper()
	return c.send(token, method, path, body, true)
}

// callBadly makes a call whose request breaks the description on purpose (a made-up
// field, a value outside an enum): only its answer is checked.
func (c *apiChecker) callBadly(token, method, path string, body any) (int, string) {
	c.t.Helper()
	return c.send(token, method, path, body, false)
}

func (c *apiChecker) send(token, method, path string, body any, checkRequest bool) (int, string) {
	c.t.Helper()
	var raw string
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(c.t, err)
		raw = string(b)
	}
	resp := c.app.API(c.t, token, method, path, raw)
	text := webtest.ReadBody(c.t, resp)
	c.checkAnswer(token, method, path, raw, resp, text, checkRequest)
	return resp.StatusCode, text
}

// check validates a call made without the checker, request and answer.
func (c *apiChecker) check(token, method, path, raw string, resp *http.Response, text string) {
	c.t.Helper()
	c.checkAnswer(token, method, path, raw, resp, text, true)
}

func (c *apiChecker) checkAnswer(token, method, path, raw string, resp *http.Response, text string, checkRequest bool) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.app.URL+path, strings.NewReader(raw))
	require.NoError(c.t, err)
	if raw != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", "k")
	}
	resp.Body = io.NopCloser(bytes.NewReader([]byte(text)))
	c.mu.Lock()
	defer c.mu.Unlock()
	validate := c.v.ValidateHttpRequestResponse
	if !checkRequest {
		validate = c.v.ValidateHttpResponse
	}
	if ok, problems := validate(req, resp); !ok {
		for _, p := range problems {
			msg := p.Message + ": " + p.Reason
			for _, sv := range p.SchemaValidationErrors {
				msg += "; " + sv.Reason + " at " + sv.FieldPath + " " + sv.KeywordLocation
			}
			c.t.Errorf("%s %s answered %d, which its description does not allow: %s\n%s", method, path, resp.StatusCode, msg, text)
		}
	}
}

// TestOpenAPIValidatorRejectsADriftedAnswer: the answers' check can fail too. A run as
// the API answers it, with a field gone or of another type, is refused against its
// schema, and the real answer passes.
func TestOpenAPIValidatorRejectsADriftedAnswer(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	v, err := newValidator(openAPIDocument(t, app))
	require.NoError(t, err)
	admin := app.NewMember(t, "acme", "Dee Drift", "admin", false)
	token := app.Token(t, admin, "read")
	resp := app.API(t, token, http.MethodGet, "/api/v1/runs?limit=1", "")
	real := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, real)
	answer := func(body string) bool { return validAnswer(t, v, app.URL+"/api/v1/runs?limit=1", token, body) }
	require.True(t, answer(real), "the real answer")
	require.False(t, answer(`{"runs":[],"total":"many"}`), "a total that is no number")
	require.False(t, answer(`{"total":0}`), "the runs gone")
	require.False(t, answer(`{"runs":[{"id":"run-1"}],"total":1}`), "a run without its fields")
}

// validAnswer reports whether body, as a 200 JSON answer to a GET of url with token, is
// what the description says.
func validAnswer(t *testing.T, v validator.Validator, url, token, body string) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	r := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}
	ok, _ := v.ValidateHttpResponse(req, r)
	return ok
}

// TestOpenAPIHoldsARunsEnding: a run's ending is in GET /api/v1/runs/{id} as one of the
// rule's codes, the description's enum holds the real answer, and a code the rule does
// not have is refused.
func TestOpenAPIHoldsARunsEnding(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	v, err := newValidator(openAPIDocument(t, app))
	require.NoError(t, err)
	operator := app.LoggedIn(t, "operator@acme.test")
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")
	req.Set("kind", "plan_only")
	id := app.RequestRun(t, operator, req)
	waitForState(t, app, id, run.Planned)
	token := app.Token(t, app.NewMember(t, "acme", "Enid Ending", authz.RoleViewer, false), "read")
	resp := app.API(t, token, http.MethodGet, "/api/v1/runs/"+id, "")
	real := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, real)
	require.Contains(t, real, `"ending":"PLAN_ONLY"`)
	answer := func(body string) bool { return validAnswer(t, v, app.URL+"/api/v1/runs/"+id, token, body) }
	require.True(t, answer(real), "the real answer")
	require.False(t, answer(strings.Replace(real, `"ending":"PLAN_ONLY"`, `"ending":"MADE_UP"`, 1)), "a code the rule does not have")
}
