package main

// The decision commands: gantry review saves what a person reviewed, and gantry approve
// and gantry reject send exactly that back (docs/api.md, "The CLI").

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
)

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
