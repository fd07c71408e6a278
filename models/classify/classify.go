// Package classify sorts the resource changes of a `tofu show -json` plan
// (format_version 1.x, as OpenTofu 1.10 writes it) into the classes the review
// page and the risk rules use (DESIGN §3, §7): create, update, replace, destroy,
// read, no-op. For every replace and destroy it computes the dependents: the
// resources that reference it, transitively, from the configuration's
// expression references and depends_on lists and from the prior state's
// depends_on lists.
//
// The package is pure: it reads the bytes it is given and nothing else.
package classify

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Class is the kind of a resource change.
type Class string

// The classes of a resource change.
const (
	ClassCreate  Class = "create"
	ClassUpdate  Class = "update"
	ClassReplace Class = "replace"
	ClassDestroy Class = "destroy"
	ClassRead    Class = "read"
	ClassNoOp    Class = "no-op"
)

// Options are what the plan does not say about resource types.
type Options struct {
	// Irreversible lists resource types that hold data (from the template
	// manifest): replacing or destroying one loses the data.
	Irreversible []string
	// OrgScoped lists resource types that are organization-scoped (policy, IAM).
	OrgScoped []string
}

// Change is one entry of the plan's resource_changes, classified.
type Change struct {
	Address       string
	Type          string
	Name          string
	ModuleAddress string
	// Index is the count index (int) or for_each key (string), when present.
	Index any
	// Deposed is the deposed object's key, for a change to a deposed object.
	Deposed             string
	Class               Class
	Actions             []string // as in the plan
	CreateBeforeDestroy bool     // a replace ordered ["create","delete"]
	ActionReason        string
	ReplacePaths        [][]any
	// Irreversible: its type holds data and it is replaced or destroyed.
	Irreversible bool
	// OrgScoped: its type is organization-scoped (whatever the class).
	OrgScoped bool
	// Dependents are the instance addresses of the resources that depend on it,
	// transitively, in plan order (resource_changes, then prior-state-only
	// instances). Only computed for replace and destroy. Instances of the same
	// configuration resource share one backing array: do not modify in place.
	Dependents []string
}

// Counts counts the changes per class.
type Counts struct {
	Create, Update, Replace, Destroy, Read, NoOp int
}

// Result is a classified plan.
type Result struct {
	Changes []Change // in plan order
	Counts  Counts
	// Destroys and Replaces are indexes into Changes, in plan order.
	Destroys, Replaces []int
	// HasIrreversible: some change replaces or destroys a data-bearing resource.
	HasIrreversible bool
	// TouchesOrgScoped: some create, update, replace or destroy is of an
	// org-scoped resource type (reads and no-ops do not count).
	TouchesOrgScoped bool
}

// ErrFormat marks a document that is not a plan this package can read.
var ErrFormat = errors.New("classify: not a tofu plan document")

// ---- the plan document, only the parts read here ----

type planDoc struct {
	FormatVersion   string     `json:"format_version"`
	ResourceChanges []rcDoc    `json:"resource_changes"`
	PriorState      *priorDoc  `json:"prior_state"`
	Configuration   *configDoc `json:"configuration"`
}

type rcDoc struct {
	Address       string          `json:"address"`
	ModuleAddress string          `json:"module_address"`
	Mode          string          `json:"mode"`
	Type          string          `json:"type"`
	Name          string          `json:"name"`
	Index         json.RawMessage `json:"index"`
	Deposed       string          `json:"deposed"`
	Change        struct {
		Actions      []string `json:"actions"`
		ReplacePaths [][]any  `json:"replace_paths"`
	} `json:"change"`
	ActionReason string `json:"action_reason"`
}

type priorDoc struct {
	Values *struct {
		RootModule stateModule `json:"root_module"`
	} `json:"values"`
}

type stateModule struct {
	Resources []struct {
		Address   string   `json:"address"`
		DependsOn []string `json:"depends_on"`
	} `json:"resources"`
	ChildModules []stateModule `json:"child_modules"`
}

