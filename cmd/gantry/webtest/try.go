package webtest

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"

	"gantry/models/idempotency"
)

// Helpers that return their error instead of failing the test: for requests a test makes
// on goroutines of its own (several in flight at once), where require would end only the
// goroutine. The test keeps the errors and checks them once the goroutines ended.

// TryPostForm is PostForm returning its error: it posts form to path with c, a fresh
// idempotency key added unless form sets the field ("" leaves it out).
func (a *App) TryPostForm(c *http.Client, path string, form url.Values) (*http.Response, error) {
	if !form.Has(idempotency.Field) {
		form = maps.Clone(form)
		if form == nil {
			form = url.Values{}
		}
		form.Set(idempotency.Field, idempotency.NewKey())
	}
	req, err := http.NewRequest(http.MethodPost, a.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("building POST %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return resp, nil
}
