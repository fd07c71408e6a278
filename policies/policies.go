// Package policies is Gantry's policy engine (DESIGN §7): the built-in Rego rules
// (rules/*.rego, embedded) plus an organization's own policies, compiled once into a
// Bundle and evaluated against a `tofu show -json` plan with the run's context.
//
// Every rule is one Rego module, `package gantry.rules.<id>` (built-in) or
// `package gantry.org.<name>` (organization-managed), that defines a constant
// `metadata` object (id, title, description, enforcement) and a set `deny` of
// human-readable messages. A rule passes when its deny set is empty. What a failure
// does to a run depends on the rule's enforcement, which an environment may change:
// see docs/policy-input.md.
//
// The package is a leaf: it imports no application package.
package policies

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Enforcement is what a failed rule does to a run.
type Enforcement string

// The enforcement levels.
const (
	// Advisory: the failure is shown on the run, nothing more.
	Advisory Enforcement = "advisory"
	// SoftMandatory: the run is blocked until an admin overrides the failure with a reason.
	SoftMandatory Enforcement = "soft_mandatory"
	// HardMandatory: the run is blocked for good.
	HardMandatory Enforcement = "hard_mandatory"
)

// Valid reports whether e is one of the three levels.
func (e Enforcement) Valid() bool {
	switch e {
	case Advisory, SoftMandatory, HardMandatory:
		return true
	}
	return false
}

// Origins of a rule.
const (
	OriginBuiltin = "builtin"
	OriginOrg     = "org"
)

// Rule describes one rule of a bundle.
type Rule struct {
	ID          string
	Title       string
	Description string
	Enforcement Enforcement // the rule's default
	// Version is the sha256 (hex) of the rule's Rego module source: an override binds to it.
	Version string
	Origin  string // OriginBuiltin or OriginOrg
}

// OrgPolicy is an organization-managed policy as stored (uploaded Rego, versioned).
type OrgPolicy struct {
	Name    string
	Version int
	Rego    string
	Tests   string
}

//go:embed rules/*.rego
var builtinFS embed.FS

// Package paths of the two kinds of rules.
const (
	builtinPackage = "gantry.rules"
	orgPackage     = "gantry.org"
)

// module is one parsed rule module with what its metadata says.
type module struct {
	path   string // "rules/<id>.rego" or "org/<name>.rego"
	source string
	parsed *ast.Module
	rule   Rule
	deny   ast.Ref // data.gantry.rules.<id>.deny
}

// Bundle is the built-in rules plus an organization's policies, compiled once, with
// the query that evaluates them all prepared. It is safe for concurrent use.
type Bundle struct {
	digest string
	rules  []Rule   // sorted by ID
	denies []string // query variable per rule, parallel to rules
	query  rego.PreparedEvalQuery

	// perRule holds one prepared query per rule, made on first need: when the
	// combined query fails at run time (a conflict in one rule), each rule is
	// evaluated alone so one broken rule fails closed without hiding the others.
	perRuleOnce sync.Once
	perRule     []rego.PreparedEvalQuery
	perRuleErr  error
	compiler    *ast.Compiler
	refs        []ast.Ref
}

var (
	builtinOnce   sync.Once
	builtinBundle *Bundle
	builtinErr    error
	builtinMods   []*module
)

// Builtin returns the bundle of the built-in rules, compiled on first use.
func Builtin() (*Bundle, error) {
	builtinOnce.Do(func() {
		builtinMods, builtinErr = loadBuiltin()
		if builtinErr != nil {
			return
		}
		builtinBundle, builtinErr = compile(builtinMods)
	})
	return builtinBundle, builtinErr
}

