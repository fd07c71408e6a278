package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"
)

// The pipeline commands (request, runs, review, approve, reject, audit export) talk to
// a Gantry over its JSON API with an API token: GANTRY_URL and GANTRY_TOKEN. A token
// never goes in a flag, where the process list would show it.

// errStillWaiting is a run still waiting (for a decision, or still running) when
// --timeout ran out: exit status 2, so a pipeline can tell it from a refusal (1).
var errStillWaiting = errors.New("still waiting")

// usageError is a usage error (exit status 2) with its message.
type usageError string

func (e usageError) Error() string { return string(e) }
func (e usageError) Unwrap() error { return errUsage }

// apiClient calls one Gantry's API with one token.
type apiClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newAPIClient() (*apiClient, error) {
	raw, token := os.Getenv("GANTRY_URL"), os.Getenv("GANTRY_TOKEN")
	if raw == "" || token == "" {
		return nil, usageError("set GANTRY_URL (the portal's address, e.g. https://gantry.example.com) and GANTRY_TOKEN (an API token from Settings, API tokens)")
	}
	base, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, usageError(fmt.Sprintf("GANTRY_URL %q is not an http(s) address", raw))
	}
	return &apiClient{base: base, token: token, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// apiProblem is a refusal as the API answers it (RFC 9457).
type apiProblem struct {
	Status int               `json:"status"`
	Title  string            `json:"title"`
	Detail string            `json:"detail"`
	Code   string            `json:"code"`
	Fields map[string]string `json:"fields"`
}

func (p *apiProblem) Error() string {
	msg := p.Code + ": " + p.Detail
	keys := make([]string, 0, len(p.Fields))
	for k := range p.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		msg += "\n  " + k + ": " + p.Fields[k]
	}
	return msg
}

// url is the portal's address of path (which may carry a query).
func (c *apiClient) url(path string) string { return c.base.String() + path }

// call sends one request; a change carries an Idempotency-Key, the same on each of its
// retries, so a retry after a lost answer takes effect once. A refusal is *apiProblem.
func (c *apiClient) call(ctx context.Context, method, path string, body, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return err
		}
	}
	key := ""
	if method != http.MethodGet {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		key = hex.EncodeToString(b)
	}
	var lastErr error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, c.url(path), bytes.NewReader(raw))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Accept", "application/json")
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			lastErr = err // the network: try again with the same key
			continue
		}
		answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			lastErr = err
			continue
		}
		if resp.StatusCode >= 500 {
			lastErr = fmt.Errorf("%s %s: %s", method, path, resp.Status)
			continue
		}
		if resp.StatusCode >= 400 {
			p := &apiProblem{Status: resp.StatusCode}
			if json.Unmarshal(answer, p) != nil || p.Code == "" {
				return fmt.Errorf("%s %s: %s", method, path, resp.Status)
			}
			return p
		}
		if out == nil {
			return nil
		}
		if w, ok := out.(io.Writer); ok {
			_, err = w.Write(answer)
			return err
		}
		return json.Unmarshal(answer, out)
	}
	return fmt.Errorf("%s %s: %w", method, path, lastErr)
}

// cliRun is the part of the API's run the commands read.
type cliRun struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	StateReason string `json:"state_reason"`
	Finished    bool   `json:"finished"`
	Template    string `json:"template"`
	RequestedBy string `json:"requested_by"`
	PlanDigest  string `json:"plan_digest"`
	RiskClass   *int   `json:"risk_class"`
	RiskLevel   string `json:"risk_level"`
	FourEyes    bool   `json:"four_eyes"`
	Changes     struct {
		Create  int `json:"create"`
		Update  int `json:"update"`
		Replace int `json:"replace"`
		Delete  int `json:"delete"`
	} `json:"changes"`
	DecisionDeadline *string `json:"decision_deadline"`
	CreatedAt        string  `json:"created_at"`
	Links            struct {
		Page   string `json:"page"`
		Decide string `json:"decide_page"`
	} `json:"links"`
}

// outcome maps a finished run's state onto the exit status: nil for applied or nothing
// to change (and a dry run's plan), errVerdict for the rest.
func outcome(r cliRun) error {
	switch r.State {
	case "SUCCEEDED", "NO_CHANGES", "PLANNED":
		return nil
	}
	return errVerdict
}
