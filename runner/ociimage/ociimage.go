// Package ociimage writes container images without a registry or a daemon: one layer built
// from a list of files, packed as an OCI image layout tar (oci-layout, index.json and
// blobs/sha256/...) that `ctr images import` reads. Gantry's images (the test cluster's pause
// image, the Kubernetes runner image) are built this way from binaries it compiles itself, so
// nothing is ever pulled.
//
// The output is deterministic: the same files give the same digests (entries sorted, times
// zero, owner root), so importing an unchanged image again is a no-op for containerd.
package ociimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Media types and annotations of the OCI image spec (and containerd's name annotation).
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"

	// AnnotationImageName is how `ctr images import` names the image it imports.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is the OCI layout's own reference (the tag).
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// File is one entry of the image's only layer.
type File struct {
	// Path inside the image, absolute or not ("/bin/tofu", "etc/passwd"). Parent directories
	// are implied (0755) unless listed themselves.
	Path string
	// Mode: permission bits for a regular file (0 means 0644, or the Source file's own bits),
	// fs.ModeDir for a directory (0 bits mean 0755), fs.ModeSymlink for a symbolic link
	// whose target is Data.
	Mode fs.FileMode
	// Data is the content. When nil, Source names a host file whose content is copied.
	Data   []byte
	Source string
}

// Image is a single-layer linux/amd64 image.
type Image struct {
	Name                 string // "gantry.local/runner:<tag>": the index annotation names the image by it
	Files                []File
	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
	Labels               map[string]string
	Architecture, OS     string // default amd64, linux
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// WriteLayout writes img as an OCI image layout tar to w and returns the manifest's digest
// ("sha256:..."). Source files are read twice (once to hash the layer, once to write it): a
// file that changes in between makes it fail rather than write a layout whose digests lie.
func (img Image) WriteLayout(w io.Writer) (manifestDigest string, err error) {
	if img.Name == "" {
		return "", fmt.Errorf("image has no name")
	}
	entries, err := img.entries()
	if err != nil {
		return "", err
	}
	// First pass: the layer's digest and size, which its tar header and the config need.
	h := sha256.New()
	n := &countingWriter{w: h}
	if err := writeLayer(n, entries); err != nil {
		return "", fmt.Errorf("hashing the layer of %s: %w", img.Name, err)
	}
	layer := descriptor{MediaType: MediaTypeLayer, Digest: digestOf(h), Size: n.n}

	arch, goos := img.Architecture, img.OS
	if arch == "" {
		arch = "amd64"
	}
	if goos == "" {
		goos = "linux"
	}
	config, err := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           goos,
		"config": map[string]any{
			"Entrypoint": img.Entrypoint, "Cmd": img.Cmd, "Env": img.Env,
			"User": img.User, "WorkingDir": img.WorkingDir, "Labels": img.Labels,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.Digest}},
	})
	if err != nil {
		return "", err
	}
	configDesc := descriptor{MediaType: MediaTypeConfig, Digest: digestBytes(config), Size: int64(len(config))}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaTypeManifest,
		"config":        configDesc,
		"layers":        []descriptor{layer},
	})
	if err != nil {
		return "", err
	}
	manifestDesc := descriptor{MediaType: MediaTypeManifest, Digest: digestBytes(manifest), Size: int64(len(manifest)),
		Annotations: map[string]string{AnnotationImageName: img.Name, AnnotationRefName: tagOf(img.Name)},
		Platform:    &platform{Architecture: arch, OS: goos}}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaTypeIndex,
		"manifests":     []descriptor{manifestDesc},
	})
	if err != nil {
		return "", err
	}

	tw := tar.NewWriter(w)
	if err := addDir(tw, "blobs/"); err != nil {
		return "", err
	}
	if err := addDir(tw, "blobs/sha256/"); err != nil {
		return "", err
	}
	// Second pass: the layer itself, checked against the first.
	if err := tw.WriteHeader(&tar.Header{Name: blobPath(layer.Digest), Mode: 0o644, Size: layer.Size, Format: tar.FormatPAX}); err != nil {
		return "", err
	}
	h2 := sha256.New()
	if err := writeLayer(io.MultiWriter(tw, h2), entries); err != nil {
		return "", fmt.Errorf("writing the layer of %s: %w", img.Name, err)
	}
	if got := digestOf(h2); got != layer.Digest {
		return "", fmt.Errorf("writing the layer of %s: a source file changed while it was written", img.Name)
	}
	for _, blob := range [][]byte{config, manifest} {
		if err := addFile(tw, blobPath(digestBytes(blob)), blob); err != nil {
			return "", err
		}
	}
	if err := addFile(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return "", err
	}
	if err := addFile(tw, "index.json", index); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return manifestDesc.Digest, nil
}

