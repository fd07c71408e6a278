// Package tofurun is the live runner: it runs OpenTofu (init, plan -out, show -json; apply
// of the saved plan file; a refresh-only plan to verify) through an
// Executor that decides where the process runs: a plain host process for development
// ("not isolated") or a runc container.
package tofurun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gantry/models/bundle"
	"gantry/models/run"
	"gantry/models/secret"
	"gantry/runner"
	"gantry/runner/tofu"
	"gantry/syncio"
)

// Command is one tofu invocation in a job's working directory.
type Command struct {
	Args []string
	// Secrets are handed to the process only as environment: the state backend
	// credentials and, for a plan or a verification, the sensitive input variables
	// (TF_VAR_<name>).
	Secrets map[string]string
	// Files is the job's secret directory (nil: none): the workload token, which the job
	// reads from the file SANDBOX_TOKEN_FILE names and which is replaced while the
	// command runs. The executor shows the command the directory, read-only, and sets
	// the variables of Files.Env to the files' paths as the command sees them.
	Files  *SecretDir
	Stdout io.Writer
	Stderr io.Writer
	// PluginCache is a host directory tofu links providers from (TF_PLUGIN_CACHE_DIR),
	// prepared and verified by tofu.PluginCache; the job only reads it. Empty: none.
	PluginCache string
	// Graceful: when the job's context ends, tofu is interrupted first (SIGINT, as
	// Ctrl-C) and killed only after a grace period, so an apply stores the state it
	// wrote. Otherwise (a plan, a verification, init) it is killed at once.
	Graceful bool
}

// Executor runs tofu commands for a job whose files are in workdir (a host directory).
type Executor interface {
	// Name identifies the executor: "process" or "oci".
	Name() string
	// Isolated is false for the process executor, which pages label "not isolated".
	Isolated() bool
	// Run runs tofu with c.Args in workdir and returns its exit code. An error means
	// the executor could not run it at all; Explain, when non-empty, says why a run was
	// killed (memory, pids or time limit).
	Run(ctx context.Context, workdir string, c Command) (exit int, explain string, err error)
	// Health reports whether the executor can run jobs now.
	Health(ctx context.Context) error
}

// Runner implements runner.Runner with OpenTofu on an Executor.
type Runner struct {
	Exec Executor
	// WorkRoot holds one fresh working directory per phase, removed afterwards.
	WorkRoot string
	// Plugins, when set, gives every job the providers its lock file selects, unpacked
	// and verified once per lock file, so `tofu init` only links them.
	Plugins *tofu.PluginCache
	// StateRecovery bounds how long an apply that could not store its state keeps
	// pushing the errored.tfstate tofu left behind (zero: DefaultStateRecovery); the
	// phase's context bounds it too (see recover.go).
	StateRecovery time.Duration
}

// New returns a live runner; plugins may be nil (every init then extracts the
// providers from the mirror).
func New(exec Executor, workRoot string, plugins *tofu.PluginCache) *Runner {
	return &Runner{Exec: exec, WorkRoot: workRoot, Plugins: plugins}
}

func (r *Runner) Name() string    { return "tofu/" + r.Exec.Name() }
func (r *Runner) Simulated() bool { return false }

// job is one phase's working directory and log.
type job struct {
	r   *Runner
	dir string
	log bytes.Buffer // the whole log, the phase's evidence
	// out is where the log is written: log, and the request's live log as it happens,
	// one write at a time (tofu's output and the refresher's notes).
	out     *syncio.Writer
	creds   runner.Credentials
	plugins string // the plugin cache directory for this job's lock file, or ""
	// files holds the cloud token (tokenFile), kept fresh while the phase runs by the
	// refresher that stop ends.
	files *SecretDir
	stop  func()
	// vars are the sensitive root variables of a plan or a verification.
	vars secret.Variables
}

