package policies

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

//go:embed rules/*.rego
var builtinFS embed.FS

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
