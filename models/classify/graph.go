// The dependency graph behind Change.Dependents: built from the plan's
// configuration and prior state, then walked from each replace and destroy.

package classify

import (
	"sort"
	"strings"
)

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