// loadBuiltin parses the embedded rule modules (not their tests).
func loadBuiltin() ([]*module, error) {
	entries, err := fs.ReadDir(builtinFS, "rules")
	if err != nil {
		return nil, fmt.Errorf("policies: reading built-in rules: %w", err)
	}
	var mods []*module
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, "_test.rego") {
			continue
		}
		src, err := fs.ReadFile(builtinFS, path.Join("rules", name))
		if err != nil {
			return nil, fmt.Errorf("policies: reading %s: %w", name, err)
		}
		id := strings.TrimSuffix(name, ".rego")
		m, errs := parseRule("rules/"+name, string(src), builtinPackage+"."+id, id, OriginBuiltin)
		if len(errs) > 0 {
			return nil, fmt.Errorf("policies: built-in rule %s: %s", id, strings.Join(errs, "; "))
		}
		mods = append(mods, m)
	}
	return mods, nil
}

// bundleCache keeps the bundles of the organizations' policy sets by digest, so a
// run does not recompile what the previous run compiled. Small and bounded: a
// bundle is a few hundred KiB and there are few distinct policy sets.
var bundleCache = struct {
	sync.Mutex
	m     map[string]*Bundle
	order []string
}{m: map[string]*Bundle{}}

const bundleCacheSize = 64

// NewBundle returns the bundle of the built-in rules plus the given organization
// policies (each as validated on upload by ValidateOrgPolicy). Bundles are cached by
// digest.
func NewBundle(org []OrgPolicy) (*Bundle, error) {
	base, err := Builtin()
	if err != nil {
		return nil, err
	}
	if len(org) == 0 {
		return base, nil
	}
	mods := append([]*module(nil), builtinMods...)
	seen := map[string]bool{}
	for _, p := range org {
		if !orgNameRe.MatchString(p.Name) {
			return nil, fmt.Errorf("policies: org policy %q (version %d): invalid name", p.Name, p.Version)
		}
		if seen[p.Name] {
			return nil, fmt.Errorf("policies: org policy %q given twice", p.Name)
		}
		seen[p.Name] = true
		mods = append(mods, &module{path: "org/" + p.Name + ".rego", source: p.Rego})
	}
	digest := digestOf(mods)

	bundleCache.Lock()
	b, ok := bundleCache.m[digest]
	bundleCache.Unlock()
	if ok {
		return b, nil
	}

	for i, m := range mods {
		if m.parsed != nil {
			continue // built-in, parsed already
		}
		name := strings.TrimSuffix(strings.TrimPrefix(m.path, "org/"), ".rego")
		pm, errs := parseRule(m.path, m.source, orgPackage+"."+name, "org."+name, OriginOrg)
		if len(errs) > 0 {
			return nil, fmt.Errorf("policies: org policy %s: %s", name, strings.Join(errs, "; "))
		}
		mods[i] = pm
	}
	b, err = compile(mods)
	if err != nil {
		return nil, err
	}

	bundleCache.Lock()
	defer bundleCache.Unlock()
	if cached, ok := bundleCache.m[digest]; ok {
		return cached, nil // compiled concurrently; keep one
	}
	if len(bundleCache.order) >= bundleCacheSize {
		delete(bundleCache.m, bundleCache.order[0])
		bundleCache.order = bundleCache.order[1:]
	}
	bundleCache.m[digest] = b
	bundleCache.order = append(bundleCache.order, digest)
	return b, nil
}

// Digest is the sha256 (hex) over the bundle's modules, sorted by path: each as
// path, NUL, source length, NUL, source. It changes when any rule changes.
func (b *Bundle) Digest() string { return b.digest }

// Rules lists the bundle's rules, sorted by ID.
func (b *Bundle) Rules() []Rule { return append([]Rule(nil), b.rules...) }

