package catalog

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// entry is one archive entry for the builders below.
type entry struct {
	name, body, link string
	kind             byte // a tar type flag; zip: TypeDir, TypeSymlink or TypeReg
}

func tgz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		kind := e.kind
		if kind == 0 {
			kind = tar.TypeReg
		}
		hdr := &tar.Header{Name: e.name, Typeflag: kind, Mode: 0o644, Linkname: e.link}
		if kind == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if kind == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

func zipped(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		switch e.kind {
		case tar.TypeDir:
			h.SetMode(fs.ModeDir | 0o755)
		case tar.TypeSymlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			e.body = e.link
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		require.NoError(t, err)
		_, err = w.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

const tf = "output \"x\" {\n  value = 1\n}\n"

// TestUnpackRules: both formats unpack to clean relative paths; every way out of the
// archive, every link and device, and anything over the bounds refuses the archive.
func TestUnpackRules(t *testing.T) {
	t.Parallel()
	good := []entry{{name: "./", kind: tar.TypeDir}, {name: "./main.tf", body: tf}, {name: "sub/", kind: tar.TypeDir}, {name: "sub/a.tf", body: tf}}
	for name, data := range map[string][]byte{"tar.gz": tgz(t, good...), "zip": zipped(t, good...)} {
		files, err := unpack(data)
		require.NoError(t, err, name)
		require.Equal(t, map[string][]byte{"main.tf": []byte(tf), "sub/a.tf": []byte(tf)}, files, name)
	}
	many := make([]entry, maxArchiveFiles+1)
	for i := range many {
		many[i] = entry{name: strings.Repeat("d/", i%7) + "f" + strings.Repeat("x", i) + ".tf", body: "#"}
	}
	big := strings.Repeat("#", maxUnpackedBytes/2+1)
	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"tar zip slip":      {tgz(t, entry{name: "../evil.tf", body: tf}), `the archive entry "../evil.tf" leaves the archive (..)`},
		"tar inner slip":    {tgz(t, entry{name: "a/../../evil.tf", body: tf}), `the archive entry "a/../../evil.tf" leaves the archive (..)`},
		"zip zip slip":      {zipped(t, entry{name: "../../etc/cron.d/x", body: "x"}), `the archive entry "../../etc/cron.d/x" leaves the archive (..)`},
		"tar absolute":      {tgz(t, entry{name: "/etc/passwd", body: "x"}), `the archive entry "/etc/passwd" is an absolute path`},
		"zip backslash":     {zipped(t, entry{name: `..\evil.tf`, body: tf}), `the archive entry "..\\evil.tf" has a backslash`},
		"tar symlink":       {tgz(t, entry{name: "main.tf", kind: tar.TypeSymlink, link: "/etc/passwd"}), `the archive entry "main.tf" is a symbolic link: only regular files and directories are accepted`},
		"zip symlink":       {zipped(t, entry{name: "main.tf", kind: tar.TypeSymlink, link: "/etc/passwd"}), `the archive entry "main.tf" is a symbolic link: only regular files and directories are accepted`},
		"tar hard link":     {tgz(t, entry{name: "main.tf", kind: tar.TypeLink, link: "/etc/passwd"}), `the archive entry "main.tf" is a hard link`},
		"tar device":        {tgz(t, entry{name: "null", kind: tar.TypeChar}), `the archive entry "null" is a device`},
		"tar fifo":          {tgz(t, entry{name: "pipe", kind: tar.TypeFifo}), `the archive entry "pipe" is a FIFO`},
		"tar twice":         {tgz(t, entry{name: "main.tf", body: tf}, entry{name: "./main.tf", body: "#"}), "the archive holds main.tf twice"},
		"too many files":    {tgz(t, many...), "the archive holds more than 1000 files"},
		"too many bytes":    {tgz(t, entry{name: "a.tf", body: big}, entry{name: "b.tf", body: big}), "the archive unpacks to more than 16777216 bytes"},
		"too large":         {append([]byte{0x1f, 0x8b}, make([]byte, MaxArchiveBytes)...), "the archive is 8388610 bytes, more than 8388608"},
		"xz tar":            {[]byte("\xfd7zXZ\x00rest"), "the archive is neither a zip nor a gzip-compressed tar archive (Gantry reads only these two)"},
		"plain tar":         {[]byte("main.tf\x00\x00\x00"), "neither a zip nor a gzip-compressed tar archive"},
		"gzip, not a tar":   {gzipOf(t, "hello"), "reading the tar archive: unexpected EOF"},
		"file without name": {tgz(t, entry{name: ".", body: "x"}), `the archive entry "." is a file without a name`},
	} {
		_, err := unpack(tc.data)
		require.ErrorContains(t, err, tc.want, name)
	}
}

func gzipOf(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// TestModuleDirs: a //subdir is the module; what it calls, transitively, is loaded;
// an examples/ directory calling the registry is not, so it is neither checked nor
// bundled; a call leaving the archive or of another remote module is refused.
func TestModuleDirs(t *testing.T) {
	t.Parallel()
	pkg := map[string][]byte{
		"modules/vpc/main.tf":    []byte("module \"sub\" {\n  source = \"../subnet\"\n}\n"),
		"modules/subnet/main.tf": []byte(tf),
		"examples/x/main.tf":     []byte("module \"v\" {\n  source  = \"acme/vpc/aws\"\n  version = \"1.0.0\"\n}\n"),
		"README.md":              []byte("#"),
	}
	loaded, err := moduleDirs(pkg, "modules/vpc")
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"modules/vpc": true, "modules/subnet": true}, loaded)

	_, err = moduleDirs(pkg, "examples/x")
	require.EqualError(t, err, `examples/x/main.tf:2: module "v" calls "acme/vpc/aws": a fetched module may call only directories of its own archive`)
	_, err = moduleDirs(map[string][]byte{"main.tf": []byte("module \"up\" {\n  source = \"../outside\"\n}\n")}, ".")
	require.EqualError(t, err, `main.tf: module source "../outside" leaves the module's archive`)
	_, err = moduleDirs(pkg, "modules/missing")
	require.EqualError(t, err, "the archive has no .tf files in modules/missing")
	_, err = moduleDirs(pkg, ".")
	require.EqualError(t, err, "the archive has no .tf files in its root")
}

