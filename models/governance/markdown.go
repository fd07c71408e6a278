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
	for _, l := range r.Matrix {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\nFloors no matrix can lower:\n\n")
	for _, l := range r.Floors {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n## Rollback boundaries per template\n\n")
	for _, l := range r.Rollback {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "\n## Manual change path\n\n%s\n\n", r.ManualChange)
	for _, l := range r.ManualChangeRecord {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n## Downstream handoff\n\n")
	for _, l := range r.Handoff {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	return b.String()
}
