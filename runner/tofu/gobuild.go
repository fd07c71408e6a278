package tofu

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"gantry/syncio"
)

// BuildProgress counts the packages of the toolchain's `go build`s, for the pages that
// show how far the build has come: each build's packages come from `go list -deps`, and
// `go build -json -v` reports every package it compiles (a "build-output" event whose
// output is the package's path). A package already in the Go build cache is not compiled
// and so not reported; a finished build counts all of its packages. The step says what
// happens now and carries no count of its own: what is shown beside it is the count of
// every build (Counts), the one the percentage comes from (a step naming its own build's
// count beside the overall percentage read "73 %" at "1398 of 1399 packages"). The zero
// value is ready to use; a nil *BuildProgress counts nothing.
type BuildProgress struct {
	mu    sync.Mutex
	step  string
	parts []*buildPart
}

type buildPart struct {
	label    string
	total    int
	seen     map[string]struct{}
	mirrored int // compiled by another process that builds it (see mirrorProgress)
	finished bool
}

// done is how many of the part's packages are compiled.
func (part *buildPart) done() int {
	if part.finished {
		return part.total
	}
	return min(max(len(part.seen), part.mirrored), part.total)
}

// Counts returns what happens now and the packages compiled (or found built) of those
// the builds need, over every build counted so far.
func (p *BuildProgress) Counts() (step string, done, total int) {
	if p == nil {
		return "", 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, part := range p.parts {
		total += part.total
		done += part.done()
	}
	return p.step, done, total
}

// countsOf returns the count of one build.
func (p *BuildProgress) countsOf(label string) (done, total int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	part := p.part(label)
	return part.done(), part.total
}

// mirror takes the count of a build another process runs.
func (p *BuildProgress) mirror(label string, done, total int, who string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	part := p.part(label)
	part.mirrored, part.total = done, total
	p.step = who
	p.mu.Unlock()
}

// SetStep says what happens now.
func (p *BuildProgress) SetStep(step string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.step = step
	p.mu.Unlock()
}

func (p *BuildProgress) part(label string) *buildPart {
	for _, part := range p.parts {
		if part.label == label {
			return part
		}
	}
	part := &buildPart{label: label, seen: map[string]struct{}{}}
	p.parts = append(p.parts, part)
	return part
}

func (p *BuildProgress) expect(label string, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.part(label).total = total
	p.mu.Unlock()
}

func (p *BuildProgress) compiled(label, pkg string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	part := p.part(label)
	part.seen[pkg] = struct{}{}
	p.step = "compiling " + label
	p.mu.Unlock()
}

func (p *BuildProgress) finish(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.part(label).finished = true
	p.mu.Unlock()
}

// GoBuild is one static `go build` of Package in Dir whose progress is counted.
type GoBuild struct {
	Label   string   // for people: "OpenTofu"
	Dir     string   // the module directory the build runs in
	Package string   // what is built: "github.com/opentofu/opentofu/cmd/tofu", "./cmd/gantry-fwd"
	Flags   []string // build flags before the package (-trimpath, -ldflags ..., -o out)

	// CacheOnly compiles what Package imports into the Go build cache and links nothing,
	// in the environment as it is (CGO_ENABLED included): a `go run` of Package with the
	// same Flags then compiles Package alone and links. (A go build of a main package
	// links it even when the binary is thrown away, and a second link is what `go run`,
	// which keeps its own cache of linked programs, would do anyway.) Flags hold no -o.
	CacheOnly bool

	// Niced runs the go command, and so every compiler it starts, at the lowest CPU
	// priority through nice(1) (best effort: without nice on PATH, at normal priority):
	// a build of many CPU-minutes then slows nothing else on the machine. Not by renicing
	// a thread of this process: a locked thread ends with its goroutine, and a thread that
	// ends kills every child any goroutine started from it with Pdeathsig (a runc job,
	// a store under test).
	Niced bool
}

// command is the go command with args, in the build's directory and environment.
func (b GoBuild) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	if b.Niced {
		if nice, err := exec.LookPath("nice"); err == nil {
			cmd = exec.CommandContext(ctx, nice, append([]string{"-n", "19", "go"}, args...)...)
		}
	}
	cmd.Dir, cmd.Env = b.Dir, b.env()
	return cmd
}

// env is the build's environment: static binaries, the same for list and build; a
// CacheOnly build's is the environment of the `go run` that follows it.
func (b GoBuild) env() []string {
	if b.CacheOnly {
		return os.Environ()
	}
	return append(os.Environ(), "CGO_ENABLED=0")
}

// list asks `go list -deps` which packages the build compiles (it also downloads missing
// modules, which the build would do anyway; the go command's "go: downloading" lines are
// kept for the error).
func (b GoBuild) list(ctx context.Context) ([]string, error) {
	args := []string{"list", "-mod=readonly", "-deps"}
	if b.CacheOnly {
		args = append(args, "-f", `{{if ne .Name "main"}}{{.ImportPath}}{{end}}`)
	}
	cmd := b.command(ctx, append(args, b.Package)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the packages of %s: %v: %s", b.Label, err, strings.TrimSpace(stderr.String()))
	}
	return strings.Fields(string(out)), nil
}

// Count records in p how many packages the build needs.
func (b GoBuild) Count(ctx context.Context, p *BuildProgress) error {
	if p == nil {
		return nil
	}
	pkgs, err := b.list(ctx)
	if err != nil {
		return err
	}
	p.expect(b.Label, len(pkgs))
	return nil
}

// Run builds, counting every package compiled into p; the compiler's messages and
// everything else go to log.
func (b GoBuild) Run(ctx context.Context, p *BuildProgress, log io.Writer) error {
	pkgs := []string{b.Package}
	if b.CacheOnly {
		// The build is of the packages listed: their number is the total (no Count first).
		var err error
		if pkgs, err = b.list(ctx); err != nil {
			return err
		}
		p.expect(b.Label, len(pkgs))
	}
	args := append([]string{"build", "-mod=readonly", "-json", "-v"}, b.Flags...)
	cmd := b.command(ctx, append(args, pkgs...)...)
	// The go command's stderr and the messages read from its events both go to log, from
	// two goroutines: one lock, and no ReadFrom (a bytes.Buffer's would drop the other's
	// writes).
	log = syncio.NewWriter(log)
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.SetStep("compiling " + b.Label)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("building %s: %w", b.Label, err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 64<<10), 4<<20)
	for lines.Scan() {
		var ev struct{ ImportPath, Action, Output string }
		if json.Unmarshal(lines.Bytes(), &ev) != nil {
			fmt.Fprintln(log, lines.Text())
			continue
		}
		switch {
		case ev.Action == "build-output" && ev.Output == ev.ImportPath+"\n":
			p.compiled(b.Label, ev.ImportPath) // -v: the package was compiled
		case ev.Action == "build-output":
			io.WriteString(log, ev.Output) // the compiler's messages
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("building %s in %s: %w", b.Label, b.Dir, err)
	}
	p.finish(b.Label)
	return nil
}
