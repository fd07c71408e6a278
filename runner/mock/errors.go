package mock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// at prefixes a message with the file and line it is about, as in
// "modules/postgres/main.tf:14: unsupported function "foo" in the mock runner".
func at(rng hcl.Range, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if rng.Filename == "" {
		return errors.New(msg)
	}
	return fmt.Errorf("%s:%d: %s", rng.Filename, rng.Start.Line, msg)
}

// diagError turns HCL's error diagnostics into one error, each with its position.
func diagError(diags hcl.Diagnostics) error {
	var msgs []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := diagText(d)
		if d.Subject != nil {
			msg = at(*d.Subject, "%s", msg).Error()
		}
		msgs = append(msgs, msg)
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// diagSummary is the text of the diagnostics without positions, for messages
// that carry their own.
func diagSummary(diags hcl.Diagnostics) string {
	var msgs []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			msgs = append(msgs, diagText(d))
		}
	}
	return strings.Join(msgs, "; ")
}

func diagText(d *hcl.Diagnostic) string {
	if d.Detail == "" {
		return d.Summary
	}
	return d.Summary + ": " + d.Detail
}

// attrStep is the name at step i of a traversal ("" when that step is not a name).
func attrStep(trav hcl.Traversal, i int) string {
	if i >= len(trav) {
		return ""
	}
	switch s := trav[i].(type) {
	case hcl.TraverseRoot:
		return s.Name
	case hcl.TraverseAttr:
		return s.Name
	}
	return ""
}