type configDoc struct {
	RootModule configModule `json:"root_module"`
}

type configModule struct {
	Outputs     map[string]configOutput `json:"outputs"`
	Resources   []configResource        `json:"resources"`
	ModuleCalls map[string]moduleCall   `json:"module_calls"`
}

type configOutput struct {
	Expression any      `json:"expression"`
	DependsOn  []string `json:"depends_on"`
}

type configResource struct {
	Address           string         `json:"address"`
	Expressions       map[string]any `json:"expressions"`
	CountExpression   any            `json:"count_expression"`
	ForEachExpression any            `json:"for_each_expression"`
	DependsOn         []string       `json:"depends_on"`
}

type moduleCall struct {
	Expressions       map[string]any `json:"expressions"`
	CountExpression   any            `json:"count_expression"`
	ForEachExpression any            `json:"for_each_expression"`
	DependsOn         []string       `json:"depends_on"`
	Module            configModule   `json:"module"`
}

// Classify reads a `tofu show -json` plan and classifies its resource changes.
func Classify(planJSON []byte, opts Options) (Result, error) {
	var doc planDoc
	if err := json.Unmarshal(planJSON, &doc); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if major, _, _ := strings.Cut(doc.FormatVersion, "."); major != "1" {
		return Result{}, fmt.Errorf("%w: format_version %q, want 1.x", ErrFormat, doc.FormatVersion)
	}
	irreversible := toSet(opts.Irreversible)
	orgScoped := toSet(opts.OrgScoped)

	res := Result{Changes: make([]Change, len(doc.ResourceChanges))}
	needGraph := false
	for i := range doc.ResourceChanges {
		rc := &doc.ResourceChanges[i]
		class, cbd, err := classOf(rc.Change.Actions)
		if err != nil {
			return Result{}, fmt.Errorf("classify: %s: %w", rc.Address, err)
		}
		idx, err := indexOf(rc.Index)
		if err != nil {
			return Result{}, fmt.Errorf("classify: %s: %w", rc.Address, err)
		}
		c := Change{
			Address: rc.Address, Type: rc.Type, Name: rc.Name, ModuleAddress: rc.ModuleAddress,
			Index: idx, Deposed: rc.Deposed, Class: class, Actions: rc.Change.Actions,
			CreateBeforeDestroy: cbd, ActionReason: rc.ActionReason, ReplacePaths: rc.Change.ReplacePaths,
			OrgScoped: orgScoped[rc.Type],
		}
		switch class {
		case ClassCreate:
			res.Counts.Create++
		case ClassUpdate:
			res.Counts.Update++
		case ClassReplace:
			res.Counts.Replace++
			res.Replaces = append(res.Replaces, i)
			needGraph = true
		case ClassDestroy:
			res.Counts.Destroy++
			res.Destroys = append(res.Destroys, i)
			needGraph = true
		case ClassRead:
			res.Counts.Read++
		case ClassNoOp:
			res.Counts.NoOp++
		}
		if (class == ClassReplace || class == ClassDestroy) && irreversible[rc.Type] {
			c.Irreversible = true
			res.HasIrreversible = true
		}
		if c.OrgScoped && class != ClassRead && class != ClassNoOp {
			res.TouchesOrgScoped = true
		}
		res.Changes[i] = c
	}
	if needGraph {
		g := buildGraph(&doc)
		for _, list := range [][]int{res.Replaces, res.Destroys} {
			for _, i := range list {
				res.Changes[i].Dependents = g.dependents(res.Changes[i].Address)
			}
		}
	}
	return res, nil
}

