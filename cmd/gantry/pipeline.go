package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// runRequest is "gantry request": ask for a run and, with --wait, wait for its outcome.
func runRequest(ctx context.Context, args []string, stdout io.Writer, _ *slog.Logger) error {
	var template, env, workspace string
	var vars multiFlag
	var wait, planOnly bool
	var timeout, poll time.Duration
	f := newFlags("request", "Request a run of a catalog template over the API (GANTRY_URL, GANTRY_TOKEN) and print its review URL.\n"+
		"With --wait, wait for the outcome: exit 0 when it applied (or had nothing to change), 2 when it still\n"+
		"waits (for a decision) after --timeout, 1 when it was rejected, blocked, failed, expired, cancelled or went stale.", stdout)
	f.StringVar(&template, "template", "", "the catalog template (required)")
	f.StringVar(&env, "env", "", "the environment's name (required)")
	f.StringVar(&workspace, "workspace", "", "the workspace's name (required; made on first use)")
	f.Var(&vars, "var", "an input as name=value; may be repeated")
	f.BoolVar(&planOnly, "plan-only", false, "a dry run: plan, never apply")
	f.BoolVar(&wait, "wait", false, "wait for the run's outcome")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "how long --wait waits")
	f.DurationVar(&poll, "poll", 2*time.Second, "how often --wait asks")
	if err := f.parse(args); err != nil {
		return err
	}
	if template == "" || env == "" || workspace == "" {
		fmt.Fprintln(stdout, "gantry request: --template, --env and --workspace are required")
		return errUsage
	}
	inputs := map[string]string{}
	for _, v := range vars {
		name, value, ok := strings.Cut(v, "=")
		if !ok || name == "" {
			fmt.Fprintf(stdout, "gantry request: --var %q: want name=value\n", v)
			return errUsage
		}
		inputs[name] = value
	}
	c, err := newAPIClient()
	if err != nil {
		return err
	}
	body := map[string]any{"template": template, "environment": env, "workspace": workspace, "inputs": inputs}
	if planOnly {
		body["kind"] = "plan_only"
	}
	var r cliRun
	if err := c.call(ctx, http.MethodPost, "/api/v1/requests", body, &r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Run %s of %s requested: %s\n", r.Label, workspace, c.url(r.Links.Decide))
	if !wait {
		return nil
	}
	r, err = waitForRun(ctx, c, r, timeout, poll, stdout)
	if err != nil {
		return err
	}
	return outcome(r)
}

// waitForRun polls run r until it is finished (printing each state it moves into) or
// timeout passes (errStillWaiting).
func waitForRun(ctx context.Context, c *apiClient, r cliRun, timeout, poll time.Duration, stdout io.Writer) (cliRun, error) {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		if r.State != last {
			fmt.Fprintf(stdout, "%s  %s %s\n", time.Now().UTC().Format("15:04:05"), r.State, r.StateReason)
			last = r.State
		}
		if r.Finished {
			return r, nil
		}
		if !time.Now().Before(deadline) {
			fmt.Fprintf(stdout, "Still %s after %s: %s\n", r.State, timeout, c.url(r.Links.Decide))
			return r, errStillWaiting
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(min(poll, time.Until(deadline))):
		}
		if err := c.call(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(r.ID), nil, &r); err != nil {
			return r, err
		}
	}
}

// runRuns is "gantry runs": the newest runs the token may see.
func runRuns(ctx context.Context, args []string, stdout io.Writer, _ *slog.Logger) error {
	var state, text string
	var mine, asJSON bool
	var limit int
	f := newFlags("runs", "List runs over the API (GANTRY_URL, GANTRY_TOKEN), newest first.", stdout)
	f.StringVar(&state, "state", "", "only runs in this state (PENDING_APPROVAL, SUCCEEDED, …)")
	f.StringVar(&text, "search", "", "a workspace's name, a run such as billing-prod #3, a template, a requester or a run id")
	f.BoolVar(&mine, "mine", false, "only the runs the token's holder requested")
	f.IntVar(&limit, "limit", 20, "how many (1 to 200)")
	f.BoolVar(&asJSON, "json", false, "print the API's answer as it is")
	if err := f.parse(args); err != nil {
		return err
	}
	c, err := newAPIClient()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	for k, v := range map[string]string{"state": state, "q": text} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if mine {
		q.Set("mine", "true")
	}
	if asJSON {
		return c.call(ctx, http.MethodGet, "/api/v1/runs?"+q.Encode(), nil, stdout)
	}
	var page struct {
		Runs  []cliRun `json:"runs"`
		Total int64    `json:"total"`
	}
	if err := c.call(ctx, http.MethodGet, "/api/v1/runs?"+q.Encode(), nil, &page); err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUN\tLABEL\tKIND\tSTATE\tTEMPLATE\tREQUESTED BY\tREQUESTED AT")
	for _, r := range page.Runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Label, r.Kind, r.State, r.Template, r.RequestedBy, r.CreatedAt)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d of %d\n", len(page.Runs), page.Total)
	return nil
}

// parseRun parses flags given before or after the one positional RUN (a run's id).
func parseRun(f flags, args []string) (string, error) {
	return f.parseOne(args, "name one run (its id, as gantry runs lists it)")
}

// runAuditExport is "gantry audit export": a signed export of the audit log, saved to
// a file once it is built.
func runAuditExport(ctx context.Context, args []string, stdout io.Writer) error {
	var format, from, to, out string
	var timeout time.Duration
	f := newFlags("audit export", "Ask for a signed export of the audit log over the API with an audit-scoped token (GANTRY_URL,\n"+
		"GANTRY_TOKEN), wait until it is built and save it; check it with gantry audit verify.", stdout)
	f.StringVar(&format, "format", "jsonl", "jsonl or csv")
	f.StringVar(&from, "from", "2000-01-01T00:00:00Z", "from this time (RFC 3339)")
	f.StringVar(&to, "to", "", "until this time (RFC 3339); now when empty")
	f.StringVar(&out, "o", "", "the file to write (default: the export's own name in the current directory)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the build")
	if err := f.parse(args); err != nil {
		return err
	}
	c, err := newAPIClient()
	if err != nil {
		return err
	}
	if to == "" {
		// To the nanosecond: whole seconds would leave out this second's events (in a
		// fresh organization, often all of them).
		to = time.Now().UTC().Format(time.RFC3339Nano)
	}
	type export struct {
		ID, Status, Error, SHA256, Download string
		Percent                             int
	}
	var e export
	if err := c.call(ctx, http.MethodPost, "/api/v1/audit/exports", map[string]any{"format": format, "from": from, "to": to}, &e); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for e.Status != "ready" {
		if e.Status == "failed" {
			return fmt.Errorf("the export failed: %s", e.Error)
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stdout, "Export %s is still building (%d%%) after %s.\n", e.ID, e.Percent, timeout)
			return errStillWaiting
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if err := c.call(ctx, http.MethodGet, "/api/v1/audit/exports/"+url.PathEscape(e.ID), nil, &e); err != nil {
			return err
		}
	}
	if out == "" {
		out = "gantry-audit-" + e.ID + "." + format
	}
	file, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := c.call(ctx, http.MethodGet, e.Download, nil, file); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Saved %s (sha256 %s). Check it: gantry audit verify %s --keys-url FILE\n", out, e.SHA256, out)
	return nil
}
