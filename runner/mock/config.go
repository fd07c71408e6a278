package mock

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"gantry/models/bundle"
)

// config is a config bundle as the mock understands it: the generated root module
// (root variables, module calls with literal inputs or root variables, outputs) and
// each called template module.
type config struct {
	modules         []*moduleConfig // sorted by call name
	outputs         []*outputConfig // the root module's outputs, sorted by name
	providerVersion string          // required_providers.sandbox.version, for the configuration JSON
	// variables are the root module's `variable` blocks (the sensitive inputs Gantry
	// passes as TF_VAR_<name>); vars their values, converted to their types and marked
	// when sensitive; given the texts they were set from, which a plan file keeps for
	// its apply, as tofu's saved plan keeps the variables' values.
	variables map[string]*variableConfig
	vars      map[string]cty.Value
	given     map[string]string
}

// module finds a module call by name.
func (c *config) module(name string) *moduleConfig {
	for _, m := range c.modules {
		if m.name == name {
			return m
		}
	}
	return nil
}

// moduleConfig is one `module` block of the root module and the module it calls.
type moduleConfig struct {
	name       string                     // the call name: "postgres"
	source     string                     // as written: "./modules/postgres"
	dir        string                     // in the bundle: "modules/postgres"
	inputExprs map[string]hcl.Expression  // the call's arguments, for the configuration JSON
	variables  map[string]*variableConfig // declared `variable` blocks
	vars       map[string]cty.Value       // var.*: inputs, else defaults, converted to their types
	locals     map[string]cty.Value       // local.*
	resources  map[string]*resourceConfig // by "type.name"
	order      []*resourceConfig          // dependencies first
	outputs    []*outputConfig            // sorted by name
}

// address is the module's address in resource addresses: "module.postgres".
func (m *moduleConfig) address() string { return "module." + m.name }

type variableConfig struct {
	name        string
	typ         cty.Type
	typeString  string
	defaults    *typeexpr.Defaults
	def         cty.Value // cty.NilVal when the variable has no default
	description string
	sensitive   bool
}

// resourceConfig is one `resource` block of a template module.
type resourceConfig struct {
	typ, name     string
	schema        resourceSchema
	attrs         map[string]*hclsyntax.Attribute // configured arguments (schema attributes only)
	count         hcl.Expression                  // nil without count
	cbd           bool                            // lifecycle.create_before_destroy
	preventDelete bool                            // lifecycle.prevent_destroy
	ignore        map[string]bool                 // lifecycle.ignore_changes
	dependsOn     []string                        // explicit depends_on, as written
	deps          []string                        // keys of the resources this one refers to (direct)
	rng           hcl.Range
	// preconditions are lifecycle.precondition blocks, checked before each instance is
	// planned or applied.
	preconditions []precondition
}

// precondition is one lifecycle.precondition block.
type precondition struct {
	condition, message hcl.Expression
	rng                hcl.Range
}

func (r *resourceConfig) key() string { return r.typ + "." + r.name }

type outputConfig struct {
	name        string
	expr        hcl.Expression
	sensitive   bool
	description string
}

