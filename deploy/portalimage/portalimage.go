// Package portalimage builds the container image of `gantry serve` locally, without a
// registry or a daemon (runner/ociimage): the static gantry binary, the CA certificates it
// verifies PostgreSQL, the OpenID Provider and webhooks with, and a passwd naming its
// non-root user. No shell, no package manager, nothing else: `kubectl exec` runs gantry's
// own commands (gantry keys rotate, gantry org invite).
package portalimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"gantry/runner/ociimage"
	"gantry/runner/tofu"
)

const (
	// Repository is the image's name without its tag; the chart's image.repository default.
	Repository = "gantry.local/gantry"
	// UID is the portal's user and group (the chart's runAsUser).
	UID = 65532
	// Binary is where gantry lives in the image (PATH names its directory).
	Binary = "/usr/local/bin/gantry"
	// CABundle is Debian's bundle of the ca-certificates package, copied from the host.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// ProductionTags are the build tags of the gantry that ships: nodev leaves out the
// development commands (`gantry dev`, `gantry dev-oidc`) and with them the sandbox cloud
// and the development OpenID Provider (cmd/gantry/nodev.go).
const ProductionTags = "nodev"

// BuildBinary builds cmd/gantry from the module at repoRoot as a static binary (no cgo:
// the image has no C library) with ProductionTags into dir and returns its path.
func BuildBinary(ctx context.Context, repoRoot, dir string) (string, error) {
	return build(ctx, repoRoot, dir, "gantry", "-tags", ProductionTags)
}

// BuildDevBinary builds the default gantry (with its development commands) into dir:
// tests run `gantry dev-oidc` from it beside an installed image.
func BuildDevBinary(ctx context.Context, repoRoot, dir string) (string, error) {
	return build(ctx, repoRoot, dir, "gantry-dev")
}

func build(ctx context.Context, repoRoot, dir, name string, flags ...string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	out := filepath.Join(abs, name)
	flags = append(flags, "-trimpath", "-ldflags", "-s -w", "-o", out)
	b := tofu.GoBuild{Label: name, Dir: repoRoot, Package: "./cmd/gantry", Flags: flags}
	var log bytes.Buffer
	if err := b.Run(ctx, nil, &log); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(log.String()))
	}
	return out, nil
}

// Image is the image of binary (a static gantry) named Repository:tag, with the host's CA
// bundle at caBundle (CABundle unless a test says otherwise).
func Image(binary, caBundle, tag string) (ociimage.Image, error) {
	if _, err := os.Stat(caBundle); err != nil {
		return ociimage.Image{}, fmt.Errorf("the image's CA certificates come from the host's %s (Debian: apt-get install ca-certificates): %w", caBundle, err)
	}
	return ociimage.Image{
		Name: Repository + ":" + tag,
		Files: []ociimage.File{
			{Path: Binary, Mode: 0o755, Source: binary},
			{Path: CABundle, Mode: 0o644, Source: caBundle},
			// A name for the uid (some libraries look it up) and a root that cannot log in.
			{Path: "/etc/passwd", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\ngantry:x:%d:%d:gantry:/tmp:/sbin/nologin\n", UID, UID)},
			{Path: "/etc/group", Mode: 0o644, Data: fmt.Appendf(nil, "root:x:0:\ngantry:x:%d:\n", UID)},
			// Scratch space when the root is writable; the chart mounts an emptyDir here.
			{Path: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint: []string{Binary},
		Cmd:        []string{"serve"},
		Env:        []string{"PATH=/usr/local/bin", "HOME=/tmp", "SSL_CERT_FILE=" + CABundle},
		User:       fmt.Sprintf("%d:%d", UID, UID),
		WorkingDir: "/tmp",
		Labels: map[string]string{
			"org.opencontainers.image.title":       "gantry",
			"org.opencontainers.image.description": "Gantry, the self-service provisioning portal for OpenTofu (gantry serve)",
			"org.opencontainers.image.version":     tag,
		},
	}, nil
}

// ContentTag is a tag naming binary's content ("dev-" and 12 hex digits of its sha256): a
// rebuilt binary is a new image, so a node never keeps running an older one under the
// same name.
func ContentTag(binary string) (string, error) {
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", binary, err)
	}
	return "dev-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ChartAppVersion is the appVersion of the chart at repoRoot/deploy/helm/gantry: the tag
// the chart installs by default.
func ChartAppVersion(repoRoot string) (string, error) {
	name := filepath.Join(repoRoot, "deploy", "helm", "gantry", "Chart.yaml")
	data, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil || chart.AppVersion == "" {
		return "", fmt.Errorf("reading appVersion from %s: %v", name, err)
	}
	return chart.AppVersion, nil
}
