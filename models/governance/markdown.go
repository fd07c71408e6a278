package governance

import (
	"fmt"
	"strings"
	"time"
)

// Markdown is the report as a Markdown document.
func (r Report) Markdown(org string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Governance report: %s\n\nGenerated %s from live configuration and run history.\n\n", org, r.GeneratedAt.Format(time.RFC3339))
	b.WriteString("## Pipeline gates per environment\n\n")
	for _, e := range r.Environments {
		fmt.Fprintf(&b, "### %s (%s)\n\n| Gate | Checks | Status | Enforced by |\n|---|---|---|---|\n", e.Name, e.Tier)
		for _, g := range e.Gates {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Checks, g.Status, g.EnforcedBy)
		}
		a := e.Applies
		fmt.Fprintf(&b, "\nApply identity: %s. Applies: %d (%d unevidenced, %d self-approved, %d self-service).\n\n", e.ApplyIdentity, a.Applied, a.Unevidenced, a.SelfApproved, a.SelfService)
		i := e.Integration
		fmt.Fprintf(&b, "Integration: %s at %s, token audience %s; plans and verifications as %s; applies as %s; %s.", i.Kind.Label(), i.Where, i.Audience, i.Read, i.Write, i.Credentials())
		if !i.Kind.Exercised() {
			b.WriteString(" Not exercised against the real cloud by Gantry's tests.")
		}
		b.WriteString("\n\n")
		for _, f := range e.Findings {
			fmt.Fprintf(&b, "- **Finding:** %s. Setting: %s.", f.Text, f.Setting.Name)
			if len(f.Runs) > 0 {
				ids := make([]string, len(f.Runs))
				for i, run := range f.Runs {
					ids[i] = fmt.Sprintf("#%d %s", run.Number, run.ID)
				}
				fmt.Fprintf(&b, " Runs: %s.", strings.Join(ids, ", "))
			}
			b.WriteString("\n")
		}
		if len(e.Findings) > 0 {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "## Approval matrix in force (version %d)\n\n", r.MatrixVersion)
	list(&b, r.Matrix)
	b.WriteString("\nFloors no matrix can lower:\n\n")
	list(&b, r.Floors)
	b.WriteString("\n## Rollback boundaries per template\n\n")
	list(&b, r.Rollback)
	fmt.Fprintf(&b, "\n## Manual change path\n\n%s\n\n", r.ManualChange)
	list(&b, r.ManualChangeRecord)
	b.WriteString("\n## Downstream handoff\n\n")
	list(&b, r.Handoff)
	return b.String()
}

// list writes lines as a Markdown list.
func list(b *strings.Builder, lines []string) {
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", l)
	}
}