func TestSourceNames(t *testing.T) {
	t.Parallel()
	for source, want := range map[string][2]string{
		"registry.example/acme/vpc/aws":                  {"registry.example/acme/vpc/aws", ""},
		"registry.example/acme/vpc/aws//modules/subnet":  {"registry.example/acme/vpc/aws", "modules/subnet"},
		"https://modules.example/vpc.zip":                {"https://modules.example/vpc.zip", ""},
		"https://modules.example/vpc.zip//modules/a":     {"https://modules.example/vpc.zip", "modules/a"},
		"https://modules.example/vpc.zip//a?archive=zip": {"https://modules.example/vpc.zip?archive=zip", "a"},
	} {
		pkg, subdir := splitSubdir(source)
		require.Equal(t, want, [2]string{pkg, subdir}, source)
	}
	require.Equal(t, "./.modules/x", relativePath("module", "module/.modules/x"))
	require.Equal(t, "../../.modules/x/sub", relativePath("module/a/b", "module/.modules/x/sub"))
	require.Equal(t, "modules.example-vpc.zip-archive-zip-0123456789ab",
		packageName("https://modules.example/vpc.zip//a?archive=zip", "sha256:0123456789abcdef"))
}

// TestVendoredLabelsArchiveIsItsSource: the archive the catalog ships holds exactly
// catalog/modules/labels/, so what reviewers read is what runs.
func TestVendoredLabelsArchiveIsItsSource(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../catalog/modules/labels-1.0.0.tar.gz")
	require.NoError(t, err)
	files, err := unpack(data)
	require.NoError(t, err)
	src := os.DirFS("../../catalog/modules/labels")
	want := map[string][]byte{}
	require.NoError(t, fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want[p], err = fs.ReadFile(src, p)
		return err
	}))
	require.Equal(t, want, files)
}
