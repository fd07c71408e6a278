package kube

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"gantry/runner/tofu"
)

// BuildPhase builds cmd/gantry-phase statically from the module at repoRoot into dir and
// returns the binary's absolute path (the runner image's /bin/gantry-phase).
func BuildPhase(ctx context.Context, repoRoot, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	out := filepath.Join(abs, "gantry-phase")
	b := tofu.GoBuild{Label: "gantry-phase", Dir: repoRoot, Package: "./cmd/gantry-phase",
		Flags: []string{"-trimpath", "-ldflags", "-s -w", "-o", out}}
	var log bytes.Buffer
	if err := b.Run(ctx, nil, &log); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(log.String()))
	}
	return out, nil
}