// newJob writes the config bundle into a fresh working directory and the cloud token
// into the job's secret directory beside it, and, for a workload token, starts keeping
// the token fresh until the job is closed (runner.KeepFresh): a phase may outlive the
// token it began with.
func (r *Runner) newJob(ctx context.Context, cfg []byte, creds runner.Credentials, live io.Writer) (*job, error) {
	if err := os.MkdirAll(r.WorkRoot, 0o700); err != nil {
		return nil, fmt.Errorf("creating work root: %w", err)
	}
	dir, err := os.MkdirTemp(r.WorkRoot, "job-")
	if err != nil {
		return nil, fmt.Errorf("creating job directory: %w", err)
	}
	b, err := bundle.FromTar(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for name, body := range b.Files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	j := &job{r: r, dir: dir, creds: creds, stop: func() {}}
	// The live log never fails a write, so the buffer always gets everything. The
	// refresher writes to it too, while tofu's output comes.
	j.out = syncio.NewWriter(io.MultiWriter(&j.log, runner.LogTo(live)))
	if err := j.secretFiles(ctx, live); err != nil {
		j.close()
		return nil, err
	}
	if lock, ok := b.Files[".terraform.lock.hcl"]; ok && r.Plugins != nil {
		// Without the cache the job still runs: init extracts from the mirror and says
		// what is wrong with a provider in its own words.
		if j.plugins, err = r.Plugins.Dir(lock); err != nil {
			fmt.Fprintf(j.out, "# the plugin cache is not used: %v\n", err)
		}
	}
	return j, nil
}

// close stops the refresher and removes the job's directories.
func (j *job) close() {
	j.stop()
	os.RemoveAll(j.dir)
	if j.files != nil {
		j.files.remove()
	}
}

// evidence ends the refresher (nothing writes to the log any more) and returns the
// phase's whole log.
func (j *job) evidence() []byte {
	j.stop()
	return j.log.Bytes()
}

// lockTimeout is how long a command waits for the workspace's state lock.
const lockTimeout = "2m"

// ErrTofu is a tofu command that failed; its output is in the log.
var ErrTofu = errors.New("tofu failed")

// readRegular reads a file the job wrote, refusing anything but a regular file: the
// portal (root, for runc jobs) must not follow a link a job planted in its workdir.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	return io.ReadAll(f)
}

// secrets are the state backend credentials and the sensitive root variables
// (TF_VAR_<name>) as the environment tofu reads: environment only, in no file of the
// job (the bundle declares the variables without a value). The cloud token is not
// among them: it is in the job's secret directory (Command.Files), where it can be
// refreshed while a command runs.
func (j *job) secrets() map[string]string {
	out := map[string]string{}
	if j.creds.StateUsername != "" {
		out["TF_HTTP_USERNAME"], out["TF_HTTP_PASSWORD"] = j.creds.StateUsername, j.creds.StatePassword
	}
	for name, v := range j.vars {
		out["TF_VAR_"+name] = v
	}
	return out
}

// run runs one command with its standard output going to out (errors to the log). It returns the exit code; codes
// not in ok are an error naming the command, and a killed run says why in the log.
func (j *job) run(ctx context.Context, out io.Writer, ok []int, args ...string) (int, error) {
	fmt.Fprintf(j.out, "$ tofu %s\n", strings.Join(args, " "))
	started := time.Now()
	// Only an apply is stopped gracefully: it may have changed resources and must store
	// the state it wrote; anything else is killed at once.
	graceful := len(args) > 0 && args[0] == "apply"
	code, explain, err := j.r.Exec.Run(ctx, j.dir, Command{Args: args, Secrets: j.secrets(), Files: j.files, Stdout: out, Stderr: j.out,
		PluginCache: j.plugins, Graceful: graceful})
	fmt.Fprintf(j.out, "# tofu %s: exit %d in %.2f s\n", args[0], code, time.Since(started).Seconds())
	if err != nil {
		return code, fmt.Errorf("running tofu %s: %w", args[0], err)
	}
	if explain != "" {
		fmt.Fprintf(j.out, "\n%s\n", explain)
		return code, fmt.Errorf("tofu %s: %s: %w", args[0], explain, ErrTofu)
	}
	for _, c := range ok {
		if code == c {
			return code, nil
		}
	}
	return code, fmt.Errorf("tofu %s exited with %d (see the log): %w", args[0], code, ErrTofu)
}

// tofu runs a command whose output belongs in the job log (standard output and error
// are the same writer, so exec.Cmd writes them one at a time).
func (j *job) tofu(ctx context.Context, ok []int, args ...string) (int, error) {
	return j.run(ctx, j.out, ok, args...)
}

// capture runs a command whose standard output is data (show -json, output -json): it
// is returned, and goes to the log only when the command fails.
func (j *job) capture(ctx context.Context, args ...string) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := j.run(ctx, &buf, []int{0}, args...); err != nil {
		j.out.Write(buf.Bytes())
		return nil, err
	}
	return buf.Bytes(), nil
}

func (j *job) init(ctx context.Context) error {
	// The lock file in the bundle is authoritative: -lockfile=readonly refuses any
	// provider it does not pin and any package whose hash it does not list, before any
	// plan (explainInit says which in the log), and the CLI config installs only from the
	// built-in mirror and the operator's.
	from := len(j.logSnapshot())
	if _, err := j.tofu(ctx, []int{0}, "init", "-input=false", "-no-color", "-lockfile=readonly"); err != nil {
		return j.explainInit(ctx, j.logSnapshot()[from:], err)
	}
	return nil
}

// Plan runs init, plan -out and show -json. There is no separate validate: plan
// validates the configuration first and reports the same diagnostics.
func (r *Runner) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	j, err := r.newJob(ctx, req.Config, req.Credentials, req.Log)
	if err != nil {
		return runner.PlanResult{}, err
	}
	defer j.close()
	j.vars = req.Variables
	res, err := j.plan(ctx, req.Kind)
	res.Log = j.evidence()
	return res, err
}

