package tofu

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/mod/sumdb/dirhash"
)

// zipTime is the modification time of every mirror zip entry: fixed, so that building the same
// provider twice gives the same bytes. 1980-01-01 is the earliest time a zip (MS-DOS) header holds.
var zipTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// Lock is one provider's entry in a dependency lock file (.terraform.lock.hcl).
type Lock struct {
	Source      string   // provider source address, "portal.local/sandbox/sandbox"
	Version     string   // the selected version, "0.1.0"
	Constraints string   // the configuration's version constraints, as tofu normalises them; omitted when empty
	Hashes      []string // package checksums, "h1:..."
}

// BuildMirror puts providerBinary into mirrorDir in the packed layout of a filesystem mirror,
//
//	<mirrorDir>/<hostname>/<namespace>/<type>/terraform-provider-<type>_<version>_<platform>.zip
//
// holding the single file terraform-provider-<type>_v<version> (mode 0755), and returns the lock
// entry that accepts it. source is "hostname/namespace/type" and platform is "os_arch", as in
// "linux_amd64".
//
// The packed layout rather than the unpacked one: `tofu init` extracts a real copy of a zip into
// .terraform, whereas for an unpacked mirror it symlinks to the mirror's absolute path, which
// breaks once the workspace is used where the mirror is mounted elsewhere (in a container).
//
// The zip is deterministic (fixed times and modes, entries in name order), so the same binary
// always gives the same bytes. The lock's "h1:" hash covers the zip's contents, not its bytes
// (dirhash.Hash1 of the files inside, the same value as for the unpacked directory), and the
// constraints are the exact version: the configuration must require `version = "<version>"`.
func BuildMirror(providerBinary, mirrorDir, source, version, platform string) (Lock, error) {
	parts := strings.Split(source, "/")
	if len(parts) != 3 || slices.Contains(parts, "") || slices.Contains(parts, "..") {
		return Lock{}, fmt.Errorf("provider source %q is not hostname/namespace/type", source)
	}
	if version == "" || strings.ContainsAny(version, `/\_`) {
		return Lock{}, fmt.Errorf("provider version %q is not valid", version)
	}
	if goos, goarch, ok := strings.Cut(platform, "_"); !ok || goos == "" || goarch == "" {
		return Lock{}, fmt.Errorf("platform %q is not os_arch", platform)
	}
	typ := parts[2]

	binary, err := os.ReadFile(providerBinary)
	if err != nil {
		return Lock{}, fmt.Errorf("reading the provider binary: %w", err)
	}
	files := map[string][]byte{
		fmt.Sprintf("terraform-provider-%s_v%s", typ, version): binary,
	}
	dir := filepath.Join(mirrorDir, filepath.FromSlash(source))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Lock{}, fmt.Errorf("creating the mirror: %w", err)
	}
	name := filepath.Join(dir, fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, version, platform))
	if err := writeZip(name, files); err != nil {
		return Lock{}, fmt.Errorf("writing %s: %w", name, err)
	}
	hash, err := dirhash.HashZip(name, dirhash.Hash1)
	if err != nil {
		return Lock{}, fmt.Errorf("hashing %s: %w", name, err)
	}
	return Lock{Source: source, Version: version, Constraints: version, Hashes: []string{hash}}, nil
}

// writeZip writes files into a deterministic zip at name, atomically: readers see the old zip or
// the new one, never a partial one.
func writeZip(name string, files map[string][]byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".mirror-*.zip")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up after a failure

	zw := zip.NewWriter(tmp)
	for _, entry := range slices.Sorted(maps.Keys(files)) {
		hdr := &zip.FileHeader{Name: entry, Method: zip.Deflate, Modified: zipTime}
		hdr.SetMode(0o755)
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			tmp.Close()
			return err
		}
		if _, err := io.Copy(w, bytes.NewReader(files[entry])); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := zw.Close(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// File renders a .terraform.lock.hcl holding just this provider, byte for byte as `tofu init`
// writes it, so `tofu init -lockfile=readonly` accepts it unchanged.
func (l Lock) File() []byte { return LockFile(l) }

// LockFile renders a .terraform.lock.hcl for several providers in tofu's normalised form:
// its two comment lines, then one block per provider ordered by hostname, namespace and type,
// with the hashes sorted and de-duplicated.
func LockFile(locks ...Lock) []byte {
	locks = slices.Clone(locks)
	slices.SortFunc(locks, func(a, b Lock) int {
		// tofu orders providers by their address parts, which is not always the string order.
		return slices.Compare(strings.Split(a.Source, "/"), strings.Split(b.Source, "/"))
	})

	var b bytes.Buffer
	b.WriteString("# This file is maintained automatically by \"tofu init\".\n")
	b.WriteString("# Manual edits may be lost in future updates.\n")
	for _, l := range locks {
		fmt.Fprintf(&b, "\nprovider %s {\n", hclString(l.Source))
		if l.Constraints != "" {
			fmt.Fprintf(&b, "  version     = %s\n", hclString(l.Version))
			fmt.Fprintf(&b, "  constraints = %s\n", hclString(l.Constraints))
		} else {
			fmt.Fprintf(&b, "  version = %s\n", hclString(l.Version))
		}
		if hashes := slices.Compact(slices.Sorted(slices.Values(l.Hashes))); len(hashes) > 0 {
			b.WriteString("  hashes = [\n")
			for _, h := range hashes {
				fmt.Fprintf(&b, "    %s,\n", hclString(h))
			}
			b.WriteString("  ]\n")
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// hclString is s as an HCL string literal, escaped the way hclwrite (and so tofu) escapes it,
// template sequences included.
func hclString(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}
