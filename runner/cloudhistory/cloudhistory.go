// Package cloudhistory is Gantry's client of the change history protocol
// (docs/change-history.md): how a drift check asks a cloud who changed a live resource.
// Gantry defines the protocol and any cloud may serve it; the sandbox cloud of
// `gantry dev` is one that does. The client knows no cloud: it sends the resource's
// OpenTofu type and id as the refresh-only plan names them, with the check's own
// read-only workload token, and reads back the recorded changes.
package cloudhistory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gantry/models/run"
)

// Path is where, below a cloud's endpoint, the protocol's version 1 is served:
// GET <endpoint>/v1/changes/<type>/<id>.
const Path = "/v1/changes/"

// maxBody bounds what is read of an answer: a history is a hundred changes at most in
// any cloud that keeps it sensibly, far below this.
const maxBody = 1 << 20

// ErrNoHistory: the cloud keeps no history of that resource for this token (404).
var ErrNoHistory = errors.New("the cloud has no history of this resource")

// Client reads resources' change histories from a cloud that serves the protocol. It
// is a runner.ChangeLog.
type Client struct {
	// Endpoint is the cloud's http(s) URL (the protocol lives below it, at Path).
	Endpoint string
	// HTTP is the client to use (nil: one with a 10-second timeout).
	HTTP *http.Client
}

// answer is the body of a 200: the resource's changes, oldest first. A cloud may send
// more fields (its own ids, generations, namespaces); they are not read.
type answer struct {
	Changes []change `json:"changes"`
}

// change is one recorded change, in the protocol's words (docs/change-history.md).
type change struct {
	By      string    `json:"by"`
	Action  string    `json:"action"`
	Subject string    `json:"subject"`
	Run     string    `json:"run"`
	Window  string    `json:"window"`
	Phase   string    `json:"phase"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

// problem is the body of an error answer, when the cloud sends one.
type problem struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Changes returns the recorded changes of the resource of OpenTofu type typ (e.g.
// sandbox_database) with cloud id id, read with token.
func (c Client) Changes(ctx context.Context, token, typ, id string) ([]run.CloudChange, error) {
	if typ == "" || id == "" {
		return nil, errors.New("reading a change history needs the resource's type and id")
	}
	u, err := url.Parse(strings.TrimRight(c.Endpoint, "/") + Path + url.PathEscape(typ) + "/" + url.PathEscape(id))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the cloud endpoint %q is not an http(s) URL", c.Endpoint)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s %s: %s", typ, id, redact(err.Error(), token))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s %s: %w", typ, id, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%s %s: %w", typ, id, ErrNoHistory)
	case resp.StatusCode != http.StatusOK:
		var p problem
		_ = json.Unmarshal(body, &p)
		msg := strings.TrimSpace(redact(p.Error.Message, token))
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return nil, fmt.Errorf("reading the history of %s %s: the cloud answered %d: %s", typ, id, resp.StatusCode, msg)
	case len(body) > maxBody:
		return nil, fmt.Errorf("reading the history of %s %s: the answer is over %d bytes", typ, id, maxBody)
	}
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("reading the history of %s %s: the answer is not the protocol's JSON: %w", typ, id, err)
	}
	out := make([]run.CloudChange, len(a.Changes))
	for i, ch := range a.Changes {
		out[i] = run.CloudChange{By: ch.By, Action: ch.Action, Subject: ch.Subject, Run: ch.Run, Window: ch.Window,
			Phase: ch.Phase, Reason: ch.Reason, At: ch.At}
	}
	return out, nil
}

// redact keeps the token (and any long part of it) out of a message that may quote it:
// errors reach run pages and logs.
func redact(msg, token string) string {
	if token == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, token, "[token]")
	for part := range strings.SplitSeq(token, ".") {
		if len(part) >= 8 {
			msg = strings.ReplaceAll(msg, part, "[token]")
		}
	}
	return msg
}
