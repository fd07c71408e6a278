package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Input types a manifest may declare.
const (
	TypeString = "string"
	TypeNumber = "number"
	TypeBool   = "bool"
)

// MaxLabel bounds an input's label.
const MaxLabel = 60

// Divergence kinds: how a drifted or changed value of an input is judged later on.
const (
	DivergenceFixed     = "fixed"
	DivergenceCapacity  = "capacity"
	DivergenceCount     = "count"
	DivergenceRetention = "retention"
	DivergenceScaling   = "scaling"
)

// Template is a parsed template.yaml. After a successful load its inputs are
// normalized: Divergence is never empty and Default is nil, a string, a float64
// or a bool matching the input's type.
type Template struct {
	Name        string  `yaml:"name"`
	Version     string  `yaml:"version"`
	Title       string  `yaml:"title"`
	Description string  `yaml:"description"`
	Owner       string  `yaml:"owner"`
	Inputs      []Input `yaml:"inputs"`
	// Prices is the monthly price of one resource of each type.
	Prices map[string]float64 `yaml:"prices"`
	// Irreversible lists resource types whose destruction loses data.
	Irreversible []string `yaml:"irreversible"`
	// OrgScoped lists resource types that act on the whole organization (policy,
	// IAM): any change to one is at least risk 2 and policy-gated.
	OrgScoped []string `yaml:"org_scoped"`
	// OrgPolicy lists the org-scoped types that are organization policies: changing
	// one changes what the whole organization may do (risk 3).
	OrgPolicy []string `yaml:"org_policy"`
	// Rollback tells people how (and whether) a change to this template rolls back.
	Rollback string `yaml:"rollback"`
}

// Input is one variable a person fills in when using a template.
type Input struct {
	Name string `yaml:"name"`
	// Label is the input as a person reads it ("Storage (GiB)"), shown beside the
	// variable name; empty: the name alone.
	Label string `yaml:"label"`
	Type  string `yaml:"type"`
	// Integer: a number input takes whole numbers only (a count, days, GiB).
	Integer  bool `yaml:"integer"`
	Required bool `yaml:"required"`
	// Default fills the input when a person leaves it empty; see Template.
	Default any `yaml:"default"`
	// Enum holds the allowed values as strings; for number inputs they are
	// compared numerically ("10" allows 10.0).
	Enum []string `yaml:"enum"`
	Min  *float64 `yaml:"min"`
	Max  *float64 `yaml:"max"`
	// Pattern is a Go regular expression the whole value must match (it is
	// anchored like an HTML pattern attribute, so "[a-z]+" rejects "ab1").
	Pattern    string `yaml:"pattern"`
	Help       string `yaml:"help"`
	Sensitive  bool   `yaml:"sensitive"`
	Divergence string `yaml:"divergence"`
}

var (
	templateNameRe = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	inputNameRe    = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	versionRe      = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	resourceTypeRe = regexp.MustCompile(`^[a-z][a-z0-9]*_[a-z0-9_]+$`) // a provider name may hold digits: s3_bucket
	// yaml.v3 reports unknown keys as "line N: field X not found in type T".
	unknownFieldRe = regexp.MustCompile(`^line ([0-9]+): field (\S+) not found in type \S+$`)
)

// parseManifest decodes template.yaml strictly: a misspelt key would otherwise be
// silently ignored and, say, a "requried: true" input would become optional.
func parseManifest(data []byte) (Template, error) {
	var t Template
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		if errors.Is(err, io.EOF) {
			return Template{}, errors.New("the file is empty")
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, 0, len(te.Errors))
			for _, e := range te.Errors {
				if m := unknownFieldRe.FindStringSubmatch(e); m != nil {
					e = fmt.Sprintf("line %s: unknown key %q", m[1], m[2])
				}
				msgs = append(msgs, e)
			}
			return Template{}, errors.New(strings.Join(msgs, "; "))
		}
		return Template{}, err
	}
	return t, nil
}