func (j *job) plan(ctx context.Context, kind runner.Kind) (runner.PlanResult, error) {
	if err := j.init(ctx); err != nil {
		return runner.PlanResult{}, err
	}
	// Plans of one workspace may overlap (each locks the state briefly): wait for the
	// lock rather than fail.
	args := []string{"plan", "-input=false", "-no-color", "-detailed-exitcode", "-lock-timeout=" + lockTimeout, "-out=plan.bin"}
	switch kind {
	case runner.KindDestroy:
		args = append(args, "-destroy")
	case runner.KindRefreshOnly:
		args = append(args, "-refresh-only")
	}
	code, err := j.tofu(ctx, []int{0, 2}, args...)
	if err != nil {
		return runner.PlanResult{}, err
	}
	planFile, err := readRegular(filepath.Join(j.dir, "plan.bin"))
	if err != nil {
		return runner.PlanResult{}, fmt.Errorf("reading the saved plan: %w", err)
	}
	planJSON, err := j.capture(ctx, "show", "-json", "plan.bin")
	if err != nil {
		return runner.PlanResult{}, err
	}
	changes := code == 2
	if changes && kind == runner.KindRefreshOnly {
		// A refresh-only plan also reports changed outputs; only resources that differ
		// from the state are drift (and something to codify).
		if changes, err = run.Drifted(planJSON); err != nil {
			return runner.PlanResult{}, err
		}
	}
	return runner.PlanResult{PlanFile: planFile, PlanJSON: planJSON, HasChanges: changes}, nil
}

// Apply applies exactly the stored plan file: `tofu apply plan.bin`, never a new plan.
// The state goes to Gantry's backend, so the result carries none.
func (r *Runner) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	j, err := r.newJob(ctx, req.Config, req.Credentials, req.Log)
	if err != nil {
		return runner.ApplyResult{}, err
	}
	defer j.close()
	res, err := j.apply(ctx, req.RunID, req.PlanFile)
	res.Log = j.evidence()
	return res, err
}

func (j *job) apply(ctx context.Context, runID string, planFile []byte) (runner.ApplyResult, error) {
	if err := j.init(ctx); err != nil {
		return runner.ApplyResult{}, err
	}
	if err := os.WriteFile(filepath.Join(j.dir, "plan.bin"), planFile, 0o644); err != nil {
		return runner.ApplyResult{}, fmt.Errorf("writing the plan file: %w", err)
	}
	from := len(j.logSnapshot())
	if _, err := j.tofu(ctx, []int{0}, "apply", "-input=false", "-no-color", "-lock-timeout="+lockTimeout, "plan.bin"); err != nil {
		// tofu may have applied and then failed to store the state (recover.go).
		return j.recoverState(ctx, runID, j.logSnapshot()[from:], err)
	}
	outputs, err := j.capture(ctx, "output", "-json")
	if err != nil {
		return runner.ApplyResult{}, err
	}
	return runner.ApplyResult{Outputs: outputs}, nil
}

// Verify runs a refresh-only plan: no changes means the live resources match the
// applied state; otherwise the refresh-only plan is the residual drift.
func (r *Runner) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	j, err := r.newJob(ctx, req.Config, req.Credentials, req.Log)
	if err != nil {
		return runner.VerifyResult{}, err
	}
	defer j.close()
	j.vars = req.Variables
	res, err := j.verify(ctx)
	res.Log = j.evidence()
	return res, err
}

func (j *job) verify(ctx context.Context) (runner.VerifyResult, error) {
	if err := j.init(ctx); err != nil {
		return runner.VerifyResult{}, err
	}
	code, err := j.tofu(ctx, []int{0, 2}, "plan", "-refresh-only", "-input=false", "-no-color", "-detailed-exitcode", "-lock-timeout="+lockTimeout, "-out=verify.bin")
	if err != nil {
		return runner.VerifyResult{}, err
	}
	if code == 0 {
		return runner.VerifyResult{Converged: true}, nil
	}
	drift, err := j.capture(ctx, "show", "-json", "verify.bin")
	if err != nil {
		return runner.VerifyResult{}, err
	}
	changed, err := run.Drifted(drift)
	if err != nil {
		return runner.VerifyResult{}, err
	}
	// A refresh-only plan also reports changed outputs (after a destroy, every output
	// goes away); only resources that differ from the state are drift.
	return runner.VerifyResult{Converged: !changed, DriftJSON: drift}, nil
}

// Health reports whether the executor can run jobs now.
func (r *Runner) Health(ctx context.Context) error { return r.Exec.Health(ctx) }

// Isolated reports whether jobs run isolated (runc) or as plain processes.
func (r *Runner) Isolated() bool { return r.Exec.Isolated() }
