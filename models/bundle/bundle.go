// Package bundle is the config bundle a run plans and applies: the generated root
// module, the template's module tree and its provider lock file, as one deterministic
// tar archive whose sha256 is the bundle digest the approval binds to.
package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// Bundle maps slash-separated relative paths to file contents.
type Bundle struct {
	Files map[string][]byte
}

// maxSize bounds what FromTar accepts: a config bundle is source code, not data.
const maxSize = 32 << 20

// epoch is the modification time of every entry, so equal files give equal bytes.
var epoch = time.Unix(0, 0).UTC()

// Tar encodes the bundle deterministically (sorted paths, fixed times, modes and
// owners) and returns the archive and its sha256 digest ("sha256:<hex>").
func (b Bundle) Tar() ([]byte, string, error) {
	names := make([]string, 0, len(b.Files))
	for name := range b.Files {
		if err := checkPath(name); err != nil {
			return nil, "", err
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		body := b.Files[name]
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, "", fmt.Errorf("writing bundle: %w", err)
		}
		if _, err := tw.Write(body); err != nil {
			return nil, "", fmt.Errorf("writing bundle: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", fmt.Errorf("writing bundle: %w", err)
	}
	return buf.Bytes(), Digest(buf.Bytes()), nil
}

// Digest is the sha256 of data in the form Gantry records everywhere.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// FromTar decodes an archive written by Tar. It refuses anything but regular files
// with clean relative paths, so a bundle can never write outside its directory.
func FromTar(data []byte) (Bundle, error) {
	if len(data) > maxSize {
		return Bundle{}, fmt.Errorf("bundle is %d bytes, more than %d", len(data), maxSize)
	}
	b := Bundle{Files: map[string][]byte{}}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return Bundle{}, fmt.Errorf("reading bundle: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return Bundle{}, fmt.Errorf("bundle entry %q is not a regular file", hdr.Name)
		}
		if err := checkPath(hdr.Name); err != nil {
			return Bundle{}, err
		}
		body, err := io.ReadAll(io.LimitReader(tr, maxSize))
		if err != nil {
			return Bundle{}, fmt.Errorf("reading bundle entry %s: %w", hdr.Name, err)
		}
		b.Files[hdr.Name] = body
	}
}

func checkPath(name string) error {
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "\\") {
		return fmt.Errorf("bundle path %q is not a clean relative path", name)
	}
	return nil
}

// Short abbreviates a digest for display ("sha256:0123456789a…"; "—" for none); the
// full one is shown beside it.
func Short(digest string) string {
	if len(digest) > 19 {
		return digest[:19] + "…"
	}
	if digest == "" {
		return "—"
	}
	return digest
}
