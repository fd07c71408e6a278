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
