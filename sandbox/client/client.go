// Package client calls the sandbox cloud's HTTP API (see sandbox/README.md). The provider uses it
// with a workload identity token; tests and the manual change path use it with the admin token
// for the /admin/v1 endpoints.
//
// The token is only ever put into the Authorization header: it is not part of any error, log
// line or String() output. It comes from a TokenSource, asked before every request: a fixed
// token (New), or a file a runner rewrites while a long job runs (TokenFile).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gantry/sandbox/api"
)

// Client is a sandbox cloud API client.
type Client struct {
	base      *url.URL
	token     TokenSource
	http      *http.Client
	userAgent string
	attempts  int
	backoff   time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: 30 s timeout).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithRetries sets how often a call is tried when the cloud is unreachable or busy (default 5)
// and the first pause between tries, which doubles each time (default 200 ms).
func WithRetries(attempts int, backoff time.Duration) Option {
	return func(c *Client) { c.attempts, c.backoff = max(attempts, 1), backoff }
}

// New returns a client for the cloud at endpoint authenticating with token (a workload identity
// token, or the admin token for the Admin* methods). The endpoint is an http(s) URL such as
// http://127.0.0.1:8790, or unix:///path/to/cloud.sock for a cloud listening on a unix socket
// (an isolated runner reaches it through a bind-mounted socket).
func New(endpoint, token string, opts ...Option) (*Client, error) {
	if token == "" {
		return nil, errors.New("the sandbox token is empty")
	}
	return NewWithSource(endpoint, StaticToken(token), opts...)
}

