// Package catalog loads the versioned templates under catalog/templates, refuses
// the ones that break the rules of DESIGN §5 (unpinned module sources, credentials,
// a module tree changed since it was pinned, a bad manifest), validates the inputs
// a person gives a template and generates the config bundle a run plans.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"gantry/models/errs"
)

// Catalog is the set of templates found at load, usable or refused.
type Catalog struct {
	entries []Entry // sorted by name
}

// Entry is one template directory. Refused is empty for a usable template and
// otherwise says, for an administrator, why the template cannot be used; a
// refused entry is kept so the reason can be shown rather than the template
// silently missing.
type Entry struct {
	// Template is the manifest; for a manifest that failed to parse only Name (the
	// directory name) is set.
	Template Template
	// ModuleDigest covers module/, the lock file and the allowlisted version and
	// sha256 of each registry or https module it calls (see entryDigest); empty when
	// the tree could not be read.
	ModuleDigest string
	Refused      string

	// files is the tree that was digested and checked, kept so generation bundles
	// exactly those bytes and never rereads a directory that may have changed.
	files     map[string][]byte
	module    moduleInfo
	allowlist Allowlist
}

// Usable reports whether the template may be used.
func (e Entry) Usable() bool { return e.Refused == "" }

// Load reads fsys, a catalog directory holding templates/<name>/ and an optional
// allowlist.yaml. A template failing any check is kept as a refused entry; Load
// itself fails only when the catalog as a whole cannot be read, the allowlist is
// broken or pins cannot be recorded.
func Load(ctx context.Context, fsys fs.FS, pins Pins) (*Catalog, error) {
	if pins == nil {
		return nil, errors.New("loading catalog: no pins given")
	}
	allow, err := loadAllowlist(fsys)
	if err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	dirs, err := fs.ReadDir(fsys, "templates")
	if err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	c := &Catalog{}
	for _, d := range dirs {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("loading catalog: %w", err)
		}
		e := loadEntry(fsys, d.Name(), allow)
		if e.Usable() {
			// Pin only templates that pass every other check, so a broken tree is
			// never pinned and its fix does not look like tampering.
			pinned, err := pins.Pin(ctx, e.Template.Name, e.Template.Version, e.ModuleDigest)
			if err != nil {
				return nil, fmt.Errorf("pinning template %s %s: %w", e.Template.Name, e.Template.Version, err)
			}
			if pinned != e.ModuleDigest {
				e.Refused = fmt.Sprintf("module tree of %s %s changed since it was pinned (pinned %s, now %s); publish it as a new version",
					e.Template.Name, e.Template.Version, pinned, e.ModuleDigest)
			}
		}
		c.entries = append(c.entries, e)
	}
	// fs.ReadDir sorts already; sorting again keeps All's promise explicit.
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].Template.Name < c.entries[j].Template.Name })
	return c, nil
}

// loadEntry reads and checks one template directory; problems become Refused.
func loadEntry(fsys fs.FS, name string, allow Allowlist) Entry {
	dir := path.Join("templates", name)
	e := Entry{Template: Template{Name: name}, allowlist: allow}

	files, err := readTree(fsys, dir)
	if err != nil {
		e.Refused = err.Error()
		return e
	}
	e.files = files
	e.ModuleDigest = treeDigest(files)

	data, err := fs.ReadFile(fsys, path.Join(dir, manifestFile))
	if err != nil {
		e.Refused = fmt.Sprintf("reading %s: %v", manifestFile, err)
		return e
	}
	t, err := parseManifest(data)
	if err != nil {
		e.Refused = fmt.Sprintf("%s: %v", manifestFile, err)
		return e
	}
	problems := t.check(name)
	if t.Name != name {
		// Keep the directory name so the entry is findable under the name an
		// administrator sees on disk.
		t.Name = name
	}
	e.Template = t
	if len(problems) > 0 {
		e.Refused = fmt.Sprintf("%s: %s", manifestFile, strings.Join(problems, "; "))
		return e
	}

	for rel := range files {
		if strings.HasPrefix(rel, fetchedDir+"/") {
			e.Refused = fmt.Sprintf("%s: %s/ is where Gantry puts the modules it fetches; a template may not have it", rel, fetchedDir)
			return e
		}
	}
	info, err := checkModule(files, allow)
	if err != nil {
		e.Refused = err.Error()
		return e
	}
	if problems := matchVariables(t, info); len(problems) > 0 {
		e.Refused = strings.Join(problems, "; ")
		return e
	}
	e.ModuleDigest = entryDigest(files, info.remote, allow)
	if why := checkVendored(files, info, allow); why != "" {
		e.Refused = why
		return e
	}
	e.module = info
	return e
}

// checkVendored assembles, at load, a template whose allowlisted modules all ship
// vendored, and checks the whole as generation would: a vendored module that breaks
// the rules refuses the template now rather than each request. A module Gantry must
// fetch is checked when it is fetched (RunCatalog.Modules).
func checkVendored(files map[string][]byte, info moduleInfo, allow Allowlist) string {
	if len(info.remote) == 0 {
		return ""
	}
	for _, c := range info.remote {
		if allow[c.source].vendored == nil {
			return ""
		}
	}
	tree, err := withModules(files, info, allow, nil)
	if err == nil {
		_, err = checkModule(tree, Allowlist{})
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// matchVariables checks that the manifest and the module agree, so a generated
// root module always passes exactly the variables the module declares and none
// it requires is left unset.
func matchVariables(t Template, info moduleInfo) []string {
	var problems []string
	inputs := map[string]Input{}
	for _, in := range t.Inputs {
		inputs[in.Name] = in
		if _, ok := info.variables[in.Name]; !ok {
			problems = append(problems, fmt.Sprintf("input %s has no variable %q in module/", in.Name, in.Name))
		}
	}
	vars := make([]string, 0, len(info.variables))
	for v := range info.variables {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	for _, v := range vars {
		if info.variables[v] || isContextVariable(v) {
			continue // the module's own default covers it, or Gantry sets it
		}
		in, ok := inputs[v]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("module variable %q has no default and no input in %s", v, manifestFile))
		case !in.Required && in.Default == nil:
			problems = append(problems, fmt.Sprintf("input %s is optional without a default, but module variable %q has no default either", v, v))
		}
	}
	return problems
}

// Get returns the usable template called name, or errs.ErrNotFound when there is
// none or it is refused (a refused template must not be used, only shown).
func (c *Catalog) Get(name string) (Entry, error) {
	for _, e := range c.entries {
		if e.Template.Name == name && e.Usable() {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("template %q: %w", name, errs.ErrNotFound)
}

// All returns every entry, usable or refused, sorted by name.
func (c *Catalog) All() []Entry {
	return append([]Entry(nil), c.entries...)
}
