package catalog

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"gantry/models/bundle"
)

// A runner has no network (runc gives it a namespace of its own, a Kubernetes Job a
// policy), so `tofu init` could never fetch a registry or https module. Gantry fetches
// each allowlisted module itself (models/modules), checks its archive against the
// allowlisted sha256 and puts the module's files into the config bundle as a local
// module: the bundle digest the approval binds to covers them, and the runner reads
// nothing from anywhere else.

// fetchedDir is where generation puts fetched modules, inside the template's module
// directory (so a module call points at it with a relative path, and the bundle has
// them under modules/<template>/.modules/).
const fetchedDir = moduleDir + "/.modules"

// remoteCall is one call of an allowlisted registry or https module.
type remoteCall struct {
	file   string // the calling file, relative to the template directory: "module/main.tf"
	name   string // the module block's label
	source string // as written, and as allowlist.yaml lists it
}

// entryDigest is the digest a template is pinned at: its tree's (treeDigest) and, when
// it calls allowlisted modules, also each one's allowlisted version and sha256, so an
// allowlist that pins another archive under the same template version is a changed
// template. A template calling none keeps the digest of its tree alone.
func entryDigest(files map[string][]byte, remote []remoteCall, allow Allowlist) string {
	if len(remote) == 0 {
		return treeDigest(files)
	}
	pinned := make(map[string][]byte, len(files)+len(remote))
	for k, v := range files {
		pinned[k] = v
	}
	for _, c := range remote {
		// No file of a tree starts with "allowlist:" (they start with module/ or are
		// the lock file), so a pin cannot pose as a file.
		a := allow[c.source]
		pinned["allowlist:"+c.source] = []byte(a.Version + " " + a.SHA256)
	}
	return treeDigest(pinned)
}

// withModules returns the template's files with each allowlisted module it calls put
// under module/.modules/<package> and each call rewritten to that path (its version
// argument dropped: a path takes none). archives are the fetched archives by source;
// a vendored one (AllowedModule.Vendored) needs none. Each archive is checked against
// the allowlisted sha256 again here, whoever handed it over.
func withModules(files map[string][]byte, info moduleInfo, allow Allowlist, archives map[string][]byte) (map[string][]byte, error) {
	if len(info.remote) == 0 {
		return files, nil
	}
	out := make(map[string][]byte, len(files))
	for k, v := range files {
		out[k] = v
	}
	placed := map[string]string{} // source -> the called directory in the tree
	calls := map[string]map[string]string{}
	for _, c := range info.remote {
		target, ok := placed[c.source]
		if !ok {
			var err error
			if target, err = place(out, c.source, allow[c.source], archives[c.source]); err != nil {
				return nil, fmt.Errorf("module %s: %w", c.source, err)
			}
			placed[c.source] = target
		}
		if calls[c.file] == nil {
			calls[c.file] = map[string]string{}
		}
		calls[c.file][c.name] = target
	}
	for file, targets := range calls {
		src, err := rewriteCalls(file, out[file], targets)
		if err != nil {
			return nil, err
		}
		out[file] = src
	}
	return out, nil
}

// place unpacks one module's archive into tree and returns the directory a call of
// it points at (the archive's //subdir, if the source names one).
func place(tree map[string][]byte, source string, allowed AllowedModule, archive []byte) (string, error) {
	if archive == nil {
		archive = allowed.vendored
	}
	if archive == nil {
		return "", fmt.Errorf("its archive was not fetched before generation")
	}
	if got := bundle.Digest(archive); got != allowed.SHA256 {
		return "", fmt.Errorf("the archive handed to generation has %s, not the allowlisted %s; refused", got, allowed.SHA256)
	}
	pkg, err := unpack(archive)
	if err != nil {
		return "", err
	}
	_, subdir := splitSubdir(source)
	start := "."
	if subdir != "" {
		start = subdir
	}
	loaded, err := moduleDirs(pkg, start)
	if err != nil {
		return "", err
	}
	dir := path.Join(fetchedDir, packageName(source, allowed.SHA256))
	for rel, body := range pkg {
		if isConfigFile(rel) && !loaded[path.Dir(rel)] {
			// Configuration OpenTofu never loads (an examples/ directory, say) would
			// only be checked against rules it need not meet.
			continue
		}
		tree[path.Join(dir, rel)] = body
	}
	return path.Join(dir, subdir), nil
}