func toSet(xs []string) map[string]bool {
	m := make(map[string]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// classOf maps a plan's action list to its class (see the feasibility notes §3).
func classOf(actions []string) (Class, bool, error) {
	switch len(actions) {
	case 1:
		switch actions[0] {
		case "create":
			return ClassCreate, false, nil
		case "update":
			return ClassUpdate, false, nil
		case "delete":
			return ClassDestroy, false, nil
		case "read":
			return ClassRead, false, nil
		case "no-op":
			return ClassNoOp, false, nil
		}
	case 2:
		switch {
		case actions[0] == "delete" && actions[1] == "create":
			return ClassReplace, false, nil
		case actions[0] == "create" && actions[1] == "delete":
			return ClassReplace, true, nil
		}
	}
	return "", false, fmt.Errorf("unknown actions %q", actions)
}

// indexOf reads a count index (an int) or a for_each key (a string).
func indexOf(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		return s, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("index %s: %w", raw, err)
	}
	return n, nil
}

// ---- the dependency graph ----

// graph has a node per configuration resource (absolute address without
// instance keys, e.g. "module.db.sandbox_subnet.this") and per module
// variable, output, call and subtree. Edges run from a thing to what depends
// on it.
type graph struct {
	ids      map[string]int32
	out      [][]int32 // node -> its direct dependents
	isRes    []bool
	inst     [][]int32 // resource node -> its instances (indexes into addrs)
	addrs    []string  // instance addresses, in plan order
	instIdx  map[string]int32
	memo     map[int32][]string
	visited  []uint32
	gen      uint32
	instSeen []uint32
}

func (g *graph) node(name string, isRes bool) int32 {
	if id, ok := g.ids[name]; ok {
		if isRes {
			g.isRes[id] = true
		}
		return id
	}
	id := int32(len(g.out))
	g.ids[name] = id
	g.out = append(g.out, nil)
	g.isRes = append(g.isRes, isRes)
	g.inst = append(g.inst, nil)
	return id
}

func (g *graph) edge(from, to int32) {
	if from == to {
		return
	}
	g.out[from] = append(g.out[from], to)
}

// Names of the nodes that are not resources. prefix is a module path as it
// starts an absolute address: "" for the root, "module.a.module.b." below.
func varNode(prefix, name string) string { return "#var " + prefix + name }
func outNode(prefix, name string) string { return "#out " + prefix + name }
func callNode(prefix string) string      { return "#call " + prefix }
func allNode(prefix string) string       { return "#all " + prefix }

func buildGraph(doc *planDoc) *graph {
	n := len(doc.ResourceChanges)
	g := &graph{
		ids: make(map[string]int32, 2*n), instIdx: make(map[string]int32, n),
		memo: map[int32][]string{},
	}
	// Instances: resource_changes in plan order, then prior-state-only ones.
	for i := range doc.ResourceChanges {
		g.instance(doc.ResourceChanges[i].Address)
	}
	if doc.PriorState != nil && doc.PriorState.Values != nil {
		g.state(&doc.PriorState.Values.RootModule)
	}
	if doc.Configuration != nil {
		g.module(&doc.Configuration.RootModule, "", nil)
	}
	return g
}

// instance records an instance address and returns its resource node.
func (g *graph) instance(addr string) int32 {
	cfg := stripKeys(addr)
	id := g.node(cfg, true)
	if _, ok := g.instIdx[addr]; !ok {
		i := int32(len(g.addrs))
		g.addrs = append(g.addrs, addr)
		g.instIdx[addr] = i
		g.inst[id] = append(g.inst[id], i)
	}
	return id
}

func (g *graph) state(m *stateModule) {
	for i := range m.Resources {
		r := &m.Resources[i]
		id := g.instance(r.Address)
		for _, d := range r.DependsOn {
			g.edge(g.absolute(d), id)
		}
	}
	for i := range m.ChildModules {
		g.state(&m.ChildModules[i])
	}
}

// absolute resolves an absolute configuration address (as in the state's
// depends_on): a resource, or a whole module.
func (g *graph) absolute(addr string) int32 {
	a := stripKeys(addr)
	rest := a
	for strings.HasPrefix(rest, "module.") {
		_, after, ok := strings.Cut(rest[len("module."):], ".")
		if !ok {
			return g.node(allNode(a+"."), false)
		}
		rest = after
	}
	return g.node(a, true)
}

// module adds the edges of a configuration module. ancestors are the call
// nodes of the module calls that lead to it (every resource inside depends on
// them: a module call's depends_on, count and for_each).
func (g *graph) module(m *configModule, prefix string, ancestors []int32) {
	// The subtree nodes of the enclosing modules: "depends_on = [module.x]".
	var alls []int32
	for p := prefix; p != ""; {
		alls = append(alls, g.node(allNode(p), false))
		p = parentPrefix(p)
	}
	var refs []string
	for i := range m.Resources {
		r := &m.Resources[i]
		id := g.node(prefix+r.Address, true)
		for _, a := range ancestors {
			g.edge(a, id)
		}
		for _, a := range alls {
			g.edge(id, a)
		}
		refs = refs[:0]
		for _, e := range r.Expressions {
			refs = collectRefs(e, refs)
		}
		refs = collectRefs(r.CountExpression, refs)
		refs = collectRefs(r.ForEachExpression, refs)
		g.refEdges(prefix, refs, id)
		g.dependsOn(prefix, r.DependsOn, id)
	}
	for name, o := range m.Outputs {
		id := g.node(outNode(prefix, name), false)
		g.refEdges(prefix, collectRefs(o.Expression, refs[:0]), id)
		g.dependsOn(prefix, o.DependsOn, id)
	}
	for name, mc := range m.ModuleCalls {
		child := prefix + "module." + name + "."
		for v, e := range mc.Expressions {
			id := g.node(varNode(child, v), false)
			g.refEdges(prefix, collectRefs(e, refs[:0]), id)
		}
		call := g.node(callNode(child), false)
		refs = collectRefs(mc.CountExpression, refs[:0])
		refs = collectRefs(mc.ForEachExpression, refs)
		g.refEdges(prefix, refs, call)
		g.dependsOn(prefix, mc.DependsOn, call)
		g.module(&mc.Module, child, append(ancestors[:len(ancestors):len(ancestors)], call))
	}
}

func parentPrefix(p string) string {
	// p is "module.a." or "module.a.module.b."; drop the last "module.x.".
	i := strings.LastIndex(p[:len(p)-1], "module.")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// refEdges adds an edge to id from every node its references name, resolved in
// the module at prefix.
func (g *graph) refEdges(prefix string, refs []string, id int32) {
	if len(refs) == 0 {
		return
	}
	// tofu lists "module.x.out" and also "module.x": a bare module reference
	// counts as a reference to the whole module only when the expressions name
	// none of its outputs.
	var named, bare []string
	for _, ref := range refs {
		head, rest, ok := cutSegment(ref)
		if !ok {
			continue
		}
		switch head {
		case "var":
			v, _, _ := cutSegment(rest)
			g.edge(g.node(varNode(prefix, v), false), id)
		case "module":
			name, after, _ := cutSegment(rest)
			if after == "" {
				bare = append(bare, name)
				continue
			}
			named = append(named, name)
			o, _, _ := cutSegment(after)
			g.edge(g.node(outNode(prefix+"module."+name+".", o), false), id)
		case "data":
			typ, after, _ := cutSegment(rest)
			name, _, _ := cutSegment(after)
			if typ != "" && name != "" {
				g.edge(g.node(prefix+"data."+typ+"."+name, true), id)
			}
		case "count", "each", "path", "terraform", "tofu", "self", "local", "resource":
			// Not resources; locals are not in the plan's configuration.
		default:
			name, _, _ := cutSegment(rest)
			if name != "" {
				g.edge(g.node(prefix+head+"."+name, true), id)
			}
		}
	}
outer:
	for _, b := range bare {
		for _, n := range named {
			if n == b {
				continue outer
			}
		}
		g.edge(g.node(allNode(prefix+"module."+b+"."), false), id)
	}
}

// dependsOn adds the edges of a depends_on list, resolved in the module at prefix.
func (g *graph) dependsOn(prefix string, deps []string, id int32) {
	for _, d := range deps {
		head, rest, ok := cutSegment(d)
		if !ok {
			continue
		}
		switch head {
		case "module":
			name, after, _ := cutSegment(rest)
			if after == "" {
				g.edge(g.node(allNode(prefix+"module."+name+"."), false), id)
			} else {
				o, _, _ := cutSegment(after)
				g.edge(g.node(outNode(prefix+"module."+name+".", o), false), id)
			}
		default:
			g.refEdges(prefix, []string{d}, id)
		}
	}
}

// cutSegment splits "a[0].b.c" into "a" and "b.c"; "a" into "a" and "".
// Instance keys after the first name are dropped.
func cutSegment(s string) (head, rest string, ok bool) {
	i := strings.IndexAny(s, ".[")
	if i < 0 {
		return s, "", s != ""
	}
	head = s[:i]
	if s[i] == '[' {
		j := skipKey(s, i)
		s = s[j:]
		if s == "" {
			return head, "", true
		}
		if s[0] != '.' {
			return head, "", true
		}
		return head, s[1:], true
	}
	return head, s[i+1:], true
}

// skipKey returns the index just after the "[...]" that starts at s[i],
// skipping quoted strings.
func skipKey(s string, i int) int {
	inStr := false
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case inStr && c == '\\':
			j++
		case c == '"':
			inStr = !inStr
		case !inStr && c == ']':
			return j + 1
		}
	}
	return len(s)
}

