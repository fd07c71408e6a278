package main

import (
	"bytes"
	"context"
	"encoding/json"
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

// runReview is "gantry review RUN": what deciding the run binds to, summed up for the
// person, and saved (-o) or printed (--json) as the review JSON that approve and reject
// send back. The file is the binding: it holds what was read, not what the run carries
// when the decision is sent.
func runReview(ctx context.Context, args []string, stdout io.Writer, _ *slog.Logger) error {
	var asJSON bool
	var out string
	f := newFlags("review RUN", "Show what deciding a run binds to, over the API with a read-scoped token (GANTRY_URL, GANTRY_TOKEN): its\n"+
		"plan digest, changes, risk, policy result and who decides. --json prints the review JSON (GET\n"+
		"/api/v1/runs/RUN/review); -o saves it to a file and prints the summary. Read it, then decide with that file:\n"+
		"gantry approve RUN --evidence FILE or gantry reject RUN --evidence FILE --reason TEXT bind to exactly this evidence.", stdout)
	f.BoolVar(&asJSON, "json", false, "print the review JSON instead of the summary (with -o, the JSON goes to the file)")
	f.StringVar(&out, "o", "", "save the review JSON to this file (what approve and reject take as --evidence) and print the summary")
	id, err := parseRun(f, args)
	if err != nil {
		return err
	}
	c, err := newAPIClient()
	if err != nil {
		return err
	}
	var raw bytes.Buffer
	if err := c.call(ctx, http.MethodGet, "/api/v1/runs/"+url.PathEscape(id)+"/review", nil, &raw); err != nil {
		return err
	}
	if asJSON && out == "" {
		_, err := stdout.Write(raw.Bytes())
		return err
	}
	var rv cliReview
	if err := json.Unmarshal(raw.Bytes(), &rv); err != nil {
		return fmt.Errorf("reading the review of %s: %w", id, err)
	}
	if out != "" {
		if err := os.WriteFile(out, raw.Bytes(), 0o644); err != nil {
			return fmt.Errorf("saving the review: %w", err)
		}
	}
	rv.writeSummary(stdout, out)
	return nil
}

// cliReview is the part of the review JSON the summary reads.
type cliReview struct {
	Run      cliRun `json:"run"`
	Evidence struct {
		PlanRevision int    `json:"plan_revision"`
		PlanDigest   string `json:"plan_digest"`
	} `json:"evidence"`
	Changes []struct {
		Irreversible bool `json:"irreversible"`
	} `json:"changes"`
	Policy struct {
		Outcome string `json:"outcome"`
	} `json:"policy"`
	Deciders string                `json:"deciders"`
	Allowed  map[string]cliVerdict `json:"allowed"`
}

type cliVerdict struct {
	Allowed bool   `json:"allowed"`
	Code    string `json:"code"`
	Reason  string `json:"reason"`
}

func (v cliVerdict) String() string {
	if v.Allowed {
		return "yes"
	}
	return "no: " + v.Code + ": " + v.Reason
}

// writeSummary writes the summary; saved is the file the review JSON went to, if any.
func (rv cliReview) writeSummary(stdout io.Writer, saved string) {
	r := rv.Run
	irreversible := 0
	for _, ch := range rv.Changes {
		if ch.Irreversible {
			irreversible++
		}
	}
	risk := "not assessed"
	if r.RiskClass != nil {
		risk = fmt.Sprintf("class %d, %s", *r.RiskClass, r.RiskLevel)
	}
	if r.FourEyes {
		risk += ", four eyes"
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Run\t%s (%s), %s of %s\n", r.Label, r.ID, r.State, r.Template)
	fmt.Fprintf(w, "Plan\t%s (revision %d)\n", rv.Evidence.PlanDigest, rv.Evidence.PlanRevision)
	fmt.Fprintf(w, "Changes\t%d to create, %d to update, %d to replace, %d to destroy; %d irreversible (data lost)\n",
		r.Changes.Create, r.Changes.Update, r.Changes.Replace, r.Changes.Delete, irreversible)
	fmt.Fprintf(w, "Risk\t%s\n", risk)
	fmt.Fprintf(w, "Policy\t%s\n", rv.Policy.Outcome)
	fmt.Fprintf(w, "Decided by\t%s\n", rv.Deciders)
	if r.DecisionDeadline != nil {
		fmt.Fprintf(w, "Decide by\t%s\n", *r.DecisionDeadline)
	}
	fmt.Fprintf(w, "You may approve\t%s\n", rv.Allowed["approve"])
	fmt.Fprintf(w, "You may reject\t%s\n", rv.Allowed["reject"])
	_ = w.Flush()
	if saved == "" {
		fmt.Fprintf(stdout, "To decide, save what you read: %s\n", reviewCommand(r.ID))
		return
	}
	fmt.Fprintf(stdout, "Saved to %s. Decide on it: gantry approve %s --evidence %s (or gantry reject %s --evidence %s --reason TEXT)\n",
		saved, r.ID, saved, r.ID, saved)
}

// reviewCommand is how to save the review of run id for a decision.
func reviewCommand(id string) string { return "gantry review " + id + " --json -o review.json" }

// reviewedEvidence is the evidence a person reviewed, read from the file gantry review
// saved (the whole review JSON, or just its evidence object). Raw is sent back as it is:
// the portal compares it with the run under the run's row lock, as for the browser.
type reviewedEvidence struct {
	File       string          `json:"-"`
	Raw        json.RawMessage `json:"-"`
	RunID      string          `json:"run_id"`
	PlanDigest string          `json:"plan_digest"`
}

// parseDecision adds --evidence to a decision's flags, parses args and reads the
// reviewed evidence of the run they name.
func parseDecision(f flags, args []string) (string, reviewedEvidence, error) {
	var file string
	f.StringVar(&file, "evidence", "", "the review JSON you reviewed, as gantry review saved it (required)")
	id, err := parseRun(f, args)
	if err != nil {
		return "", reviewedEvidence{}, err
	}
	ev, err := readEvidence(id, file)
	return id, ev, err
}

// readEvidence reads the reviewed evidence of run id from file. Without a file there is
// nothing reviewed to bind to, so it refuses rather than fetch the run's evidence now.
func readEvidence(id, file string) (reviewedEvidence, error) {
	if file == "" {
		return reviewedEvidence{}, usageError("--evidence FILE is required: a decision binds to the evidence you reviewed, never to what the run carries when it is sent.\n" +
			"Save it with `" + reviewCommand(id) + "`, read it, then pass --evidence review.json.")
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return reviewedEvidence{}, fmt.Errorf("reading the evidence: %w", err)
	}
	var review struct {
		Evidence json.RawMessage `json:"evidence"`
	}
	if err := json.Unmarshal(raw, &review); err != nil {
		return reviewedEvidence{}, usageError(fmt.Sprintf("--evidence %s is not a review JSON: %v", file, err))
	}
	ev := reviewedEvidence{File: file, Raw: review.Evidence}
	if len(ev.Raw) == 0 || string(ev.Raw) == "null" {
		ev.Raw = raw // just the evidence object
	}
	if err := json.Unmarshal(ev.Raw, &ev); err != nil {
		return reviewedEvidence{}, usageError(fmt.Sprintf("--evidence %s: the evidence is not an object: %v", file, err))
	}
	if ev.RunID != id {
		return reviewedEvidence{}, usageError(fmt.Sprintf("--evidence %s is the evidence of run %q, not of %s: save this run's with `%s`",
			file, ev.RunID, id, reviewCommand(id)))
	}
	return ev, nil
}

// runApprove is "gantry approve RUN --evidence FILE": approve the plan the person
// reviewed, as gantry review saved it, never whatever the run carries at that moment.
func runApprove(ctx context.Context, args []string, stdout io.Writer, _ *slog.Logger) error {
	var digest string
	f := newFlags("approve RUN", "Approve a run over the API with a decide-scoped token (GANTRY_URL, GANTRY_TOKEN), bound to the evidence\n"+
		"you reviewed: --evidence is the review JSON gantry review RUN --json -o FILE saved (or just its evidence\n"+
		"object), sent back unchanged. Without it nothing is approved. If the run moved since (a new plan, a state\n"+
		"write, another policy result) the portal refuses with STALE_EVIDENCE: review it again. A token never\n"+
		"approves a risk-3 run: those need a person's fresh sign-in.", stdout)
	f.StringVar(&digest, "plan-digest", "", "also refuse unless the saved evidence is of this plan (a digest handed over apart from the file)")
	id, ev, err := parseDecision(f, args)
	if err != nil {
		return err
	}
	if digest != "" && ev.PlanDigest != digest {
		fmt.Fprintf(stdout, "Not approved: %s is the evidence of plan %s, not of %s.\n", ev.File, ev.PlanDigest, digest)
		return errVerdict
	}
	// No --confirm or --reason: they belong to an elevated (risk-3) approval, which a
	// token never makes (models/run/rules.go); a person makes it in the browser.
	return decide(ctx, stdout, id, "approve", "Approved", ev, map[string]any{})
}

// runReject is "gantry reject RUN --evidence FILE --reason TEXT": reject the plan the
// person reviewed, with the reason the requester reads.
func runReject(ctx context.Context, args []string, stdout io.Writer, _ *slog.Logger) error {
	var reason string
	f := newFlags("reject RUN", "Reject a run over the API with a decide-scoped token (GANTRY_URL, GANTRY_TOKEN), bound to the evidence\n"+
		"you reviewed (--evidence, saved by gantry review RUN --json -o FILE, as for approve), with the reason the\n"+
		"requester reads. Without the evidence nothing is rejected; if the run moved since, the portal refuses with\n"+
		"STALE_EVIDENCE. A token never decides a risk-3 run.", stdout)
	f.StringVar(&reason, "reason", "", "why you reject the plan (required)")
	id, ev, err := parseDecision(f, args)
	if err != nil {
		return err
	}
	if strings.TrimSpace(reason) == "" {
		return usageError("--reason is required: say why you reject the plan")
	}
	return decide(ctx, stdout, id, "reject", "Rejected", ev, map[string]any{"reason": reason})
}

// decide posts decision ("approve" or "reject") on run id with the reviewed evidence,
// exactly as read from its file, and the rest of body; done says it happened.
func decide(ctx context.Context, stdout io.Writer, id, decision, done string, ev reviewedEvidence, body map[string]any) error {
	c, err := newAPIClient()
	if err != nil {
		return err
	}
	body["evidence"] = ev.Raw
	var r cliRun
	if err := c.call(ctx, http.MethodPost, "/api/v1/runs/"+url.PathEscape(id)+"/"+decision, body, &r); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s run %s (plan %s): %s %s\n", done, r.Label, ev.PlanDigest, r.State, c.url(r.Links.Page))
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
