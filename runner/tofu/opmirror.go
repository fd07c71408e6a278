package tofu

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// ProviderMirror is where the operator serves the providers templates use besides the
// sandbox provider, which always comes from the built-in mirror: a filesystem mirror (a
// directory `tofu providers mirror` filled), an https network mirror (the provider network
// mirror protocol), or the public registry. The zero value is none: the built-in offline
// mirror alone, as in development and tests. Whatever the source, `tofu init
// -lockfile=readonly` installs only what a template's lock file pins, with its hashes.
type ProviderMirror struct {
	Dir      string // an absolute directory
	URL      string // an https URL ending in "/"
	Registry bool   // the providers' origin registries (registry.opentofu.org)
}

// RegistryMirror is the value of --provider-mirror that installs from the registries.
const RegistryMirror = "registry"

// ErrProviderMirror is a --provider-mirror value that cannot be used.
var ErrProviderMirror = errors.New("provider mirror")

// ParseProviderMirror reads and checks the operator's mirror setting: "" (none), "registry",
// an https:// URL, or a directory that exists and can be read. A relative directory is made
// absolute (tofu would resolve it against each job's working directory).
func ParseProviderMirror(value string) (ProviderMirror, error) {
	switch {
	case value == "":
		return ProviderMirror{}, nil
	case value == RegistryMirror:
		return ProviderMirror{Registry: true}, nil
	case strings.Contains(value, "://"):
		return parseMirrorURL(value)
	}
	dir, err := filepath.Abs(value)
	if err != nil {
		return ProviderMirror{}, fmt.Errorf("%w %s: %v", ErrProviderMirror, value, err)
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return ProviderMirror{}, fmt.Errorf("%w %s: no such directory (fill one with `tofu providers mirror %s` where the registry is reachable, or give an https:// network mirror URL)", ErrProviderMirror, dir, dir)
	case err != nil:
		return ProviderMirror{}, fmt.Errorf("%w %s: %v", ErrProviderMirror, dir, err)
	case !st.IsDir():
		return ProviderMirror{}, fmt.Errorf("%w %s: not a directory (a filesystem mirror is a directory of <hostname>/<namespace>/<type>/...)", ErrProviderMirror, dir)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return ProviderMirror{}, fmt.Errorf("%w %s: cannot be read: %v", ErrProviderMirror, dir, err)
	}
	return ProviderMirror{Dir: dir}, nil
}

// parseMirrorURL accepts an https URL with a host and no credentials, query or fragment,
// and ends its path with "/": tofu resolves "<hostname>/<namespace>/<type>/index.json"
// against it, which would drop a last path segment without the slash.
func parseMirrorURL(value string) (ProviderMirror, error) {
	u, err := url.Parse(value)
	switch {
	case err != nil:
		return ProviderMirror{}, fmt.Errorf("%w %q: %v", ErrProviderMirror, value, err)
	case u.Scheme != "https":
		return ProviderMirror{}, fmt.Errorf("%w %q: a network mirror must be an https:// URL (tofu refuses any other scheme)", ErrProviderMirror, value)
	case u.Host == "":
		return ProviderMirror{}, fmt.Errorf("%w %q: the URL has no host", ErrProviderMirror, value)
	case u.User != nil:
		// A password in a flag shows in the process list and in the CLI configuration.
		return ProviderMirror{}, fmt.Errorf("%w: the URL must not carry credentials", ErrProviderMirror)
	case u.RawQuery != "" || u.Fragment != "":
		return ProviderMirror{}, fmt.Errorf("%w %q: the URL must have no query or fragment", ErrProviderMirror, value)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return ProviderMirror{URL: u.String()}, nil
}

// String is the setting as it was given, for logs ("" for none).
func (m ProviderMirror) String() string {
	switch {
	case m.Registry:
		return RegistryMirror
	case m.URL != "":
		return m.URL
	}
	return m.Dir
}