// stripKeys drops the instance keys of an address:
// `module.a["x"].t.n[0]` -> `module.a.t.n`.
func stripKeys(addr string) string {
	if strings.IndexByte(addr, '[') < 0 {
		return addr
	}
	var b strings.Builder
	b.Grow(len(addr))
	for i := 0; i < len(addr); {
		if addr[i] == '[' {
			i = skipKey(addr, i)
			continue
		}
		b.WriteByte(addr[i])
		i++
	}
	return b.String()
}

// collectRefs appends the "references" found anywhere in an expression tree
// (an expression, or a nested block of expressions), skipping constant values.
func collectRefs(v any, refs []string) []string {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch k {
			case "constant_value":
			case "references":
				if list, ok := x.([]any); ok {
					for _, r := range list {
						if s, ok := r.(string); ok {
							refs = append(refs, s)
						}
					}
				} else {
					refs = collectRefs(x, refs)
				}
			default:
				refs = collectRefs(x, refs)
			}
		}
	case []any:
		for _, x := range t {
			refs = collectRefs(x, refs)
		}
	}
	return refs
}

// dependents lists the instances that depend on the instance at addr,
// transitively, in plan order.
func (g *graph) dependents(addr string) []string {
	start, ok := g.ids[stripKeys(addr)]
	if !ok {
		return nil
	}
	if d, ok := g.memo[start]; ok {
		return d
	}
	if g.visited == nil {
		g.visited = make([]uint32, len(g.out))
		g.instSeen = make([]uint32, len(g.addrs))
	}
	g.gen++
	gen := g.gen
	g.visited[start] = gen
	queue := []int32{start}
	var found []int32
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, m := range g.out[n] {
			if g.visited[m] == gen {
				continue
			}
			g.visited[m] = gen
			queue = append(queue, m)
			if g.isRes[m] {
				for _, i := range g.inst[m] {
					if g.instSeen[i] != gen {
						g.instSeen[i] = gen
						found = append(found, i)
					}
				}
			}
		}
	}
	var out []string
	if len(found) > 0 {
		sort.Slice(found, func(a, b int) bool { return found[a] < found[b] })
		out = make([]string, len(found))
		for k, i := range found {
			out[k] = g.addrs[i]
		}
		out = out[:len(out):len(out)]
	}
	g.memo[start] = out
	return out
}
