package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gantry/runner/ociimage"
	"gantry/runner/tofu"
)

// ImageRepository is the runner image's name; its tag is a digest of its content.
const ImageRepository = "gantry.local/runner"

// RunnerImage is the runner image: the pinned tofu, gantry-phase, the packed provider
// mirror with a CLI configuration that installs only from it, the providers of every
// lock file in locks already unpacked and verified (the read-only plugin cache, so
// `tofu init` links them), the mount points and an /etc/passwd naming the runner uid.
// Its tag is the sha256 of its files (paths, modes and contents), so the same
// toolchain always makes the same name and a changed one a new name: pods name it by
// that tag and never pull it.
func RunnerImage(tc tofu.Toolchain, phase string, locks [][]byte) (ociimage.Image, error) {
	files := []ociimage.File{
		{Path: ImageTofu, Mode: 0o755, Source: tc.Tofu},
		{Path: ImagePhase, Mode: 0o755, Source: phase},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nrunner:x:%d:%d:runner:%s:/sbin/nologin\n", RunnerUID, RunnerUID, WorkMount))},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:\nrunner:x:%d:\n", RunnerUID))},
		{Path: WorkMount, Mode: fs.ModeDir | 0o755},
		{Path: SecretMount, Mode: fs.ModeDir | 0o755},
		{Path: "/tmp", Mode: fs.ModeDir | 0o1777},
	}
	mirror, err := treeFiles(tc.Mirror, ImageMirror, false)
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("runner image: the provider mirror: %w", err)
	}
	files = append(files, mirror...)
	tmp, err := os.MkdirTemp("", "gantry-runner-image-")
	if err != nil {
		return ociimage.Image{}, err
	}
	defer os.RemoveAll(tmp)
	cliConfig := filepath.Join(tmp, "tofurc.hcl")
	if err := tofu.WriteCLIConfig(cliConfig, ImageMirror); err != nil {
		return ociimage.Image{}, err
	}
	data, err := os.ReadFile(cliConfig)
	if err != nil {
		return ociimage.Image{}, err
	}
	files = append(files, ociimage.File{Path: ImageCLIConfig, Mode: 0o644, Data: data})
	// The plugin cache is made here and read into the image now: its directory goes away.
	cache := &tofu.PluginCache{Mirror: tc.Mirror, Root: filepath.Join(tmp, "plugins")}
	cached := 0
	for _, lock := range locks {
		_, err := cache.Dir(lock)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// A provider this toolchain did not publish (terraform-provider-kubernetes is
			// built on demand): the image holds no cache for that lock file, and a job of
			// its template fails at init, naming the provider. A package that does not
			// match its lock file still fails the image.
			continue
		case err != nil:
			return ociimage.Image{}, fmt.Errorf("runner image: the plugin cache: %w", err)
		}
		cached++
	}
	if cached > 0 {
		plugins, err := treeFiles(cache.Root, ImagePlugins, true)
		if err != nil {
			return ociimage.Image{}, fmt.Errorf("runner image: the plugin cache: %w", err)
		}
		files = append(files, plugins...)
	}
	tag, err := contentTag(files)
	if err != nil {
		return ociimage.Image{}, err
	}
	return ociimage.Image{Name: ImageRepository + ":" + tag, Files: files, Entrypoint: []string{ImagePhase},
		User: strconv.Itoa(RunnerUID) + ":" + strconv.Itoa(RunnerUID), WorkingDir: WorkMount}, nil
}

// treeFiles are the regular files under dir as image files under at (hidden ones, such
// as BuildMirror's temporaries, skipped), executable bits kept; load reads them into
// memory (their directory is temporary).
func treeFiles(dir, at string, load bool) ([]ociimage.File, error) {
	var out []ociimage.File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := ociimage.File{Path: path.Join(at, filepath.ToSlash(rel)), Mode: 0o644 | info.Mode().Perm()&0o111, Source: p}
		if load {
			if f.Data, err = os.ReadFile(p); err != nil {
				return err
			}
			f.Source = ""
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// contentTag is the first 16 hex digits of a sha256 over the files' paths, modes and
// contents, in path order.
func contentTag(files []ociimage.File) (string, error) {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b ociimage.File) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, f := range sorted {
		fmt.Fprintf(h, "%s\x00%o\x00", f.Path, uint32(f.Mode))
		switch {
		case f.Data != nil:
			h.Write(f.Data)
		case f.Source != "":
			src, err := os.Open(f.Source)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, src)
			src.Close()
			if err != nil {
				return "", err
			}
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// CatalogLocks are the distinct lock files of a catalog's templates
// (templates/<name>/.terraform.lock.hcl): the runner image unpacks their providers.
func CatalogLocks(catalog fs.FS) ([][]byte, error) {
	var out [][]byte
	err := fs.WalkDir(catalog, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != ".terraform.lock.hcl" {
			return err
		}
		data, err := fs.ReadFile(catalog, p)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(out, func(b []byte) bool { return string(b) == string(data) }) {
			out = append(out, data)
		}
		return nil
	})
	return out, err
}