// NewWithSource is New with the token taken from src before every request.
func NewWithSource(endpoint string, src TokenSource, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	bad := fmt.Errorf("the sandbox endpoint must be an http(s) URL such as http://127.0.0.1:8790 or unix:///path/to/socket, not %q", endpoint)
	if endpoint == "" || err != nil {
		return nil, bad
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("the sandbox endpoint must not contain credentials, a query or a fragment")
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	switch {
	case (u.Scheme == "http" || u.Scheme == "https") && u.Host != "":
	case u.Scheme == "unix" && u.Host == "" && u.Path != "":
		socket := u.Path
		var d net.Dialer
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		}}
		u = &url.URL{Scheme: "http", Host: "sandbox"}
	default:
		return nil, bad
	}
	if src == nil {
		return nil, errors.New("the sandbox client has no token source")
	}
	c := &Client{base: u, token: src, http: hc, userAgent: "gantry-sandbox-client", attempts: 5, backoff: 200 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// String names the endpoint, never the token.
func (c *Client) String() string { return "sandbox client for " + c.base.String() }

// GoString is String, so %#v cannot print the token either.
func (c *Client) GoString() string { return c.String() }

// Error is an error response of the cloud.
type Error struct {
	Status  int
	Code    string
	Message string
	Fields  []api.FieldError
	Method  string
	Path    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("sandbox cloud: %s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

// IsNotFound reports whether err is the cloud's 404 for an object.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound && e.Code == api.CodeNotFound
}

// StatusOf returns the HTTP status of a cloud error, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// Create creates an object of kind ("database") with the given configurable attributes.
func (c *Client) Create(ctx context.Context, kind string, attrs map[string]any) (api.Object, error) {
	return c.object(ctx, http.MethodPost, "/v1/"+url.PathEscape(kind), api.WriteRequest{Attributes: attrs})
}

// Get reads an object; IsNotFound(err) if it does not exist in the token's namespace.
func (c *Client) Get(ctx context.Context, kind, id string) (api.Object, error) {
	return c.object(ctx, http.MethodGet, objectPath("/v1/", kind, id), nil)
}

// Update replaces the configurable attributes of an object (attributes left out become null).
func (c *Client) Update(ctx context.Context, kind, id string, attrs map[string]any) (api.Object, error) {
	return c.object(ctx, http.MethodPut, objectPath("/v1/", kind, id), api.WriteRequest{Attributes: attrs})
}

// Delete deletes an object.
func (c *Client) Delete(ctx context.Context, kind, id string) error {
	_, err := c.do(ctx, http.MethodDelete, objectPath("/v1/", kind, id), nil)
	return err
}

// List lists the objects of a kind in the token's namespace.
func (c *Client) List(ctx context.Context, kind string) ([]api.Object, error) {
	return c.list(ctx, "/v1/"+url.PathEscape(kind))
}

// AdminGet reads any object (admin token).
func (c *Client) AdminGet(ctx context.Context, kind, id string) (api.Object, error) {
	return c.object(ctx, http.MethodGet, objectPath("/admin/v1/", kind, id), nil)
}

// AdminList lists every object of a kind in every namespace (admin token).
func (c *Client) AdminList(ctx context.Context, kind string) ([]api.Object, error) {
	return c.list(ctx, "/admin/v1/"+url.PathEscape(kind))
}

// AdminUpdate changes the given attributes of an object out of band (admin token); a nil value
// clears an attribute. Attributes that force replacement in a run may change here.
func (c *Client) AdminUpdate(ctx context.Context, kind, id string, attrs map[string]any, reason string) (api.Object, error) {
	return c.object(ctx, http.MethodPut, objectPath("/admin/v1/", kind, id), api.WriteRequest{Attributes: attrs, Reason: reason})
}

// AdminDelete deletes an object out of band (admin token), even if others still reference it.
func (c *Client) AdminDelete(ctx context.Context, kind, id, reason string) error {
	p := objectPath("/admin/v1/", kind, id)
	if reason != "" {
		p += "?reason=" + url.QueryEscape(reason)
	}
	_, err := c.do(ctx, http.MethodDelete, p, nil)
	return err
}

// AdminWriteData writes the fake data marker of a database or bucket (admin token).
func (c *Client) AdminWriteData(ctx context.Context, kind, id, marker, reason string) (api.Object, error) {
	return c.object(ctx, http.MethodPut, objectPath("/admin/v1/", kind, id)+"/data", api.DataRequest{Marker: marker, Reason: reason})
}

func objectPath(prefix, kind, id string) string {
	return prefix + url.PathEscape(kind) + "/" + url.PathEscape(id)
}

func (c *Client) object(ctx context.Context, method, path string, body any) (api.Object, error) {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return api.Object{}, err
	}
	return api.DecodeObject(resp)
}

func (c *Client) list(ctx context.Context, path string) ([]api.Object, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	l, err := api.DecodeObjectList(resp)
	return l.Objects, err
}

// do sends one call, retrying while the cloud is unreachable or answers 502/503/504. A POST is
// only retried when it cannot have created anything (connection refused, or the cloud's 503
// before authentication).
func (c *Client) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encoding the request to the sandbox cloud: %w", err)
		}
	}
	pause := c.backoff
	for attempt := 1; ; attempt++ {
		out, retry, err := c.once(ctx, method, path, payload)
		if err == nil || !retry || attempt >= c.attempts {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause *= 2
	}
}

func (c *Client) once(ctx context.Context, method, path string, payload []byte) (body []byte, retry bool, err error) {
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, false, fmt.Errorf("sandbox cloud: %s %s: %w", method, path, err)
	}
	token, err := c.token()
	if err != nil {
		return nil, false, fmt.Errorf("sandbox cloud: %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// url.Error names the method and URL; neither holds the token.
		return nil, ctx.Err() == nil && (method != http.MethodPost || isDialError(err)), fmt.Errorf("sandbox cloud unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, method != http.MethodPost, fmt.Errorf("sandbox cloud: %s %s: reading the response: %w", method, path, err)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return body, false, nil
	}
	e := &Error{Status: resp.StatusCode, Method: method, Path: strings.SplitN(path, "?", 2)[0]}
	var eb api.ErrorBody
	if json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message, e.Fields = eb.Error.Code, eb.Error.Message, eb.Error.Fields
	} else {
		e.Code, e.Message = "http_error", strings.TrimSpace(http.StatusText(resp.StatusCode))
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		retry = method != http.MethodPost || e.Code == api.CodeIssuerUnavailable
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		retry = method != http.MethodPost
	}
	return nil, retry, e
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