// check validates the manifest of the template in directory dir, normalizes
// defaults and divergences in place, and returns every problem found.
func (t *Template) check(dir string) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	switch {
	case t.Name == "":
		add("name is required")
	case t.Name != dir:
		add("name %q does not match its directory %q", t.Name, dir)
	case !templateNameRe.MatchString(t.Name):
		add("name %q must match %s", t.Name, templateNameRe)
	}
	if !versionRe.MatchString(t.Version) {
		add("version %q is not a semantic version like 1.2.3", t.Version)
	}
	if strings.TrimSpace(t.Title) == "" {
		add("title is required")
	}
	if strings.TrimSpace(t.Owner) == "" {
		add("owner is required")
	}
	seen := map[string]bool{}
	for i := range t.Inputs {
		in := &t.Inputs[i]
		field := fmt.Sprintf("inputs[%d]", i)
		if in.Name != "" {
			field = "inputs." + in.Name
		}
		if !inputNameRe.MatchString(in.Name) {
			add("%s: name %q must match %s", field, in.Name, inputNameRe)
		} else if why := reservedInput(in.Name); why != "" {
			add("%s: %s", field, why)
		} else if seen[in.Name] {
			add("%s: the name is used twice", field)
		}
		seen[in.Name] = true
		for _, p := range in.check() {
			add("%s: %s", field, p)
		}
	}
	for _, rt := range t.Irreversible {
		if !resourceTypeRe.MatchString(rt) {
			add("irreversible: %q is not a resource type", rt)
		}
	}
	for _, rt := range t.OrgScoped {
		if !resourceTypeRe.MatchString(rt) {
			add("org_scoped: %q is not a resource type", rt)
		}
	}
	for _, rt := range t.OrgPolicy {
		if !slices.Contains(t.OrgScoped, rt) {
			add("org_policy: %q must also be listed in org_scoped", rt)
		}
	}
	for rt, price := range t.Prices {
		if !resourceTypeRe.MatchString(rt) {
			add("prices: %q is not a resource type", rt)
		}
		if math.IsNaN(price) || math.IsInf(price, 0) {
			add("prices: %s costs %v, not a finite number", rt, price)
		} else if price < 0 {
			add("prices: %s costs %v, less than zero", rt, price)
		}
	}
	return problems
}

// check validates one input and normalizes it.
func (in *Input) check() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	switch in.Divergence {
	case "":
		in.Divergence = DivergenceFixed
	case DivergenceFixed, DivergenceCapacity, DivergenceCount, DivergenceRetention, DivergenceScaling:
	default:
		add("divergence %q is not one of fixed, capacity, count, retention, scaling", in.Divergence)
	}
	switch in.Type {
	case TypeString, TypeNumber, TypeBool:
	default:
		add("type %q is not one of string, number, bool", in.Type)
		return problems // nothing else can be judged without a type
	}
	if in.Pattern != "" {
		if in.Type != TypeString {
			add("pattern applies only to string inputs")
		} else if _, err := regexp.Compile(in.Pattern); err != nil {
			add("pattern does not compile: %v", err)
		} else if _, err := compilePattern(in.Pattern); err != nil {
			// The form anchors the pattern (compilePattern): `a\Q` compiles alone, not anchored.
			add("pattern cannot be anchored: %v", err)
		}
	}
	if len(in.Label) > MaxLabel || strings.ContainsAny(in.Label, "\r\n") {
		add("label must be one line of at most %d characters", MaxLabel)
	}
	if in.Integer {
		if in.Type != TypeNumber {
			add("integer applies only to number inputs")
		}
		for _, b := range []*float64{in.Min, in.Max} {
			if b != nil && *b != math.Trunc(*b) {
				add("min and max of an integer input must be whole numbers")
				break
			}
		}
	}
	for _, b := range []*float64{in.Min, in.Max} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			add("min and max must be finite numbers")
			break
		}
	}
	if (in.Min != nil || in.Max != nil) && in.Type != TypeNumber {
		add("min and max apply only to number inputs")
	}
	if in.Min != nil && in.Max != nil && *in.Min > *in.Max {
		add("min %s is greater than max %s", formatNumber(*in.Min), formatNumber(*in.Max))
	}
	if len(in.Enum) > 0 {
		if in.Type == TypeBool {
			add("enum does not apply to bool inputs")
		}
		if in.Type == TypeNumber {
			for _, e := range in.Enum {
				if f, err := parseNumber(e); err != nil {
					add("enum value %q is not a number", e)
				} else if in.Integer && f != math.Trunc(f) {
					add("enum value %q of an integer input is not a whole number", e)
				}
			}
		}
	}
	if len(problems) > 0 || in.Default == nil {
		return problems
	}
	def, err := normalizeDefault(in.Type, in.Default)
	if err != nil {
		add("default %v: %v", in.Default, err)
		return problems
	}
	if f, ok := def.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		// NaN passes every range check below and panics in Generate (big.Float); an
		// infinity is no number a person can type (ValidateInputs reads decimals only).
		add("default %v is not a finite number", def)
		return problems
	}
	in.Default = def
	if f, ok := def.(float64); ok && in.Integer && f != math.Trunc(f) {
		add("default %v of an integer input is not a whole number", def)
		return problems
	}
	switch kind, msg := in.violation(def); kind {
	case "":
	case violationEnum:
		add("default %v is not one of the enum values %s", def, strings.Join(in.Enum, ", "))
	case violationPattern:
		add("default %q does not match pattern %q", def, in.Pattern)
	default:
		add("default %v is not allowed: %s", def, msg)
	}
	return problems
}

// normalizeDefault turns a YAML-decoded default into the Go type ValidateInputs
// produces for the same input, so a default and a typed-in value are alike.
func normalizeDefault(typ string, v any) (any, error) {
	switch typ {
	case TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, errors.New("is not a string; quote it")
	case TypeNumber:
		switch n := v.(type) {
		case int:
			return float64(n), nil
		case int64:
			return float64(n), nil
		case uint64:
			return float64(n), nil
		case float64:
			return n, nil
		}
		return nil, errors.New("is not a number")
	case TypeBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, errors.New("is not true or false")
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
