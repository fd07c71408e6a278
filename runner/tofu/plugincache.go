package tofu

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"golang.org/x/mod/sumdb/dirhash"
)

// ParseLockFile reads the provider entries of a dependency lock file (.terraform.lock.hcl).
func ParseLockFile(data []byte) ([]Lock, error) {
	f, diags := hclsyntax.ParseConfig(data, ".terraform.lock.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parsing the lock file: %s", diags.Error())
	}
	var doc struct {
		Providers []struct {
			Source      string   `hcl:"source,label"`
			Version     string   `hcl:"version"`
			Constraints *string  `hcl:"constraints"`
			Hashes      []string `hcl:"hashes,optional"`
		} `hcl:"provider,block"`
		Rest hcl.Body `hcl:",remain"`
	}
	if diags := gohcl.DecodeBody(f.Body, nil, &doc); diags.HasErrors() {
		return nil, fmt.Errorf("reading the lock file: %s", diags.Error())
	}
	out := make([]Lock, 0, len(doc.Providers))
	for _, p := range doc.Providers {
		l := Lock{Source: p.Source, Version: p.Version, Hashes: p.Hashes}
		if p.Constraints != nil {
			l.Constraints = *p.Constraints
		}
		out = append(out, l)
	}
	return out, nil
}

// PluginCache prepares tofu's shared plugin cache (TF_PLUGIN_CACHE_DIR) for a job: one
// directory per dependency lock file, holding every provider that lock file selects,
// unpacked from the packed mirror once and verified against the lock file's hashes. Jobs
// mount it read-only, so `tofu init` links the providers instead of extracting and hashing
// the mirror's zips every run (about 0.4 s of a 50-resource plan): tofu checks the cached
// package against the lock file again and, finding it different, would have to write to the
// cache, which fails; nothing unverified is ever used.
//
// The directory is keyed by the lock file's sha256, so the runs of one template version
// share it, and a template version with other providers or hashes gets its own.
type PluginCache struct {
	Mirror   string // the packed mirror (BuildMirror)
	Root     string // where the cache directories are made
	Platform string // os_arch; ProviderPlatform when empty

	mu sync.Mutex // one preparation at a time in this process; the rename guards the rest
}

// ErrNotCached means the lock file selects a provider the mirror does not hold or whose
// package does not match it: the job runs without the cache and `tofu init` reports the
// problem in its own words.
var ErrNotCached = errors.New("not cacheable")

// Dir returns the cache directory for lockFile, preparing it on first use.
func (c *PluginCache) Dir(lockFile []byte) (string, error) {
	sum := sha256.Sum256(lockFile)
	dir := filepath.Join(c.Root, hex.EncodeToString(sum[:12]))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	locks, err := ParseLockFile(lockFile)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotCached, err)
	}
	if len(locks) == 0 {
		return "", fmt.Errorf("%w: the lock file selects no provider", ErrNotCached)
	}
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(c.Root, ".prepare-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone after the rename; cleans up after a failure
	platform := c.Platform
	if platform == "" {
		platform = ProviderPlatform
	}
	for _, l := range locks {
		if err := c.unpack(l, platform, tmp); err != nil {
			return "", err
		}
	}
	// Readable and traversable by a job's unused uid, writable by nobody but the owner.
	if err := filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			return os.Chmod(p, 0o755)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.Chmod(p, 0o644|info.Mode().Perm()&0o111)
		}
		return nil
	}); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another process prepared it meanwhile
		}
		return "", err
	}
	return dir, nil
}

// unpack extracts l's package for platform from the mirror into the cache layout
// <dir>/<source>/<version>/<platform>/, after checking that the zip and the extracted
// directory both have a hash the lock file lists.
func (c *PluginCache) unpack(l Lock, platform, dir string) error {
	parts := strings.Split(l.Source, "/")
	if len(parts) != 3 || slices.Contains(parts, "") || slices.Contains(parts, "..") || strings.ContainsAny(l.Version, `/\`) || l.Version == "" || l.Version == ".." {
		return fmt.Errorf("%w: provider %q %q is not a valid address and version", ErrNotCached, l.Source, l.Version)
	}
	zipPath := filepath.Join(c.Mirror, filepath.FromSlash(l.Source), fmt.Sprintf("terraform-provider-%s_%s_%s.zip", parts[2], l.Version, platform))
	zipHash, err := dirhash.HashZip(zipPath, dirhash.Hash1)
	if err != nil {
		return fmt.Errorf("%w: %s v%s: %w", ErrNotCached, l.Source, l.Version, err)
	}
	if !slices.Contains(l.Hashes, zipHash) {
		return fmt.Errorf("%w: the mirror's %s v%s (%s) is not one the lock file accepts", ErrNotCached, l.Source, l.Version, zipHash)
	}
	target := filepath.Join(dir, filepath.FromSlash(l.Source), l.Version, platform)
	if err := extract(zipPath, target); err != nil {
		return fmt.Errorf("extracting %s: %w", zipPath, err)
	}
	got, err := dirhash.HashDir(target, "", dirhash.Hash1)
	if err != nil {
		return err
	}
	if got != zipHash {
		return fmt.Errorf("%w: %s v%s extracted to %s, want %s", ErrNotCached, l.Source, l.Version, got, zipHash)
	}
	return nil
}

// extract writes the regular files of the zip at name under dir, refusing entries that
// would land outside it.
func extract(name, dir string) error {
	zr, err := zip.OpenReader(name)
	if err != nil {
		return err
	}
	defer zr.Close()
	for _, f := range zr.File {
		if !f.Mode().IsRegular() {
			continue
		}
		if !filepath.IsLocal(f.Name) {
			return fmt.Errorf("entry %q is outside the package", f.Name)
		}
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := extractFile(f, path); err != nil {
			return err
		}
	}
	return nil
}

func extractFile(f *zip.File, path string) error {
	r, err := f.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	mode := os.FileMode(0o644)
	if f.Mode()&0o111 != 0 {
		mode = 0o755
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