func digestOf(mods []*module) string {
	sorted := append([]*module(nil), mods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].path < sorted[j].path })
	h := sha256.New()
	for _, m := range sorted {
		fmt.Fprintf(h, "%s\x00%d\x00", m.path, len(m.source))
		h.Write([]byte(m.source))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// capabilities are OPA's built-in functions minus the ones that reach outside
// (http.send, net.lookup_ip_addr, opa.runtime) or give different answers on
// different calls (time.now_ns, rand.intn, uuid.rfc4122, ...): policy results
// must be a function of the input, or the result digest an override binds to
// would change between two evaluations of the same plan.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	kept := caps.Builtins[:0]
	for _, b := range caps.Builtins {
		if b.Nondeterministic || unsafeBuiltins[b.Name] {
			continue
		}
		kept = append(kept, b)
	}
	caps.Builtins = kept
	return caps
})

var unsafeBuiltins = map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true}

func parserOptions() ast.ParserOptions {
	return ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: capabilities()}
}

func newCompiler() *ast.Compiler {
	return ast.NewCompiler().WithCapabilities(capabilities()).WithDefaultRegoVersion(ast.RegoV1).WithEnablePrintStatements(false)
}

// parseRule parses one rule module and checks its shape: the package, a constant
// metadata object naming the rule, and a deny set. It returns the problems found.
func parseRule(file, src, pkg, id, origin string) (*module, []string) {
	parsed, err := ast.ParseModuleWithOpts(file, src, parserOptions())
	if err != nil {
		return nil, astErrors(err)
	}
	m := &module{path: file, source: src, parsed: parsed}
	var problems []string
	if got := strings.TrimPrefix(parsed.Package.Path.String(), "data."); got != pkg {
		problems = append(problems, fmt.Sprintf("the package is %s; it must be %s", got, pkg))
		return m, problems
	}
	m.deny = parsed.Package.Path.Append(ast.StringTerm("deny"))
	rule, metaProblems := ruleMetadata(parsed, id)
	problems = append(problems, metaProblems...)
	rule.Version = sha256Hex(src)
	rule.Origin = origin
	m.rule = rule
	if p := checkDeny(parsed); p != "" {
		problems = append(problems, p)
	}
	return m, problems
}

// ruleMetadata reads `metadata := {...}`: a constant object with the rule's id,
// title, description and default enforcement.
func ruleMetadata(mod *ast.Module, id string) (Rule, []string) {
	const shape = `define metadata := {"id": ..., "title": ..., "description": ..., "enforcement": ...} (a constant object)`
	var defs []*ast.Rule
	for _, r := range mod.Rules {
		if isRuleNamed(r, "metadata") {
			defs = append(defs, r)
		}
	}
	if len(defs) == 0 {
		return Rule{}, []string{"the rule has no metadata: " + shape}
	}
	if len(defs) > 1 {
		return Rule{}, []string{"the rule defines metadata more than once: " + shape}
	}
	r := defs[0]
	if r.Head.Value == nil || len(r.Head.Args) > 0 || !isTrueBody(r.Body) || !r.Head.Value.IsGround() {
		return Rule{}, []string{fmt.Sprintf("line %d: metadata is not a constant object: %s", r.Location.Row, shape)}
	}
	v, err := ast.JSON(r.Head.Value.Value)
	if err != nil {
		return Rule{}, []string{fmt.Sprintf("line %d: metadata is not a constant object (%v): %s", r.Location.Row, err, shape)}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Rule{}, []string{fmt.Sprintf("line %d: metadata is not an object: %s", r.Location.Row, shape)}
	}
	str := func(k string) (string, bool) { s, ok := obj[k].(string); return s, ok }
	var problems []string
	rule := Rule{ID: id}
	if got, _ := str("id"); got != id {
		problems = append(problems, fmt.Sprintf("line %d: metadata.id is %q; it must be %q", r.Location.Row, got, id))
	}
	if t, ok := str("title"); !ok || strings.TrimSpace(t) == "" {
		problems = append(problems, fmt.Sprintf("line %d: metadata.title is missing", r.Location.Row))
	} else {
		rule.Title = t
	}
	if d, ok := obj["description"]; ok {
		if s, ok := d.(string); ok {
			rule.Description = s
		} else {
			problems = append(problems, fmt.Sprintf("line %d: metadata.description must be a string", r.Location.Row))
		}
	}
	e, _ := str("enforcement")
	if !Enforcement(e).Valid() {
		problems = append(problems, fmt.Sprintf("line %d: metadata.enforcement is %q; it must be advisory, soft_mandatory or hard_mandatory", r.Location.Row, e))
	}
	rule.Enforcement = Enforcement(e)
	return rule, problems
}

