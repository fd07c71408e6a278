// Package tofutest gives tests the pinned OpenTofu toolchain, built from the source tree,
// and waits for its builds the way a person watching them would: by their progress. The
// first test of a suite to need OpenTofu builds it into the source tree's bin/ (minutes on
// a machine with an empty Go build cache); every other test, in this process or another,
// waits on the build's lock and follows the count the builder publishes. A wait fails
// when the build fails or when its count stops moving for Stall of idle-machine time, not
// at a fixed minute: on a fresh, busy machine the build may take half an hour and still be
// healthy.
package tofutest

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/runner/tofu"
)

// Stall is how long (of idle-machine time) a build may go without its count moving before
// a test gives up on it. The longest steps that count nothing are downloading OpenTofu's
// modules and linking it: about a minute each on an idle machine.
const Stall = 5 * time.Minute

// Toolchain builds the toolchain under dir (tofu.PrepareToolchain: OpenTofu in the source
// tree's bin/, the sandbox provider and the mirror in dir), with the third-party providers
// named (tofu.Kubernetes: built into its cache unless there, minutes the first time) in the
// mirror too; tc.LockOf(p.Source) is each one's lock entry.
func Toolchain(t testing.TB, root, dir string, log io.Writer, providers ...tofu.ThirdParty) tofu.Toolchain {
	t.Helper()
	tc, _ := Build(t, tofu.Build{Root: root, Dir: dir, Providers: providers, Log: log})
	return tc
}

// Build runs b (its Progress is the wait's own) and returns the toolchain and gantry-fwd's
// path ("" unless b.Fwd).
func Build(t testing.TB, b tofu.Build) (tofu.Toolchain, string) {
	t.Helper()
	var tc tofu.Toolchain
	var fwd string
	b.Progress = &tofu.BuildProgress{}
	await(t, "the OpenTofu toolchain's build", Stall, b.Progress, func(ctx context.Context) (err error) {
		tc, fwd, err = b.Run(ctx)
		return err
	})
	return tc, fwd
}

// Binary builds OpenTofu alone into the source tree's bin/ and returns its path.
func Binary(t testing.TB, root string, log io.Writer) string {
	t.Helper()
	var path string
	p := &tofu.BuildProgress{}
	await(t, "OpenTofu's build", Stall, p, func(ctx context.Context) (err error) {
		path, err = tofu.EnsureBinaryIn(ctx, root, filepath.Join(root, "bin"), p, log)
		return err
	})
	return path
}

// await runs build and waits for it on the test's goroutine while p's count moves; a
// build that stops moving for stall is stopped and fails the test with where it stood.
func await(t testing.TB, what string, stall time.Duration, p *tofu.BuildProgress, build func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended, wake := make(chan error, 1), make(chan struct{}, 1)
	go func() { ended <- build(ctx); wake <- struct{}{} }()
	var err error
	done := false
	defer func() {
		if !done { // the wait failed the test: stop the build and let it end
			cancel()
			<-ended
		}
	}()
	bench.Eventually(t, what, stall, func() (bool, any) {
		select {
		case err = <-ended:
			done = true
			return true, nil
		default:
			step, n, total := p.Counts()
			return false, progressOf{step, n, total}
		}
	}, bench.Progress(func() any {
		step, n, total := p.Counts()
		return progressOf{step, n, total}
	}), bench.Wake(wake))
	require.NoError(t, err, what)
}

// progressOf is a build's count, as a comparable value for bench.Progress.
type progressOf struct {
	Step     string
	Done, Of int
}
