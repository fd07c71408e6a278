package catalog

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Paths inside a template directory.
const (
	manifestFile = "template.yaml"
	moduleDir    = "module"
	lockFile     = ".terraform.lock.hcl"
)

var (
	sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// registryRe is a module registry address: [host/]namespace/name/system[//subdir].
	registryRe = regexp.MustCompile(`^([a-z0-9][a-z0-9.-]*\.[a-z0-9-]+(:[0-9]+)?/)?[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9_-]*/[a-z0-9]+(//[A-Za-z0-9_./-]+)?$`)
	// credentialWords are attribute names a provider block must not set: a template
	// is shared and versioned, so anything secret in it leaks to every reader.
	credentialWords = []string{"token", "password", "secret", "access_key", "credentials"}
)

// readTree returns the files the module digest covers, keyed by their path relative
// to the template directory: everything under module/ plus the provider lock file.
func readTree(fsys fs.FS, dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	root := path.Join(dir, moduleDir)
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, dir+"/")
		if d.IsDir() {
			return nil
		}
		// A symlink could point anywhere on the host, and a bundle holds regular
		// files only, so the tree must be plain files.
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[rel] = data
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("it has no module/ directory")
	}
	if err != nil {
		return nil, fmt.Errorf("reading module tree: %w", err)
	}
	lock, err := fs.ReadFile(fsys, path.Join(dir, lockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("it has no .terraform.lock.hcl: providers must be locked")
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", lockFile, err)
	}
	files[lockFile] = lock
	return files, nil
}

