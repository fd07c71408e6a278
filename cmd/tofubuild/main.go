// Command tofubuild builds the pinned OpenTofu (tools/tofu/go.mod) into bin/tofu exactly as
// `gantry dev` and the tests do — the same flags, the same lock file, the version checked
// before the binary is put in place — and says how far it has come at least every 10 s.
// It returns at once when bin/tofu is already the pinned version.
//
//	go run ./cmd/tofubuild [-root .] [-bin-dir bin] [-every 10s]
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
	"strings"
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
		fmt.Fprintln(os.Stderr, "tofubuild:", err)
		os.Exit(1)
	}
}

// run builds OpenTofu unless it is built, writing a progress line to out every interval.
func run(ctx context.Context, root, binDir string, every time.Duration, out io.Writer) error {
	var p tofu.BuildProgress
	started := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintln(out, progressLine(&p, time.Since(started)))
			}
		}
	}()
	path, err := tofu.EnsureBinaryIn(ctx, root, binDir, &p, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "OpenTofu: ready, %s (%s)\n", path, time.Since(started).Round(time.Second))
	return nil
}

// progressLine says how far the build has come: "OpenTofu: compiling OpenTofu (338 of
// 1399 packages), 4m0s". The step names the count once the build has counted a package.
func progressLine(p *tofu.BuildProgress, elapsed time.Duration) string {
	step, done, total := p.Counts()
	if step == "" {
		step = "checking bin/tofu"
	}
	if total > 0 && !strings.HasSuffix(step, " packages)") {
		step += fmt.Sprintf(" (%d of %d packages)", done, total)
	}
	return fmt.Sprintf("OpenTofu: %s, %s", step, elapsed.Round(time.Second))
}
