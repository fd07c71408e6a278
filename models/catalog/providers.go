package catalog

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// defaultRegistry is the host OpenTofu gives a provider source without one
// ("hashicorp/kubernetes"): the address its lock file entry carries.
const defaultRegistry = "registry.opentofu.org"

// provider is one provider the template's module requires: terraform {
// required_providers { <local> = { source = ..., version = ... } } }.
type provider struct {
	local   string // the local name the module uses, "kubernetes"
	source  string // as the module writes it, "hashicorp/kubernetes"
	address string // fully qualified and lower-case, as the lock file names it
	version string // the one exact version the module asks for
	dir     string // the module (directory) that requires it, "module"
	at      string // "module/versions.tf:3", for messages
}

var (
	// exactVersionRe is one exact version: no operator, no range, no "v".
	exactVersionRe = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)
	// sourcePartRe is one part of a provider source address.
	sourcePartRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
	// providerNameRe is a local provider name, as a resource type starts with it.
	providerNameRe = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
)

// requiredProviders reads the required_providers of one terraform block of file rel.
// Each entry must be an object of a literal source and one exact version: the root
// module repeats them and the lock file must pin exactly that build.
func requiredProviders(rel string, tf *hclsyntax.Block) ([]provider, []string) {
	var out []provider
	var problems []string
	for _, rp := range tf.Body.Blocks {
		if rp.Type != "required_providers" {
			continue
		}
		names := make([]string, 0, len(rp.Body.Attributes))
		for name := range rp.Body.Attributes {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			a := rp.Body.Attributes[name]
			at := fmt.Sprintf("%s:%d", rel, a.NameRange.Start.Line)
			p, why := parseRequirement(name, a.Expr)
			if why != "" {
				problems = append(problems, fmt.Sprintf("%s: required provider %q %s", at, name, why))
				continue
			}
			p.dir, p.at = path.Dir(rel), at
			out = append(out, p)
		}
	}
	return out, problems
}

// parseRequirement reads `name = { source = "...", version = "..." }`.
func parseRequirement(name string, expr hclsyntax.Expression) (provider, string) {
	if !providerNameRe.MatchString(name) {
		return provider{}, "is not a provider name (lower-case letters, digits and hyphens)"
	}
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return provider{}, `must be written { source = "namespace/name", version = "1.2.3" }`
	}
	p := provider{local: name}
	for _, item := range obj.Items {
		key, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() || key.Type() != cty.String {
			return provider{}, "has a key that is not a plain name"
		}
		value, literal := "", false
		if t, ok := item.ValueExpr.(*hclsyntax.TemplateExpr); ok {
			value, literal = literalString(t)
		}
		switch key.AsString() {
		case "source":
			if !literal {
				return provider{}, "must give its source as a literal string"
			}
			p.source = value
		case "version":
			if !literal {
				return provider{}, "must give its version as a literal string"
			}
			p.version = value
		default:
			// configuration_aliases would need provider blocks the root module does not
			// write; nothing else is valid here.
			return provider{}, fmt.Sprintf("sets %s: only source and version are supported", key.AsString())
		}
	}
	address, why := providerAddress(p.source)
	switch {
	case p.source == "":
		return provider{}, "has no source: give it as namespace/name (or host/namespace/name)"
	case why != "":
		return provider{}, fmt.Sprintf("has source %q, which %s", p.source, why)
	case p.version == "":
		return provider{}, "has no version: pin one exact version, the one its lock file entry holds"
	case !exactVersionRe.MatchString(p.version):
		return provider{}, fmt.Sprintf("asks for version %q, which is not one exact version: write it as \"1.2.3\", the version its lock file entry holds", p.version)
	}
	p.address = address
	return p, ""
}

// providerAddress is the fully qualified address of a provider source, as the lock
// file names it (OpenTofu compares them without regard to case).
func providerAddress(source string) (string, string) {
	parts := strings.Split(source, "/")
	for _, part := range parts {
		if !sourcePartRe.MatchString(part) {
			return "", "is not a provider source address"
		}
	}
	switch len(parts) {
	case 2:
		return strings.ToLower(defaultRegistry + "/" + source), ""
	case 3:
		return strings.ToLower(source), ""
	}
	return "", "is not namespace/name or host/namespace/name"
}

// lockEntry is one provider block of .terraform.lock.hcl.
type lockEntry struct {
	version string
	h1      bool // some hash is an h1: hash
	line    int
}

