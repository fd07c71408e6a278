package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// hashLen is how many hex digits of a file's digest its hashed name carries: enough that
// a changed file gets a new name, short enough to read in a URL.
const hashLen = 8

// Asset is one embedded file as it is served, read, digested and compressed once.
type Asset struct {
	// Name is the file's path in the FS, e.g. "css/gantry.css".
	Name string
	// Hashed is Name with a prefix of its digest before the extension,
	// e.g. "css/gantry.3f2a9c1b.css": a new version of the file is a new name, so a
	// browser may keep any version for as long as it likes.
	Hashed      string
	ContentType string
	Body        []byte
	// ETag is the strong validator of Body: its SHA-256, quoted.
	ETag string
	// Gzip is Body gzip-compressed, nil when that is not smaller; GzipETag is its own
	// strong validator (a strong validator names one representation, and the compressed
	// bytes are another one than Body).
	Gzip     []byte
	GzipETag string
}

// Assets are the files of one FS, found by plain or hashed name. Nothing changes them
// once Load has built them.
type Assets struct {
	byName   map[string]*Asset
	byHashed map[string]*Asset
}

// Load reads every file of fsys, digests it and compresses it.
func Load(fsys fs.FS) (*Assets, error) {
	a := &Assets{byName: map[string]*Asset{}, byHashed: map[string]*Asset{}}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		asset, err := newAsset(name, body)
		if err != nil {
			return err
		}
		a.byName[name] = asset
		a.byHashed[asset.Hashed] = asset
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading static assets: %w", err)
	}
	// A hashed name that is also a plain one would be served with two cache policies.
	for hashed := range a.byHashed {
		if _, ok := a.byName[hashed]; ok {
			return nil, fmt.Errorf("loading static assets: %s is both a file and another file's hashed name", hashed)
		}
	}
	return a, nil
}

func newAsset(name string, body []byte) (*Asset, error) {
	ext := path.Ext(name)
	contentType, ok := contentType(ext)
	if !ok {
		return nil, fmt.Errorf("%s: no content type for %q files (add it to contentType)", name, ext)
	}
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	a := &Asset{
		Name:        name,
		Hashed:      strings.TrimSuffix(name, ext) + "." + digest[:hashLen] + ext,
		ContentType: contentType,
		Body:        body,
		ETag:        `"` + digest + `"`,
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(body); err != nil {
		return nil, fmt.Errorf("compressing %s: %w", name, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing %s: %w", name, err)
	}
	if buf.Len() < len(body) {
		a.Gzip = buf.Bytes()
		gz := sha256.Sum256(a.Gzip)
		a.GzipETag = `"` + hex.EncodeToString(gz[:]) + `"`
	}
	return a, nil
}

// contentType is the Content-Type of the file extensions Gantry ships. It is written
// here rather than asked of mime.TypeByExtension, whose answer depends on the host's
// mime.types files; a new kind of file must be added on purpose.
func contentType(ext string) (string, bool) {
	switch ext {
	case ".css":
		return "text/css; charset=utf-8", true
	case ".js":
		return "text/javascript; charset=utf-8", true
	case ".svg":
		return "image/svg+xml", true
	}
	return "", false
}

// Lookup finds the asset name names: by its hashed name (hashed is true) or by its plain
// name. A hashed name of an earlier version of a file is found by neither.
func (a *Assets) Lookup(name string) (asset *Asset, hashed, ok bool) {
	if asset, ok := a.byHashed[name]; ok {
		return asset, true, true
	}
	asset, ok = a.byName[name]
	return asset, false, ok
}

// Hashed is the hashed name of the file named name. A name that is not a file of the
// FS is a programming error (the names are this package's constants), so it panics.
func (a *Assets) Hashed(name string) string {
	asset, ok := a.byName[name]
	if !ok {
		panic(fmt.Sprintf("static: %q is not an embedded file", name))
	}
	return asset.Hashed
}

// embedded is FS, loaded once as the program starts: the table the layout's links and
// the /static/ handler share, never changed afterwards.
var embedded = mustLoad(FS)

func mustLoad(fsys fs.FS) *Assets {
	a, err := Load(fsys)
	if err != nil {
		panic(err)
	}
	// A vendored file renamed (a new version) without its constant fails here, at start,
	// rather than on the first page.
	for _, name := range []string{HTMX, HTMXSSE, CSS, Favicon, FormsJS, NavJS, CopyJS} {
		if _, _, ok := a.Lookup(name); !ok {
			panic(fmt.Sprintf("static: %s is named but not embedded", name))
		}
	}
	return a
}

// Embedded are the embedded files, as served under /static/.
func Embedded() *Assets { return embedded }

// Hashed is the hashed name of the embedded file name (one of this package's constants):
// what pages link to.
func Hashed(name string) string { return embedded.Hashed(name) }
