package tofu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// A template's .terraform.lock.hcl pins every provider its module requires. Gantry writes the
// entries of the providers it builds (the sandbox provider and ThirdParties) from the binaries
// it publishes; an entry for a provider only the operator's mirror serves is the operator's to
// write (`tofu providers lock -fs-mirror`, docs/provider-mirror.md) and is kept as it is.

// DefaultRegistry is the host of a provider source written without one ("hashicorp/kubernetes").
const DefaultRegistry = "registry.opentofu.org"

// RequiredSources returns the provider sources the .tf files under dir require
// (terraform { required_providers { name = { source = "..." } } }), as full addresses, each
// once, sorted.
func RequiredSources(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".tf" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, diags := hclsyntax.ParseConfig(data, path, hcl.InitialPos)
		if diags.HasErrors() {
			return fmt.Errorf("parsing %s: %s", path, diags.Error())
		}
		for _, tf := range f.Body.(*hclsyntax.Body).Blocks {
			if tf.Type != "terraform" {
				continue
			}
			for _, req := range tf.Body.Blocks {
				if req.Type != "required_providers" {
					continue
				}
				for name, attr := range req.Body.Attributes {
					source, err := sourceOf(name, attr)
					if err != nil {
						return fmt.Errorf("%s: %w", path, err)
					}
					if !slices.Contains(out, source) {
						out = append(out, source)
					}
				}
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// sourceOf reads one required_providers entry's source as a full address; an entry without
// one is hashicorp/<name>, as tofu reads it.
func sourceOf(name string, attr *hclsyntax.Attribute) (string, error) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || !v.Type().IsObjectType() {
		return "", fmt.Errorf("required_providers.%s is not an object of literals", name)
	}
	source := "hashicorp/" + name
	if v.Type().HasAttribute("source") {
		s := v.GetAttr("source")
		if s.Type() != cty.String || s.IsNull() || !s.IsKnown() {
			return "", fmt.Errorf("required_providers.%s.source is not a string", name)
		}
		source = s.AsString()
	}
	switch strings.Count(source, "/") {
	case 1:
		return DefaultRegistry + "/" + source, nil
	case 2:
		return source, nil
	}
	return "", fmt.Errorf("required_providers.%s.source %q is not [hostname/]namespace/type", name, source)
}

// ErrNoLockEntry is a provider a template requires that Gantry does not build and whose entry
// its lock file does not hold.
var ErrNoLockEntry = errors.New("no lock entry")

// TemplateLockFile returns the lock file the template module in dir needs: for each provider
// it requires, the entry in built (the entries of the providers Gantry publishes) or, for
// a provider Gantry does not build, the entry its current lock file (current, may be nil)
// holds.
func TemplateLockFile(dir string, current []byte, built []Lock) ([]byte, error) {
	sources, err := RequiredSources(dir)
	if err != nil {
		return nil, err
	}
	var kept []Lock
	if len(current) > 0 {
		if kept, err = ParseLockFile(current); err != nil {
			return nil, err
		}
	}
	var locks []Lock
	for _, source := range sources {
		i := slices.IndexFunc(built, func(l Lock) bool { return l.Source == source })
		if i < 0 {
			i = slices.IndexFunc(kept, func(l Lock) bool { return l.Source == source })
			if i < 0 {
				return nil, fmt.Errorf("%w for %s: Gantry does not build it; write its entry with `tofu providers lock -fs-mirror=<the operator's mirror>` (docs/provider-mirror.md)", ErrNoLockEntry, source)
			}
			locks = append(locks, kept[i])
			continue
		}
		locks = append(locks, built[i])
	}
	return LockFile(locks...), nil
}

// ThirdPartiesFor returns the third-party providers Gantry builds among sources.
func ThirdPartiesFor(sources []string) []ThirdParty {
	var out []ThirdParty
	for _, p := range ThirdParties {
		if slices.Contains(sources, p.Source) {
			out = append(out, p)
		}
	}
	return out
}
