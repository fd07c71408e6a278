package catalog

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gantry/models/errs"
)

// decimalRe is what a person may type for a number: no exponents, hex, NaN or
// Inf, which strconv.ParseFloat would accept but nobody means in a form.
var decimalRe = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// Kinds of rule violation, so the manifest check can word a bad default for
// template authors while ValidateInputs words it for the person filling the form.
const (
	violationRange   = "range"
	violationEnum    = "enum"
	violationPattern = "pattern"
)

// ValidateInputs turns raw form values, keyed by input name (without the
// "inputs." prefix), into typed values: string inputs give a string, number
// inputs a float64 (always float64, also for whole numbers, and also for
// defaults), bool inputs a bool. An empty value counts as absent, so an absent
// optional input takes its default (or stays out of the result when it has none).
//
// On any problem it returns a nil map and a Validation whose fields are named
// "inputs.<name>", matching the form field names; otherwise it returns a nil
// *errs.Validation. Do not assign that nil pointer to an error variable: it
// would not compare equal to nil.
func (t Template) ValidateInputs(raw map[string]string) (map[string]any, *errs.Validation) {
	v := &errs.Validation{}
	out := make(map[string]any, len(t.Inputs))
	known := make(map[string]bool, len(t.Inputs))
	for _, in := range t.Inputs {
		known[in.Name] = true
		field := "inputs." + in.Name
		s, present := raw[in.Name]
		if in.Type != TypeString {
			// Stray spaces around a number or a boolean are never meaningful; in a
			// string they may be, so strings are kept as typed.
			s = strings.TrimSpace(s)
		}
		if !present || s == "" {
			if in.Required {
				v.Add(field, "Enter a value.")
			} else if in.Default != nil {
				out[in.Name] = in.Default
			}
			continue
		}
		val, msg := in.parse(s)
		if msg != "" {
			v.Add(field, msg)
			continue
		}
		if _, msg := in.violation(val); msg != "" {
			v.Add(field, msg)
			continue
		}
		out[in.Name] = val
	}
	for name := range raw {
		if !known[name] {
			v.Add("inputs."+name, fmt.Sprintf("This template has no input named %s.", name))
		}
	}
	if len(v.Fields) > 0 {
		return nil, v
	}
	return out, nil
}

// parse converts one non-empty raw value to the input's type, or returns the
// message to show next to the field.
func (in Input) parse(s string) (val any, msg string) {
	switch in.Type {
	case TypeNumber:
		f, err := parseNumber(s)
		switch {
		case err != nil && in.Integer:
			return nil, "Enter a whole number, digits only (for example 20)."
		case err != nil:
			return nil, "Enter a whole or decimal number."
		case in.Integer && f != math.Trunc(f):
			return nil, fmt.Sprintf("Enter a whole number: %s has decimals.", s)
		}
		return f, ""
	case TypeBool:
		// Only the two words: a select or radio pair sends them. A checkbox's
		// "on" is not accepted because an unchecked box sends nothing at all.
		switch strings.ToLower(s) {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, "Choose true or false."
	default:
		return s, ""
	}
}

func parseNumber(s string) (float64, error) {
	if !decimalRe.MatchString(s) {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	return strconv.ParseFloat(s, 64)
}

// violation checks a typed value against the input's enum, range and pattern and
// returns the kind of the first rule broken and the message for the form field,
// or two empty strings.
func (in Input) violation(v any) (kind, msg string) {
	if len(in.Enum) > 0 && !in.inEnum(v) {
		return violationEnum, fmt.Sprintf("Choose one of: %s.", strings.Join(in.Enum, ", "))
	}
	if f, ok := v.(float64); ok {
		switch {
		case in.Min != nil && in.Max != nil && (f < *in.Min || f > *in.Max):
			return violationRange, fmt.Sprintf("Enter a number from %s to %s.", formatNumber(*in.Min), formatNumber(*in.Max))
		case in.Min != nil && f < *in.Min:
			return violationRange, fmt.Sprintf("Enter a number of at least %s.", formatNumber(*in.Min))
		case in.Max != nil && f > *in.Max:
			return violationRange, fmt.Sprintf("Enter a number of at most %s.", formatNumber(*in.Max))
		}
	}
	if s, ok := v.(string); ok && in.Pattern != "" {
		re, err := compilePattern(in.Pattern)
		if err != nil || !re.MatchString(s) {
			// Say what is wrong where the pattern lets us tell; else the help text says
			// in words what the pattern says in symbols.
			if msg := explainMismatch(in.Pattern, s); msg != "" {
				return violationPattern, msg
			}
			if in.Help != "" {
				return violationPattern, in.Help
			}
			return violationPattern, "Does not match the required format."
		}
	}
	return "", ""
}

func (in Input) inEnum(v any) bool {
	for _, e := range in.Enum {
		switch x := v.(type) {
		case string:
			if x == e {
				return true
			}
		case float64:
			if f, err := parseNumber(e); err == nil && f == x {
				return true
			}
		}
	}
	return false
}

// compilePattern anchors the pattern at both ends, as browsers do for the HTML
// pattern attribute, so the form and the server agree on what matches.
func compilePattern(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}