// checkDeny requires deny to be a set of messages: `deny contains msg if { ... }`.
func checkDeny(mod *ast.Module) string {
	found := false
	for _, r := range mod.Rules {
		if !isRuleNamed(r, "deny") {
			continue
		}
		found = true
		if r.Head.RuleKind() != ast.MultiValue || len(r.Head.Args) > 0 {
			return fmt.Sprintf("line %d: deny must be a set of messages: deny contains msg if { ... }", r.Location.Row)
		}
	}
	if !found {
		return "the rule has no deny set: define deny contains msg if { ... }"
	}
	return ""
}

func isRuleNamed(r *ast.Rule, name string) bool {
	ref := r.Head.Ref()
	return len(ref) >= 1 && ref[0].Value.Compare(ast.Var(name)) == 0
}

func isTrueBody(body ast.Body) bool {
	return len(body) == 1 && body[0].IsGround() && body[0].Equal(ast.NewExpr(ast.BooleanTerm(true)))
}

// astErrors formats parse and compile errors one per line, with their position.
func astErrors(err error) []string {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return []string{err.Error()}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := e.Message
		if e.Location != nil {
			msg = fmt.Sprintf("line %d: %s", e.Location.Row, msg)
		}
		out = append(out, msg)
	}
	return out
}

// compile compiles the modules and prepares the query that evaluates every rule's
// deny set at once.
func compile(mods []*module) (*Bundle, error) {
	parsed := make(map[string]*ast.Module, len(mods))
	for _, m := range mods {
		parsed[m.path] = m.parsed
	}
	parsed = copyModules(parsed)
	c := newCompiler()
	if c.Compile(parsed); c.Failed() {
		return nil, fmt.Errorf("policies: compiling: %s", strings.Join(astErrors(c.Errors), "; "))
	}
	sorted := append([]*module(nil), mods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].rule.ID < sorted[j].rule.ID })
	b := &Bundle{digest: digestOf(mods), compiler: c}
	body := make(ast.Body, 0, len(sorted))
	for i, m := range sorted {
		v := fmt.Sprintf("deny%d", i)
		b.rules = append(b.rules, m.rule)
		b.denies = append(b.denies, v)
		b.refs = append(b.refs, m.deny)
		body = append(body, ast.Equality.Expr(ast.VarTerm(v), ast.NewTerm(m.deny)))
	}
	q, err := rego.New(rego.Compiler(c), rego.ParsedQuery(body)).PrepareForEval(context.Background())
	if err != nil {
		return nil, fmt.Errorf("policies: preparing the query: %w", err)
	}
	b.query = q
	return b, nil
}

// prepared returns one prepared query per rule (see Bundle.perRule).
func (b *Bundle) prepared() ([]rego.PreparedEvalQuery, error) {
	b.perRuleOnce.Do(func() {
		b.perRule = make([]rego.PreparedEvalQuery, len(b.refs))
		for i, ref := range b.refs {
			body := ast.NewBody(ast.Equality.Expr(ast.VarTerm("deny"), ast.NewTerm(ref)))
			q, err := rego.New(rego.Compiler(b.compiler), rego.ParsedQuery(body)).PrepareForEval(context.Background())
			if err != nil {
				b.perRuleErr = fmt.Errorf("policies: preparing the query of %s: %w", b.rules[i].ID, err)
				return
			}
			b.perRule[i] = q
		}
	})
	return b.perRule, b.perRuleErr
}
