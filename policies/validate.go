package policies

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// FieldError is a problem with one field of an uploaded policy: "name", "rego" or "tests".
type FieldError struct {
	Field   string
	Message string
}

// ValidationError lists the problems of an uploaded policy.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "policies: invalid policy: " + strings.Join(parts, "; ")
}

func (e *ValidationError) add(field, format string, args ...any) {
	msg := explainRemoved(fmt.Sprintf(format, args...))
	if r, size := utf8.DecodeRuneInString(msg); r != utf8.RuneError {
		msg = string(unicode.ToUpper(r)) + msg[size:]
	}
	e.Fields = append(e.Fields, FieldError{Field: field, Message: msg})
}

// explainRemoved adds why to the compiler's "undefined function" for the built-in
// functions policies may not call (see capabilities).
func explainRemoved(msg string) string {
	_, name, ok := strings.Cut(msg, "undefined function ")
	if ok && removedBuiltins()[strings.TrimSpace(name)] {
		return msg + " (policies may not call it: it reaches outside Gantry or gives a different answer on each call)"
	}
	return msg
}

// removedBuiltins are OPA's built-in functions that capabilities leaves out.
var removedBuiltins = sync.OnceValue(func() map[string]bool {
	kept := map[string]bool{}
	for _, b := range capabilities().Builtins {
		kept[b.Name] = true
	}
	removed := map[string]bool{}
	for _, b := range ast.CapabilitiesForThisVersion().Builtins {
		if !kept[b.Name] {
			removed[b.Name] = true
		}
	}
	return removed
})

func (e *ValidationError) err() error {
	if len(e.Fields) == 0 {
		return nil
	}
	return e
}

var orgNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{2,40}$`)

// MaxSourceSize bounds an uploaded policy's Rego and its tests, each.
const MaxSourceSize = 256 << 10

// testTimeout bounds each test of an uploaded policy.
const testTimeout = 5 * time.Second

// ValidateOrgPolicy checks an uploaded organization policy: its name, its module
// (package gantry.org.<name>, a constant metadata object whose id is org.<name>, a
// deny set; compiled together with the built-in rules) and its tests (package
// gantry.org.<name>_test or gantry.org.<name>, at least one test_ rule, all
// passing). It returns the rule the policy defines, or a *ValidationError naming the
// field of each problem.
func ValidateOrgPolicy(ctx context.Context, name, regoSrc, tests string) (Rule, error) {
	if _, err := Builtin(); err != nil {
		return Rule{}, err
	}
	v := &ValidationError{}
	if !orgNameRe.MatchString(name) {
		v.add("name", "Use 3 to 41 lower-case letters, digits and underscores, starting with a letter.")
	}
	if strings.TrimSpace(regoSrc) == "" {
		v.add("rego", "The policy is empty.")
	} else if len(regoSrc) > MaxSourceSize {
		v.add("rego", "The policy is larger than %d KiB.", MaxSourceSize>>10)
	}
	if strings.TrimSpace(tests) == "" {
		v.add("tests", "Tests are required: at least one test_ rule that passes.")
	} else if len(tests) > MaxSourceSize {
		v.add("tests", "The tests are larger than %d KiB.", MaxSourceSize>>10)
	}
	if err := v.err(); err != nil {
		return Rule{}, err
	}

	path := "org/" + name + ".rego"
	pkg := orgPackage + "." + name
	m, problems := parseRule(path, regoSrc, pkg, "org."+name, OriginOrg)
	for _, p := range problems {
		v.add("rego", "%s", p)
	}
	if err := v.err(); err != nil {
		return Rule{}, err
	}
	mods := map[string]*ast.Module{path: m.parsed}
	for _, b := range builtinMods {
		mods[b.path] = b.parsed
	}
	c := newCompiler()
	if c.Compile(copyModules(mods)); c.Failed() {
		for _, p := range astErrors(c.Errors) {
			v.add("rego", "%s", p)
		}
		return Rule{}, v
	}

	testPath := "org/" + name + "_test.rego"
	tm, err := ast.ParseModuleWithOpts(testPath, tests, parserOptions())
	if err != nil {
		for _, p := range astErrors(err) {
			v.add("tests", "%s", p)
		}
		return Rule{}, v
	}
	if got := strings.TrimPrefix(tm.Package.Path.String(), "data."); got != pkg+"_test" && got != pkg {
		v.add("tests", "The package is %s; it must be %s_test (or %s).", got, pkg, pkg)
		return Rule{}, v
	}
	var names []string
	for _, r := range tm.Rules {
		ref := r.Head.Ref()
		if n, ok := ref[0].Value.(ast.Var); ok && len(ref) == 1 && strings.HasPrefix(string(n), "test_") {
			names = append(names, string(n))
		}
	}
	if len(names) == 0 {
		v.add("tests", "There are no tests: define at least one rule named test_... that passes.")
		return Rule{}, v
	}
	mods[testPath] = tm
	failed, err := runTests(ctx, copyModules(mods), tm.Package.Path)
	if err != nil {
		var astErrs ast.Errors
		if !errors.As(err, &astErrs) {
			return Rule{}, fmt.Errorf("policies: running the tests of %s: %w", name, err)
		}
		for _, p := range astErrors(err) {
			v.add("tests", "%s", p)
		}
		return Rule{}, v
	}
	if len(failed) > 0 {
		v.add("tests", "Failing tests: %s.", strings.Join(failed, ", "))
		return Rule{}, v
	}
	return m.rule, nil
}

// runTests runs the tests of the package pkg and returns the names of those that
// failed (with their error, if any), sorted.
func runTests(ctx context.Context, mods map[string]*ast.Module, pkg ast.Ref) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := tester.NewRunner().
		SetCompiler(newCompiler()).
		SetTimeout(testTimeout).
		SetPrefixMatchers(pkg).
		Run(ctx, mods)
	if err != nil {
		return nil, err
	}
	var failed []string
	for r := range ch {
		switch {
		case r.Skip:
		case r.Error != nil:
			failed = append(failed, fmt.Sprintf("%s (%v)", r.Name, r.Error))
		case r.Fail:
			failed = append(failed, r.Name)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sort.Strings(failed)
	return failed, nil
}

// copyModules copies parsed modules: the compiler rewrites the modules it is given,
// and the built-in ones are shared.
func copyModules(mods map[string]*ast.Module) map[string]*ast.Module {
	out := make(map[string]*ast.Module, len(mods))
	for k, m := range mods {
		out[k] = m.Copy()
	}
	return out
}
