// Command tofubuild builds the pinned OpenTofu (tools/tofu/go.mod) into bin/tofu exactly as
// `gantry dev` and the tests do — the same flags, the same lock file, the version checked
// before the binary is put in place — and says how far it has come at least every 10 s.
// It returns at once when bin/tofu is already the pinned version.
//
//	go run ./tools/tofubuild [-root .] [-bin-dir bin] [-every 10s]
//
// `go tool task dev` starts it first, at the lowest CPU priority, so that OpenTofu's long
// first build takes the cores whenever Gantry's own build leaves them; `gantry dev` then
// waits for it on the lock instead of starting the same build again.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"gantry/runner/tofu"
)

func main() {
	root := flag.String("root", ".", "the source tree")
	binDir := flag.String("bin-dir", "", "where bin/tofu is kept (default: the source tree's bin/)")
	every := flag.Duration("every", 10*time.Second, "how often to say how far the build has come")
	flag.Parse()
	if *binDir == "" {
		*binDir = filepath.Join(*root, "bin")
	}
	// Ctrl-C stops the go build it runs; a half-built binary is never put in place.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *root, *binDir, *every, os.Stderr); err != nil {
		if ctx.Err() != nil {
			// Stopped on request (Ctrl-C on `go tool task dev`): not a failure to report,
			// and what it compiled stays in the Go build cache.
			fmt.Fprintln(os.Stderr, "OpenTofu: build stopped; the next start resumes it from the Go build cache")
			return
		}
		fmt.Fprintln(os.Stderr, "tofubuild:", err)
		os.Exit(1)
	}
}

// run builds OpenTofu unless it is built, writing a progress line to out every interval.
func run(ctx context.Context, root, binDir string, every time.Duration, out io.Writer) error {
	var p tofu.BuildProgress
	p.SetStep("checking bin/tofu")
	started := time.Now()
	stop := tofu.Report(out, "OpenTofu", &p, every)
	path, err := tofu.EnsureBinaryIn(ctx, root, binDir, &p, out)
	stop()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "OpenTofu: ready, %s (%s)\n", path, time.Since(started).Round(time.Second))
	return nil
}