// WriteLayoutFile writes the layout tar to a new file at name.
func (img Image) WriteLayoutFile(name string) (manifestDigest string, err error) {
	f, err := os.Create(name)
	if err != nil {
		return "", err
	}
	digest, err := img.WriteLayout(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return digest, nil
}

// entry is one layer entry with its parents made explicit.
type entry struct {
	name string // relative, no leading slash; directories end in "/"
	file File
}

// entries cleans and sorts the files, adding the implied parent directories and refusing
// duplicates and paths that leave the root.
func (img Image) entries() ([]entry, error) {
	byName := map[string]entry{}
	for _, f := range img.Files {
		clean := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if clean == "" || clean == "." {
			return nil, fmt.Errorf("image %s: file with an empty path", img.Name)
		}
		name := clean
		if f.Mode.IsDir() {
			name += "/"
		}
		if _, dup := byName[name]; dup {
			return nil, fmt.Errorf("image %s: %s listed twice", img.Name, f.Path)
		}
		byName[name] = entry{name: name, file: f}
		for dir := path.Dir(clean); dir != "."; dir = path.Dir(dir) {
			if _, ok := byName[dir+"/"]; !ok {
				byName[dir+"/"] = entry{name: dir + "/", file: File{Path: dir, Mode: fs.ModeDir}}
			}
		}
	}
	out := make([]entry, 0, len(byName))
	for _, e := range byName {
		if !e.file.Mode.IsDir() {
			if _, clash := byName[e.name+"/"]; clash {
				return nil, fmt.Errorf("image %s: %s is both a file and a directory", img.Name, e.name)
			}
		}
		out = append(out, e)
	}
	// Sorted by name: a parent ("a/") sorts before its children ("a/b").
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// writeLayer writes the layer tar of entries to w.
func writeLayer(w io.Writer, entries []entry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		f := e.file
		hdr := &tar.Header{Name: e.name, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case f.Mode.IsDir():
			hdr.Typeflag, hdr.Mode = tar.TypeDir, int64(f.Mode.Perm())|tarModeBits(f.Mode)
			if f.Mode.Perm() == 0 {
				hdr.Mode |= 0o755
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Mode, hdr.Linkname = tar.TypeSymlink, 0o777, string(f.Data)
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		default:
			if err := writeRegular(tw, hdr, f); err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
		}
	}
	return tw.Close()
}

// writeRegular writes one regular file, from Data or from its Source.
func writeRegular(tw *tar.Writer, hdr *tar.Header, f File) error {
	hdr.Typeflag = tar.TypeReg
	hdr.Mode = int64(f.Mode.Perm()) | tarModeBits(f.Mode)
	if f.Data != nil || f.Source == "" {
		if f.Mode.Perm() == 0 {
			hdr.Mode |= 0o644
		}
		hdr.Size = int64(len(f.Data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(f.Data)
		return err
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("source %s is not a regular file", f.Source)
	}
	if f.Mode.Perm() == 0 {
		hdr.Mode |= int64(info.Mode().Perm())
	}
	hdr.Size = info.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// Exactly Size bytes: a file that grew is cut here and caught by the digest check.
	if _, err := io.CopyN(tw, src, hdr.Size); err != nil {
		return err
	}
	return nil
}

// tarModeBits maps Go's setuid, setgid and sticky bits to tar's.
func tarModeBits(m fs.FileMode) int64 {
	var bits int64
	if m&fs.ModeSetuid != 0 {
		bits |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		bits |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		bits |= 0o1000
	}
	return bits
}

func addDir(tw *tar.Writer, name string) error {
	return tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX})
}

func addFile(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// tagOf returns the tag of a reference ("latest" without one).
func tagOf(ref string) string {
	name := ref
	if i := strings.LastIndex(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[i+1:]
	}
	return "latest"
}

func blobPath(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func digestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
