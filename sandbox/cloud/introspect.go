package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Token introspection (RFC 7662). A signature and an exp say a token was issued and has
// not run out; they cannot say its grant still holds. Gantry ends a break-glass
// window's credential the moment the window ends, and a phase's when the phase does
// (finished, cancelled, its lease lost), long before the token's exp. An issuer that
// advertises an introspection_endpoint in its discovery document is asked, at every
// call a workload token makes, after the signature checks: an inactive answer is a 401,
// an issuer that does not answer a 503 (fail closed; clients retry it). An active answer
// is never cached, since a grant may end the next moment; an inactive one is, by the
// token's jti, because a grant never comes back.

// errGrantEnded is the refusal of a token its issuer no longer vouches for.
var errGrantEnded = &authError{"the token's grant has ended (window closed, phase over or run cancelled): " +
	"the issuer says it is no longer active; ask Gantry for a new credential if the grant still holds"}

// introspectionTimeout bounds one question to the issuer.
const introspectionTimeout = 5 * time.Second

// maxEnded bounds the jtis remembered as ended; the oldest is forgotten first (and
// asked about again, at no harm, should it come back).
const maxEnded = 4096

// introspectionEndpoint is the discovery document's introspection_endpoint, checked: an
// absolute http(s) URL on the issuer's own origin (the cloud sends it bearer tokens, so
// it may go nowhere else), or "" when the issuer offers none.
func introspectionEndpoint(issuer, endpoint string) (string, error) {
	if endpoint == "" {
		return "", nil
	}
	iu, err := url.Parse(issuer)
	if err != nil {
		return "", fmt.Errorf("parsing the issuer's URL: %w", err)
	}
	eu, err := url.Parse(endpoint)
	if err != nil || (eu.Scheme != "https" && eu.Scheme != "http") || eu.Scheme != iu.Scheme || eu.Host != iu.Host {
		return "", fmt.Errorf("the issuer's introspection_endpoint %q is not an http(s) URL on the issuer's origin %s://%s", endpoint, iu.Scheme, iu.Host)
	}
	return endpoint, nil
}

// endedTokens are the jtis the issuer answered inactive, oldest first.
type endedTokens struct {
	mu    sync.Mutex
	set   map[string]bool
	order []string
}

func (e *endedTokens) has(jti string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.set[jti]
}

func (e *endedTokens) add(jti string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.set == nil {
		e.set = map[string]bool{}
	}
	if e.set[jti] {
		return
	}
	if len(e.order) >= maxEnded {
		delete(e.set, e.order[0])
		e.order = e.order[1:]
	}
	e.set[jti] = true
	e.order = append(e.order, jti)
}

// checkLive asks the issuer at endpoint whether raw (whose jti is jti, "" if it has
// none) is still active: nil when it is, errGrantEnded when not, errIssuerUnavailable
// when the issuer does not answer.
func (s *Server) checkLive(ctx context.Context, endpoint, raw, jti string) error {
	if jti != "" && s.ended.has(jti) {
		return errGrantEnded
	}
	active, err := s.introspect(ctx, endpoint, raw)
	if err != nil {
		return fmt.Errorf("%w: asking whether the token is still active: %s", errIssuerUnavailable, redact(err.Error(), raw))
	}
	if !active {
		if jti != "" {
			s.ended.add(jti)
		}
		return errGrantEnded
	}
	return nil
}

// introspect POSTs raw to the issuer's introspection endpoint and reads its answer.
func (s *Server) introspect(ctx context.Context, endpoint, raw string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, introspectionTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(url.Values{"token": {raw}}.Encode()))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.issuerClient().Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return false, fmt.Errorf("reading the introspection answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("the introspection endpoint answered %d", resp.StatusCode)
	}
	var answer struct {
		Active *bool `json:"active"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Active == nil {
		return false, fmt.Errorf("the introspection answer is not RFC 7662 JSON with \"active\"")
	}
	return *answer.Active, nil
}

// issuerClient is the HTTP client New's context carries for the issuer
// (oidc.ClientContext), else one with the introspection timeout.
func (s *Server) issuerClient() *http.Client {
	if c, ok := s.bg.Value(oauth2.HTTPClient).(*http.Client); ok && c != nil {
		return c
	}
	return &http.Client{Timeout: introspectionTimeout}
}