// treeDigest hashes files in sorted path order, each as its path, a NUL byte, its
// length as 8 big-endian bytes and its content. The length prefix keeps two trees
// that concatenate to the same bytes from sharing a digest. The manifest is not
// part of the tree, so fixing a typo in a description does not break the pin.
func treeDigest(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	h := sha256.New()
	var size [8]byte
	for _, name := range names {
		h.Write([]byte(name))
		h.Write([]byte{0})
		binary.BigEndian.PutUint64(size[:], uint64(len(files[name])))
		h.Write(size[:])
		h.Write(files[name])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// moduleInfo is what the root module needs to know about the template module.
type moduleInfo struct {
	// variables maps each variable of the template module to whether it has a default.
	variables map[string]bool
	outputs   []output
	// providers are the providers the module tree requires, sorted by local name: the
	// root module requires exactly these and configures each with an empty block.
	providers []provider
	// remote are the calls of allowlisted registry or https modules, in file order:
	// generation puts each fetched module into the bundle and calls it there.
	remote []remoteCall
}

type output struct {
	name      string
	sensitive bool
}

// checkModule parses every configuration file of the tree and enforces the module
// source and credential rules of DESIGN §5. It runs at load and again at
// generation, on the very files that go into the bundle. A non-nil error is a
// human reason listing every problem.
func checkModule(files map[string][]byte, allow Allowlist) (moduleInfo, error) {
	info := moduleInfo{variables: map[string]bool{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []string
	var required []provider
	var uses []providerUse
	topLevel := 0
	for _, rel := range names {
		switch {
		case strings.HasSuffix(rel, ".tf.json"), strings.HasSuffix(rel, ".tofu.json"):
			// OpenTofu reads JSON configuration too; rather than a second parser
			// for the same rules, templates are written in HCL only.
			problems = append(problems, fmt.Sprintf("%s: JSON configuration is not supported, write it as .tf", rel))
			continue
		case strings.HasSuffix(rel, ".tf"), strings.HasSuffix(rel, ".tofu"):
			// .tofu files are read by OpenTofu (and override a .tf of the same
			// name), so they are checked exactly like .tf files.
		default:
			continue
		}
		inTop := path.Dir(rel) == moduleDir
		if inTop {
			topLevel++
		}
		f, diags := hclsyntax.ParseConfig(files[rel], rel, hcl.InitialPos)
		if diags.HasErrors() {
			problems = append(problems, diags.Error())
			continue
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			switch b.Type {
			case "module":
				why, remote := checkModuleBlock(rel, b, files, allow)
				problems = append(problems, why...)
				if remote != nil {
					info.remote = append(info.remote, *remote)
				}
			case "provider":
				problems = append(problems, checkProviderBody(rel, label(b), b.Body)...)
			case "terraform":
				ps, why := requiredProviders(rel, b)
				required = append(required, ps...)
				problems = append(problems, why...)
			case "resource", "data":
				uses = append(uses, providerUse{dir: path.Dir(rel), at: fmt.Sprintf("%s:%d", rel, b.DefRange().Start.Line),
					kind: b.Type, typ: label(b), local: resourceProvider(b)})
			case "variable":
				if inTop {
					_, hasDefault := b.Body.Attributes["default"]
					info.variables[label(b)] = hasDefault
				}
			case "output":
				if inTop {
					o := output{name: label(b)}
					if a, ok := b.Body.Attributes["sensitive"]; ok {
						v, diags := a.Expr.Value(nil)
						o.sensitive = !diags.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() && v.True()
					}
					info.outputs = append(info.outputs, o)
				}
			}
		}
	}
	if topLevel == 0 {
		problems = append(problems, "module/ has no .tf files")
	}
	if lock, ok := files[lockFile]; ok {
		providers, why := checkProviders(required, lock)
		info.providers = providers
		problems = append(problems, why...)
	}
	problems = append(problems, checkResourceProviders(uses, required)...)
	sort.Slice(info.outputs, func(i, j int) bool { return info.outputs[i].name < info.outputs[j].name })
	if len(problems) > 0 {
		return moduleInfo{}, errors.New(strings.Join(problems, "; "))
	}
	return info, nil
}

func label(b *hclsyntax.Block) string {
	if len(b.Labels) == 0 {
		return ""
	}
	return b.Labels[0]
}

// checkModuleBlock checks the source (and version) of one module call in file rel;
// remote is the call when its source is an allowlisted registry or https module.
func checkModuleBlock(rel string, b *hclsyntax.Block, files map[string][]byte, allow Allowlist) (problems []string, remote *remoteCall) {
	src, ok := b.Body.Attributes["source"]
	if !ok {
		return []string{fmt.Sprintf("%s:%d: module %q has no source", rel, b.DefRange().Start.Line, label(b))}, nil
	}
	line := src.Expr.Range().Start.Line
	source, ok := literalString(src.Expr)
	if !ok {
		return []string{fmt.Sprintf("%s:%d: module %q: source must be a literal string", rel, line, label(b))}, nil
	}
	version, hasVersion := "", false
	if v, ok := b.Body.Attributes["version"]; ok {
		if version, ok = literalString(v.Expr); !ok {
			return []string{fmt.Sprintf("%s:%d: module %q: version must be a literal string", rel, v.Expr.Range().Start.Line, label(b))}, nil
		}
		hasVersion = true
	}
	if why := refuseSource(path.Dir(rel), source, version, hasVersion, files, allow); why != "" {
		return []string{fmt.Sprintf("%s:%d: module source %q is not allowed: %s", rel, line, source, why)}, nil
	}
	if isLocal(source) {
		return nil, nil
	}
	return nil, &remoteCall{file: rel, name: label(b), source: source}
}

// isLocal reports whether a module source is a path (inside the template, as
// refuseSource checks).
func isLocal(source string) bool {
	return strings.HasPrefix(source, "./") || strings.HasPrefix(source, "../")
}

// refuseSource says why a module source is refused, or "" when it is allowed.
// fileDir is the directory of the calling file, relative to the template dir.
// Everything that makes OpenTofu fetch code from somewhere we do not pin is
// refused: the pinned module digest would mean nothing otherwise.
func refuseSource(fileDir, source, version string, hasVersion bool, files map[string][]byte, allow Allowlist) string {
	switch {
	case strings.Contains(source, `\`):
		return "backslashes are refused"
	case isLocal(source):
		target := path.Join(fileDir, source)
		if target != moduleDir && !strings.HasPrefix(target, moduleDir+"/") {
			return "it points outside the template's module directory"
		}
		for name := range files {
			if strings.HasPrefix(name, target+"/") {
				return ""
			}
		}
		return "it points to a directory the template does not contain"
	case strings.HasPrefix(source, "/"):
		return "absolute paths are refused"
	case strings.HasPrefix(source, "git::"), strings.HasPrefix(source, "git://"), strings.HasPrefix(source, "git@"):
		return "remote git sources are refused"
	case strings.HasPrefix(source, "s3::"), strings.HasPrefix(source, "gcs::"):
		return "bucket sources are refused"
	case strings.Contains(source, "::"):
		return fmt.Sprintf("the %q getter is refused", source[:strings.Index(source, "::")+2])
	case strings.HasPrefix(source, "http://"):
		return "plain http sources are refused"
	case strings.HasPrefix(source, "https://"):
		return checkAllowlisted(source, version, hasVersion, allow, "https sources are refused unless listed in allowlist.yaml")
	case strings.Contains(source, "://"):
		return fmt.Sprintf("%s sources are refused", source[:strings.Index(source, "://")])
	case strings.HasPrefix(source, "github.com/"), strings.HasPrefix(source, "bitbucket.org/"):
		return "GitHub and Bitbucket shorthands fetch with git and are refused"
	case registryRe.MatchString(source):
		return checkAllowlisted(source, version, hasVersion, allow, "registry module is not in allowlist.yaml")
	default:
		return "it is neither a path inside the template nor an allowlisted registry module"
	}
}

// checkProviderBody refuses credential-looking attributes anywhere in a provider
// block, nested blocks included (assume_role { secret_key = ... }).
func checkProviderBody(rel, provider string, body *hclsyntax.Body) []string {
	var problems []string
	names := make([]string, 0, len(body.Attributes))
	for name := range body.Attributes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		lower := strings.ToLower(name)
		for _, w := range credentialWords {
			if strings.Contains(lower, w) {
				problems = append(problems, fmt.Sprintf("%s:%d: provider %q sets %s: templates never carry credentials (the runner's environment provides them)",
					rel, body.Attributes[name].NameRange.Start.Line, provider, name))
				break
			}
		}
	}
	for _, b := range body.Blocks {
		problems = append(problems, checkProviderBody(rel, provider, b.Body)...)
	}
	return problems
}

// literalString returns the value of a quoted string without interpolation: the
// source of a module must be readable without evaluating anything.
func literalString(expr hclsyntax.Expression) (string, bool) {
	t, ok := expr.(*hclsyntax.TemplateExpr)
	if !ok || !t.IsStringLiteral() {
		return "", false
	}
	v, diags := t.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return "", false
	}
	return v.AsString(), true
}