// readLock reads the provider entries of the lock file by lower-case address.
func readLock(data []byte) (map[string]lockEntry, []string) {
	f, diags := hclsyntax.ParseConfig(data, lockFile, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, []string{diags.Error()}
	}
	out := map[string]lockEntry{}
	var problems []string
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "provider" || len(b.Labels) != 1 {
			continue
		}
		addr := strings.ToLower(b.Labels[0])
		e := lockEntry{line: b.DefRange().Start.Line}
		if a, ok := b.Body.Attributes["version"]; ok {
			if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
				e.version = v.AsString()
			}
		}
		if a, ok := b.Body.Attributes["hashes"]; ok {
			if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.CanIterateElements() && v.IsKnown() && !v.IsNull() {
				for it := v.ElementIterator(); it.Next(); {
					_, h := it.Element()
					if h.Type() == cty.String && h.IsKnown() && !h.IsNull() && strings.HasPrefix(h.AsString(), "h1:") {
						e.h1 = true
					}
				}
			}
		}
		if _, dup := out[addr]; dup {
			problems = append(problems, fmt.Sprintf("%s:%d: provider %s is locked twice", lockFile, e.line, addr))
		}
		out[addr] = e
	}
	return out, problems
}

// checkProviders merges the required providers of every module of the tree (one
// local name and one exact version per provider) and holds them against the lock
// file: every one pinned at its version with an h1: hash, nothing else pinned. It
// returns the merged list sorted by local name.
func checkProviders(required []provider, lock []byte) ([]provider, []string) {
	var problems []string
	byLocal := map[string]provider{}
	byAddress := map[string]provider{}
	for _, p := range required {
		if q, ok := byLocal[p.local]; ok && q.address != p.address {
			problems = append(problems, fmt.Sprintf("%s: provider %q is %s here but %s at %s: one local name, one provider", p.at, p.local, p.source, q.source, q.at))
			continue
		}
		if q, ok := byAddress[p.address]; ok {
			switch {
			case q.local != p.local:
				problems = append(problems, fmt.Sprintf("%s: provider %s is called %q here but %q at %s: use one local name", p.at, p.address, p.local, q.local, q.at))
			case q.version != p.version:
				problems = append(problems, fmt.Sprintf("%s: provider %s asks for version %s here but %s at %s: one exact version per provider", p.at, p.address, p.version, q.version, q.at))
			}
			continue
		}
		byLocal[p.local], byAddress[p.address] = p, p
	}
	entries, lockProblems := readLock(lock)
	problems = append(problems, lockProblems...)
	if entries == nil {
		return nil, problems
	}
	out := make([]provider, 0, len(byLocal))
	for _, p := range byLocal {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].local < out[j].local })
	for _, p := range out {
		e, ok := entries[p.address]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: provider %s %s has no entry in %s: lock it (tofu providers lock) so its hash is checked before use", p.at, p.address, p.version, lockFile))
		case e.version != p.version:
			problems = append(problems, fmt.Sprintf("%s:%d: provider %s is locked at version %q, but the module requires %s", lockFile, e.line, p.address, e.version, p.version))
		case !e.h1:
			problems = append(problems, fmt.Sprintf("%s:%d: provider %s has no h1: hash: without one OpenTofu installs it from a mirror unverified", lockFile, e.line, p.address))
		}
	}
	addrs := make([]string, 0, len(entries))
	for addr := range entries {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		if _, ok := byAddress[addr]; !ok {
			// tofu init -lockfile=readonly fails on it ("Provider dependency changes detected").
			problems = append(problems, fmt.Sprintf("%s:%d: provider %s is locked, but no module of the template requires it", lockFile, entries[addr].line, addr))
		}
	}
	return out, problems
}

// resourceProvider is the local name of the provider a resource or data block uses:
// its provider argument's first name, or its type up to the first underscore.
func resourceProvider(b *hclsyntax.Block) string {
	if a, ok := b.Body.Attributes["provider"]; ok {
		if trav, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() {
			return trav.RootName()
		}
	}
	typ := label(b)
	if i := strings.IndexByte(typ, '_'); i > 0 {
		return typ[:i]
	}
	return typ
}

// builtinProviders need no lock entry: OpenTofu ships them (terraform_data).
var builtinProviders = map[string]bool{"terraform": true}

// checkResourceProviders refuses a resource whose provider its own module (the
// directory it is in) does not require: OpenTofu would pick any version of
// hashicorp/<name> for it, which no lock entry pins.
func checkResourceProviders(uses []providerUse, required []provider) []string {
	declared := map[string]bool{}
	for _, p := range required {
		declared[p.dir+" "+p.local] = true
	}
	var problems []string
	for _, u := range uses {
		if builtinProviders[u.local] || declared[u.dir+" "+u.local] {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: %s %s uses provider %q, which %s/ does not list in terraform { required_providers } with a source and version",
			u.at, u.kind, u.typ, u.local, u.dir))
	}
	return problems
}

// providerUse is a resource or data block and the provider it uses.
type providerUse struct {
	dir, at, kind, typ, local string
}
