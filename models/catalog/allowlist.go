package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"gantry/models/bundle"
)

// AllowedModule pins one registry (or https) module source a template may call.
type AllowedModule struct {
	// Version is the exact version a module block must ask for. It is required for
	// registry sources and empty for https archives, which take no version.
	Version string
	// SHA256 is the checksum of the module's archive, "sha256:<hex>". Gantry fetches the
	// archive itself (Archives, models/modules), never the runner, and refuses it before
	// any use unless its sha256 is this one; generation checks it again.
	SHA256 string
	// Vendored is where a copy of the archive ships inside the catalog ("" when none):
	// Gantry uses it instead of fetching, after the same check, so a catalog can work
	// where nothing can be fetched (the shipped example, an air-gapped portal).
	Vendored string

	vendored []byte // the vendored copy, read and checked at load
}

// Allowlist maps a module source address to the one version allowed for it.
type Allowlist map[string]AllowedModule

// loadAllowlist reads allowlist.yaml at the catalog root; a missing file is an
// empty allowlist, so only paths inside templates are allowed. A vendored archive
// whose sha256 is not the listed one breaks the allowlist: nothing may use it.
func loadAllowlist(fsys fs.FS) (Allowlist, error) {
	data, err := fs.ReadFile(fsys, "allowlist.yaml")
	if errors.Is(err, fs.ErrNotExist) {
		return Allowlist{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading allowlist.yaml: %w", err)
	}
	var doc struct {
		Modules []struct {
			Source   string `yaml:"source"`
			Version  string `yaml:"version"`
			SHA256   string `yaml:"sha256"`
			Vendored string `yaml:"vendored"`
		} `yaml:"modules"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && len(bytes.TrimSpace(data)) > 0 {
		return nil, fmt.Errorf("parsing allowlist.yaml: %w", err)
	}
	list := Allowlist{}
	for i, m := range doc.Modules {
		sum := strings.TrimPrefix(m.SHA256, "sha256:")
		_, subdir := splitSubdir(m.Source)
		switch {
		case m.Source == "":
			return nil, fmt.Errorf("allowlist.yaml: modules[%d] needs a source", i)
		case m.Version == "" && !strings.HasPrefix(m.Source, "https://"):
			// Without a version a registry module is "latest", which is not a pin.
			// An https archive cannot take a version; its checksum pins it.
			return nil, fmt.Errorf("allowlist.yaml: modules[%d] (%s) needs a version", i, m.Source)
		case !sha256Re.MatchString(sum):
			return nil, fmt.Errorf("allowlist.yaml: modules[%d] (%s): sha256 %q is not 64 lower-case hex digits", i, m.Source, m.SHA256)
		case subdir != "" && !cleanSubdir(subdir):
			return nil, fmt.Errorf("allowlist.yaml: modules[%d] (%s): the directory after // must be a plain relative path (no .., no *)", i, m.Source)
		}
		if _, dup := list[m.Source]; dup {
			return nil, fmt.Errorf("allowlist.yaml: %s is listed twice", m.Source)
		}
		entry := AllowedModule{Version: m.Version, SHA256: "sha256:" + sum, Vendored: m.Vendored}
		if m.Vendored != "" {
			if entry.vendored, err = readVendored(fsys, m.Vendored, entry.SHA256); err != nil {
				return nil, fmt.Errorf("allowlist.yaml: modules[%d] (%s): %w", i, m.Source, err)
			}
		}
		list[m.Source] = entry
	}
	return list, nil
}

// readVendored reads a vendored archive and checks it against the listed sha256.
func readVendored(fsys fs.FS, name, want string) ([]byte, error) {
	if !fs.ValidPath(name) || strings.Contains(name, `\`) {
		return nil, fmt.Errorf("vendored %q is not a path inside the catalog", name)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("reading the vendored archive: %w", err)
	}
	if got := bundle.Digest(data); got != want {
		return nil, fmt.Errorf("the vendored archive %s has %s, not the listed %s", name, got, want)
	}
	return data, nil
}

// splitSubdir splits a module source into its package (what is fetched) and the
// directory inside it after "//" (OpenTofu's subdirectory syntax), keeping an https
// URL's scheme and query with the package.
func splitSubdir(source string) (pkg, subdir string) {
	rest, query, hasQuery := strings.Cut(source, "?")
	skip := 0
	if i := strings.Index(rest, "://"); i >= 0 {
		skip = i + 3
	}
	i := strings.Index(rest[skip:], "//")
	if i < 0 {
		return source, ""
	}
	pkg, subdir = rest[:skip+i], rest[skip+i+2:]
	if hasQuery {
		pkg += "?" + query
	}
	return pkg, subdir
}

// cleanSubdir reports whether dir is a plain relative directory: OpenTofu's globbing
// ("//*") and paths leaving the archive are not supported.
func cleanSubdir(dir string) bool {
	return fs.ValidPath(dir) && dir != "." && path.Clean(dir) == dir && !strings.ContainsAny(dir, `*?[\`)
}

func checkAllowlisted(source, version string, hasVersion bool, allow Allowlist, notListed string) string {
	entry, ok := allow[source]
	switch {
	case !ok:
		return notListed
	case entry.Version == "" && hasVersion:
		return fmt.Sprintf("version %q is set, but the allowlist pins this source by checksum only", version)
	case entry.Version == "":
		return ""
	case !hasVersion:
		return fmt.Sprintf("it needs version = %q, the allowlisted version", entry.Version)
	case version != entry.Version:
		return fmt.Sprintf("version %q is not the allowlisted %q", version, entry.Version)
	}
	return ""
}
