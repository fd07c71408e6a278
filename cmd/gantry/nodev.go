//go:build nodev

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// devCommands, in a build with -tags nodev (the production image, deploy/portalimage),
// say that the development commands are not in this binary instead of being unknown:
// someone who read `gantry help` learns why and what to run instead.
var devCommands = struct{ dev, oidc command }{dev: notBuilt("dev"), oidc: notBuilt("dev-oidc")}

func notBuilt(name string) command {
	return func(context.Context, []string, io.Writer, *slog.Logger) error {
		return fmt.Errorf("%w: not in this build: it was built with -tags nodev, as the production image is, which leaves "+
			"the development commands out. Run gantry serve here, or gantry %s from a default build (go run ./cmd/gantry %s)", errUsage, name, name)
	}
}
