package portalimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImage: the layout holds the binary, the CA bundle and the passwd of the non-root user
// and nothing else (no shell), and its configuration runs `gantry serve` as that user.
func TestImage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gantry")
	require.NoError(t, os.WriteFile(bin, []byte("\x7fELF not really"), 0o755))
	ca := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	tag, err := ContentTag(bin)
	require.NoError(t, err)
	require.Regexp(t, `^dev-[0-9a-f]{12}$`, tag)

	img, err := Image(bin, ca, tag)
	require.NoError(t, err)
	var layout bytes.Buffer
	_, err = img.WriteLayout(&layout)
	require.NoError(t, err)
	blobs := untar(t, layout.Bytes())

	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	require.NoError(t, json.Unmarshal(blobs["index.json"], &index))
	require.Equal(t, Repository+":"+tag, index.Manifests[0].Annotations["io.containerd.image.name"])
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	require.NoError(t, json.Unmarshal(blob(t, blobs, index.Manifests[0].Digest), &manifest))
	var config struct {
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Env        []string
		}
	}
	require.NoError(t, json.Unmarshal(blob(t, blobs, manifest.Config.Digest), &config))
	require.Equal(t, "65532:65532", config.Config.User)
	require.Equal(t, []string{Binary}, config.Config.Entrypoint)
	require.Equal(t, []string{"serve"}, config.Config.Cmd)
	require.Contains(t, config.Config.Env, "SSL_CERT_FILE="+CABundle)

	require.Len(t, manifest.Layers, 1)
	files := untar(t, blob(t, blobs, manifest.Layers[0].Digest))
	var regular []string
	for name := range files {
		regular = append(regular, name)
	}
	require.ElementsMatch(t, []string{"usr/local/bin/gantry", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group"}, regular,
		"the binary, its CA bundle and its user; no shell, nothing else")
	require.Contains(t, string(files["etc/passwd"]), "gantry:x:65532:65532:")
	require.Equal(t, "\x7fELF not really", string(files["usr/local/bin/gantry"]))

	_, err = Image(bin, filepath.Join(dir, "missing.crt"), tag)
	require.ErrorContains(t, err, "apt-get install ca-certificates")
}

// untar returns the regular files of a tar by name.
func untar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			out[strings.TrimPrefix(hdr.Name, "./")] = b
		}
	}
}

func blob(t *testing.T, blobs map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
	require.True(t, ok, "blob %s missing", digest)
	return b
}

// TestChartAppVersion: the default tag is the chart's appVersion, the tag it installs.
func TestChartAppVersion(t *testing.T) {
	t.Parallel()
	v, err := ChartAppVersion(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Regexp(t, `^\d+\.\d+\.\d+`, v)
}

// TestProductionBuildLinksNoSandbox: the gantry the image ships (built with
// ProductionTags) links no package of the sandbox cloud and not the development OpenID
// Provider, while the default build, whose `gantry dev` starts them, does (so the check
// can fail: a tag that left nothing out would be caught).
func TestProductionBuildLinksNoSandbox(t *testing.T) {
	t.Parallel()
	deps := func(tags ...string) []string {
		args := append([]string{"list", "-deps"}, tags...)
		cmd := exec.Command("go", append(args, "./cmd/gantry")...)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.Output()
		require.NoError(t, err, "go list %v", tags)
		return strings.Fields(string(out))
	}
	development := func(pkgs []string) []string {
		var out []string
		for _, p := range pkgs {
			if strings.HasPrefix(p, "gantry/sandbox/") || p == "gantry/web/devidp" {
				out = append(out, p)
			}
		}
		return out
	}
	shipped := deps("-tags", ProductionTags)
	require.Contains(t, shipped, "gantry/cmd/gantry/assemble", "the production build is the portal")
	require.Empty(t, development(shipped), "the production build links development pieces")
	dev := development(deps())
	require.True(t, slices.Contains(dev, "gantry/sandbox/cloud") && slices.Contains(dev, "gantry/web/devidp"),
		"the default build should start the sandbox cloud and the development provider: %v", dev)
}