// loadConfig decodes and parses a config bundle; given are the values of its root
// variables as TF_VAR_<name> would set them.
func loadConfig(tarball []byte, given map[string]string) (*config, error) {
	b, err := bundle.FromTar(tarball)
	if err != nil {
		return nil, fmt.Errorf("reading the config bundle: %w", err)
	}
	root, err := parseFiles(b.Files, "")
	if err != nil {
		return nil, err
	}
	if len(root) == 0 {
		return nil, fmt.Errorf("the config bundle has no root module (main.tf)")
	}
	c := &config{variables: map[string]*variableConfig{}}
	calls, err := c.readRoot(root)
	if err != nil {
		return nil, err
	}
	if err := c.resolveVariables(given); err != nil {
		return nil, err
	}
	for _, call := range calls {
		m, err := loadModule(b.Files, call, c.vars)
		if err != nil {
			return nil, err
		}
		c.modules = append(c.modules, m)
	}
	if err := c.checkRootOutputs(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseFiles parses the .tf files directly inside dir ("" for the root), in name order.
func parseFiles(files map[string][]byte, dir string) ([]*hclsyntax.Body, error) {
	var names []string
	for name := range files {
		if path.Dir(name) == cleanDir(dir) && strings.HasSuffix(name, ".tf") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	bodies := make([]*hclsyntax.Body, 0, len(names))
	for _, name := range names {
		f, diags := hclsyntax.ParseConfig(files[name], name, hcl.InitialPos)
		if diags.HasErrors() {
			return nil, diagError(diags)
		}
		body := f.Body.(*hclsyntax.Body)
		if err := checkFunctions(body); err != nil {
			return nil, err
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

func cleanDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// checkFunctions refuses calls to functions the mock does not evaluate, before
// anything is evaluated, so the error names the file and line of the call.
func checkFunctions(body *hclsyntax.Body) error {
	var first error
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		call, ok := n.(*hclsyntax.FunctionCallExpr)
		if !ok || first != nil {
			return nil
		}
		if err := checkFunctionName(call.Name); err != nil {
			first = at(call.NameRange, "%v", err)
		}
		return nil
	})
	return first
}

// readRoot reads the generated root module: terraform, provider, variable, module and
// output blocks.
func (c *config) readRoot(bodies []*hclsyntax.Body) ([]*moduleConfig, error) {
	var calls []*moduleConfig
	for _, body := range bodies {
		if err := noAttributes(body); err != nil {
			return nil, err
		}
		for _, blk := range body.Blocks {
			switch blk.Type {
			case "terraform":
				c.providerVersion = providerVersion(blk.Body)
			case "provider":
				// The mock talks to no provider; its configuration is irrelevant.
			case "variable":
				v, err := readVariable(blk)
				if err != nil {
					return nil, err
				}
				if _, dup := c.variables[v.name]; dup {
					return nil, at(blk.DefRange(), "duplicate variable %q", v.name)
				}
				c.variables[v.name] = v
			case "module":
				call, err := readModuleCall(blk)
				if err != nil {
					return nil, err
				}
				for _, other := range calls {
					if other.name == call.name {
						return nil, at(blk.DefRange(), "duplicate module call %q", call.name)
					}
				}
				calls = append(calls, call)
			case "output":
				o, err := readOutput(blk)
				if err != nil {
					return nil, err
				}
				c.outputs = append(c.outputs, o)
			default:
				return nil, at(blk.DefRange(), "%q blocks in the root module are not supported by the mock runner", blk.Type)
			}
		}
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].name < calls[j].name })
	sort.Slice(c.outputs, func(i, j int) bool { return c.outputs[i].name < c.outputs[j].name })
	return calls, nil
}

// resolveVariables sets the root variables as tofu does from TF_VAR_<name>: a
// variable of a primitive type takes the text as a string, converted to its type; any
// other parses it as an HCL expression. A variable given no value takes its default;
// one without a default is an error. Values given for undeclared variables are
// ignored, as tofu ignores such environment variables.
func (c *config) resolveVariables(given map[string]string) error {
	c.vars, c.given = map[string]cty.Value{}, map[string]string{}
	for _, name := range sortedKeys(c.variables) {
		decl := c.variables[name]
		raw, ok := given[name]
		var v cty.Value
		switch {
		case ok && decl.typ.IsPrimitiveType():
			v = cty.StringVal(raw)
		case ok:
			expr, diags := hclsyntax.ParseExpression([]byte(raw), "TF_VAR_"+name, hcl.InitialPos)
			if diags.HasErrors() {
				return fmt.Errorf("invalid value for variable %q (TF_VAR_%s): %s", name, name, diagSummary(diags))
			}
			if v, diags = expr.Value(nil); diags.HasErrors() {
				return fmt.Errorf("invalid value for variable %q (TF_VAR_%s): %s", name, name, diagSummary(diags))
			}
		case decl.def != cty.NilVal:
			v = decl.def
		default:
			return fmt.Errorf("no value for required variable: the root module input variable %q is not set, and has no default value (set TF_VAR_%s)", name, name)
		}
		if ok {
			c.given[name] = raw
		}
		if decl.defaults != nil {
			v = decl.defaults.Apply(v)
		}
		cv, err := convert.Convert(v, decl.typ)
		if err != nil {
			// The value is not repeated: it may be a secret.
			return fmt.Errorf("invalid value for variable %q: %s is required", name, decl.typ.FriendlyNameForConstraint())
		}
		if decl.sensitive {
			cv = cv.Mark(sensitiveMark)
		}
		c.vars[name] = cv
	}
	return nil
}

// providerVersion reads required_providers { sandbox = { version = "..." } }.
func providerVersion(body *hclsyntax.Body) string {
	for _, blk := range body.Blocks {
		if blk.Type != "required_providers" {
			continue
		}
		attr, ok := blk.Body.Attributes["sandbox"]
		if !ok {
			continue
		}
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() || !v.Type().IsObjectType() || !v.Type().HasAttribute("version") {
			continue
		}
		if ver := v.GetAttr("version"); ver.Type() == cty.String && ver.IsKnown() && !ver.IsNull() {
			return ver.AsString()
		}
	}
	return ""
}

// readModuleCall reads a module block: its source and its inputs (literals, or root
// variables).
func readModuleCall(blk *hclsyntax.Block) (*moduleConfig, error) {
	if len(blk.Labels) != 1 {
		return nil, at(blk.DefRange(), "a module block needs exactly one label, its name")
	}
	m := &moduleConfig{name: blk.Labels[0], inputExprs: map[string]hcl.Expression{}}
	if len(blk.Body.Blocks) > 0 {
		return nil, at(blk.Body.Blocks[0].DefRange(), "unexpected %q block in module %q", blk.Body.Blocks[0].Type, m.name)
	}
	for name, attr := range blk.Body.Attributes {
		switch name {
		case "source":
			v, diags := attr.Expr.Value(nil)
			if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
				return nil, at(attr.SrcRange, "module %q: source must be a literal string", m.name)
			}
			m.source = v.AsString()
		case "version", "providers":
			// Local modules have no version; the one provider is inherited.
		case "count", "for_each", "depends_on":
			return nil, at(attr.SrcRange, "module %q: %q on a module call is not supported by the mock runner", m.name, name)
		default:
			m.inputExprs[name] = attr.Expr
		}
	}
	if !strings.HasPrefix(m.source, "./") {
		return nil, at(blk.DefRange(), "module %q: source %q is not a local path (./modules/<name>); the mock runner only reads modules inside the config bundle", m.name, m.source)
	}
	m.dir = path.Clean(m.source)
	return m, nil
}

// checkRootOutputs checks that root outputs refer only to declared module outputs.
func (c *config) checkRootOutputs() error {
	for _, o := range c.outputs {
		for _, trav := range o.expr.Variables() {
			if trav.RootName() != "module" {
				return at(trav.SourceRange(), "output %q: the root module's outputs may only refer to module outputs in the mock runner", o.name)
			}
			m := c.module(attrStep(trav, 1))
			if m == nil {
				return at(trav.SourceRange(), "output %q: reference to undeclared module %q", o.name, attrStep(trav, 1))
			}
			if out := attrStep(trav, 2); out != "" && !m.hasOutput(out) {
				return at(trav.SourceRange(), "output %q: module %q has no output %q", o.name, m.name, out)
			}
		}
	}
	return nil
}

func (m *moduleConfig) hasOutput(name string) bool {
	for _, o := range m.outputs {
		if o.name == name {
			return true
		}
	}
	return false
}

func knownTypes() []string { return sortedKeys(schemas) }

func sortedAttributes(body *hclsyntax.Body) []*hclsyntax.Attribute {
	out := make([]*hclsyntax.Attribute, 0, len(body.Attributes))
	for _, name := range sortedKeys(body.Attributes) {
		out = append(out, body.Attributes[name])
	}
	return out
}

func noAttributes(body *hclsyntax.Body) error {
	for _, attr := range sortedAttributes(body) {
		return at(attr.SrcRange, "unexpected argument %q outside of any block", attr.Name)
	}
	return nil
}

func literalString(attr *hclsyntax.Attribute) string {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return ""
	}
	return v.AsString()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
