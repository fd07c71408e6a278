package ociimage_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/runner/ociimage"
)

// readTar returns a tar's regular files and the names of its entries in order.
func readTar(t *testing.T, data []byte) (files map[string][]byte, headers []*tar.Header) {
	t.Helper()
	files = map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		require.NoError(t, err)
		headers = append(headers, hdr)
		if hdr.Typeflag == tar.TypeReg {
			body, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[hdr.Name] = body
		}
	}
}

type desc struct {
	MediaType   string
	Digest      string
	Size        int64
	Annotations map[string]string
}

// blob returns the blob a descriptor names, checking its digest and size.
func blob(t *testing.T, files map[string][]byte, d desc) []byte {
	t.Helper()
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, d.Digest)
	data, ok := files["blobs/sha256/"+d.Digest[len("sha256:"):]]
	require.True(t, ok, "blob %s missing", d.Digest)
	sum := sha256.Sum256(data)
	require.Equal(t, d.Digest, "sha256:"+hex.EncodeToString(sum[:]), "blob content does not match its digest")
	require.Equal(t, d.Size, int64(len(data)))
	return data
}

func TestWriteLayoutIsAValidLayout(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tool")
	require.NoError(t, os.WriteFile(src, []byte("#!/bin/true\n"), 0o750))
	img := ociimage.Image{
		Name: "gantry.local/test:v1",
		Files: []ociimage.File{
			{Path: "/bin/tool", Source: src},
			{Path: "etc/hello", Data: []byte("hi\n")},
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
			{Path: "/bin/sh", Mode: fs.ModeSymlink, Data: []byte("tool")},
		},
		Entrypoint: []string{"/bin/tool"}, Cmd: []string{"--flag"}, Env: []string{"A=b"},
		User: "65532:65532", WorkingDir: "/tmp",
	}
	var out bytes.Buffer
	digest, err := img.WriteLayout(&out)
	require.NoError(t, err)

	files, _ := readTar(t, out.Bytes())
	require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(files["oci-layout"]))

	var index struct {
		SchemaVersion int
		MediaType     string
		Manifests     []desc
	}
	require.NoError(t, json.Unmarshal(files["index.json"], &index))
	require.Equal(t, 2, index.SchemaVersion)
	require.Equal(t, ociimage.MediaTypeIndex, index.MediaType)
	require.Len(t, index.Manifests, 1)
	m := index.Manifests[0]
	require.Equal(t, digest, m.Digest)
	require.Equal(t, ociimage.MediaTypeManifest, m.MediaType)
	require.Equal(t, "gantry.local/test:v1", m.Annotations[ociimage.AnnotationImageName])
	require.Equal(t, "v1", m.Annotations[ociimage.AnnotationRefName])

	var manifest struct {
		Config desc
		Layers []desc
	}
	require.NoError(t, json.Unmarshal(blob(t, files, m), &manifest))
	require.Len(t, manifest.Layers, 1)
	var config struct {
		Architecture, OS string
		Config           struct {
			Entrypoint, Cmd, Env []string
			User, WorkingDir     string
		}
		RootFS struct {
			Type    string
			DiffIDs []string `json:"diff_ids"`
		}
	}
	require.NoError(t, json.Unmarshal(blob(t, files, manifest.Config), &config))
	require.Equal(t, "amd64", config.Architecture)
	require.Equal(t, "linux", config.OS)
	require.Equal(t, img.Entrypoint, config.Config.Entrypoint)
	require.Equal(t, img.Cmd, config.Config.Cmd)
	require.Equal(t, img.Env, config.Config.Env)
	require.Equal(t, "65532:65532", config.Config.User)
	// An uncompressed layer: its diff id is its digest.
	require.Equal(t, []string{manifest.Layers[0].Digest}, config.RootFS.DiffIDs)

	layerFiles, layerHeaders := readTar(t, blob(t, files, manifest.Layers[0]))
	var names []string
	modes := map[string]int64{}
	for _, h := range layerHeaders {
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
		require.Zero(t, h.Uid)
		require.Zero(t, h.ModTime.Unix())
	}
	// Parents implied and first; sorted.
	require.Equal(t, []string{"bin/", "bin/sh", "bin/tool", "etc/", "etc/hello", "tmp/"}, names)
	require.Equal(t, "#!/bin/true\n", string(layerFiles["bin/tool"]))
	require.Equal(t, "hi\n", string(layerFiles["etc/hello"]))
	require.Equal(t, int64(0o750), modes["bin/tool"], "a source file keeps its permission bits")
	require.Equal(t, int64(0o644), modes["etc/hello"])
	require.Equal(t, int64(0o755), modes["etc/"])
	require.Equal(t, int64(0o1777), modes["tmp/"])
	require.Equal(t, "tool", layerHeaders[1].Linkname)

	// Deterministic: the same files give the same digest.
	again, err := img.WriteLayout(io.Discard)
	require.NoError(t, err)
	require.Equal(t, digest, again)
}

func TestWriteLayoutRefusesBadFileLists(t *testing.T) {
	for name, files := range map[string][]ociimage.File{
		"duplicate":         {{Path: "/a", Data: []byte("1")}, {Path: "a", Data: []byte("2")}},
		"file and dir":      {{Path: "/a", Data: []byte("1")}, {Path: "/a/b", Data: []byte("2")}},
		"empty path":        {{Path: "/", Data: []byte("1")}},
		"missing source":    {{Path: "/a", Source: "/nonexistent/file"}},
		"source not a file": {{Path: "/a", Source: os.TempDir()}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ociimage.Image{Name: "x:1", Files: files}.WriteLayout(io.Discard)
			require.Error(t, err)
		})
	}
	_, err := ociimage.Image{Files: []ociimage.File{{Path: "a"}}}.WriteLayout(io.Discard)
	require.Error(t, err, "an image without a name")
}