// moduleDirs are the directories of an archive OpenTofu loads when it calls start:
// start and, transitively, the directories its module calls point at. A fetched
// module may call only directories of its own archive: anything else would have to
// be fetched by the runner.
func moduleDirs(pkg map[string][]byte, start string) (map[string]bool, error) {
	names := make([]string, 0, len(pkg))
	for name := range pkg {
		names = append(names, name)
	}
	sort.Strings(names)
	loaded := map[string]bool{}
	queue := []string{start}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if loaded[dir] {
			continue
		}
		loaded[dir] = true
		found := false
		for _, rel := range names {
			if path.Dir(rel) != dir || !isConfigFile(rel) {
				continue
			}
			found = true
			next, err := localCalls(rel, pkg[rel])
			if err != nil {
				return nil, err
			}
			for _, to := range next {
				target := path.Join(dir, to)
				if target == ".." || strings.HasPrefix(target, "../") {
					return nil, fmt.Errorf("%s: module source %q leaves the module's archive", rel, to)
				}
				queue = append(queue, target)
			}
		}
		if !found {
			where := dir
			if dir == "." {
				where = "its root"
			}
			return nil, fmt.Errorf("the archive has no .tf files in %s", where)
		}
	}
	return loaded, nil
}

// localCalls are the sources of the module calls in one file of an archive, all of
// them paths, or why not. What does not parse is left to checkModule, which says
// where.
func localCalls(rel string, body []byte) ([]string, error) {
	if !strings.HasSuffix(rel, ".tf") && !strings.HasSuffix(rel, ".tofu") {
		return nil, nil // JSON: checkModule refuses it
	}
	f, diags := hclsyntax.ParseConfig(body, rel, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, nil
	}
	var out []string
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "module" {
			continue
		}
		a, ok := b.Body.Attributes["source"]
		if !ok {
			continue
		}
		source, ok := literalString(a.Expr)
		if !ok {
			continue
		}
		if !isLocal(source) {
			return nil, fmt.Errorf("%s:%d: module %q calls %q: a fetched module may call only directories of its own archive",
				rel, a.Expr.Range().Start.Line, label(b), source)
		}
		out = append(out, source)
	}
	return out, nil
}

// rewriteCalls points the module blocks named in targets (label -> directory in the
// tree) of file at their directories, relative to the file's, and drops their
// version. hclwrite keeps the rest of the file as it was written.
func rewriteCalls(file string, src []byte, targets map[string]string) ([]byte, error) {
	f, diags := hclwrite.ParseConfig(src, file, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %w", file, diags)
	}
	done := 0
	for _, b := range f.Body().Blocks() {
		labels := b.Labels()
		if b.Type() != "module" || len(labels) != 1 {
			continue
		}
		target, ok := targets[labels[0]]
		if !ok {
			continue
		}
		b.Body().SetAttributeValue("source", cty.StringVal(relativePath(path.Dir(file), target)))
		b.Body().RemoveAttribute("version")
		done++
	}
	if done != len(targets) {
		return nil, fmt.Errorf("%s: found %d of the %d module calls to rewrite", file, done, len(targets))
	}
	return f.Bytes(), nil
}

// relativePath is the module source that leads from directory from to directory to
// (both clean and slash-separated): "./x" or "../x".
func relativePath(from, to string) string {
	f, t := strings.Split(from, "/"), strings.Split(to, "/")
	i := 0
	for i < len(f) && i < len(t) && f[i] == t[i] {
		i++
	}
	up := strings.Repeat("../", len(f)-i)
	if up == "" {
		up = "./"
	}
	return up + strings.Join(t[i:], "/")
}

// packageName names a fetched module's directory: its package address in plain
// characters and the start of its sha256, so two versions never share one.
func packageName(source, sum string) string {
	pkg, _ := splitSubdir(source)
	pkg = strings.TrimPrefix(pkg, "https://")
	var b strings.Builder
	for _, r := range strings.ToLower(pkg) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	name := strings.Trim(b.String(), "-.")
	if len(name) > 60 {
		name = name[:60]
	}
	return name + "-" + strings.TrimPrefix(sum, "sha256:")[:12]
}

// isConfigFile reports whether OpenTofu reads a file as configuration.
func isConfigFile(rel string) bool {
	for _, ext := range []string{".tf", ".tofu", ".tf.json", ".tofu.json"} {
		if strings.HasSuffix(rel, ext) {
			return true
		}
	}
	return false
}
