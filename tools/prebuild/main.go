// Command prebuild compiles what a Go program imports into the Go build cache, saying how
// far it has come at least every 10 s, so that the `go run` of the program that follows
// (with the same build flags) compiles only its main package and links:
//
//	go run ./tools/prebuild [-label Gantry] [-every 10s] [-v] -- -trimpath ./cmd/gantry
//
// `go tool task dev` runs it before `go run -trimpath ./cmd/gantry dev`: on a machine with
// an empty Go build cache that is a thousand packages and minutes of compiling, which a
// plain go run does in silence. The go command's "go: downloading" lines are shown only
// with -v. With everything already compiled it takes a fraction of a second.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"gantry/runner/tofu"
)

func main() {
	label := flag.String("label", "Gantry", "what is built, for people")
	every := flag.Duration("every", 10*time.Second, "how often to say how far the build has come")
	verbose := flag.Bool("v", false, "show the go command's \"go: downloading\" lines")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: prebuild [-label L] [-every 10s] [-v] -- [build flags] package")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	b := tofu.GoBuild{Label: *label, Dir: ".", Package: args[len(args)-1], Flags: args[:len(args)-1], CacheOnly: true}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, b, *every, *verbose, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "prebuild: %v\n", err)
		os.Exit(1)
	}
}

// run downloads what b needs and compiles it, writing a progress line to out every
// interval and one when it is done.
func run(ctx context.Context, b tofu.GoBuild, every time.Duration, verbose bool, out io.Writer) error {
	var p tofu.BuildProgress
	started := time.Now()
	stop := tofu.Report(out, b.Label, &p, every)
	defer stop()
	p.SetStep("downloading modules and listing packages")
	if verbose {
		// The same listing as Count's, with the go command's messages shown: it downloads
		// what is missing and says so.
		list := exec.CommandContext(ctx, "go", "list", "-mod=readonly", "-deps", b.Package)
		list.Dir, list.Stdout, list.Stderr = b.Dir, io.Discard, out
		if err := list.Run(); err != nil {
			return fmt.Errorf("listing the packages of %s: %w", b.Label, err)
		}
	}
	if err := b.Run(ctx, &p, out); err != nil { // lists (and so downloads) first, then counts
		return err
	}
	stop()
	_, _, total := p.Counts()
	fmt.Fprintf(out, "%s: its %d packages are built (%s); linking and starting\n", b.Label, total, time.Since(started).Round(100*time.Millisecond))
	return nil
}
