package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"gantry/models/secret"
	"gantry/runner"
	"gantry/runner/oci"
	"gantry/runner/tofurun"
	"gantry/syncio"
)

// Name is the executor's name in runs and environments.
const Name = "tofu/kubernetes"

// Launcher starts a phase's pod and reports how it ended: the Kubernetes Jobs of
// JobLauncher, or, in the protocol's own tests, gantry-phase as a local process.
type Launcher interface {
	// Launch starts the pod of spec; its log goes to spec.Log as it comes.
	Launch(ctx context.Context, spec PodSpec) (Pod, error)
	// Health reports whether pods can be launched now.
	Health(ctx context.Context) error
}

// PodSpec is one phase's pod.
type PodSpec struct {
	Job   string // the Job's name, also the phase endpoint session's
	Phase string // PhasePlan, PhaseApply or PhaseVerify
	RunID string
	// Env is the pod's environment: the phase's URL and the cloud's; never a secret.
	Env map[string]string
	// Secrets are the per-Job Secret's files (SecretMount).
	Secrets map[string][]byte
	// Log receives the pod's log while it runs.
	Log io.Writer
	// Timeout bounds the pod's life (zero: none besides the context).
	Timeout time.Duration
	// Args are gantry-phase's arguments (none for a phase; -probe for a diagnostic pod).
	Args []string
}

// Pod is a launched phase.
type Pod interface {
	// Wait blocks until the pod ended and its log was read to the end, or ctx ended.
	Wait(ctx context.Context) (Exit, error)
	// Delete removes the pod and everything made for it. wait: until it is gone (a
	// cancelled phase must leave nothing behind; a finished one need not wait).
	Delete(ctx context.Context, wait bool) error
}

// Exit is how a pod ended.
type Exit struct {
	ExitCode         int
	OOMKilled        bool          // the container was killed by the memory limit
	DeadlineExceeded bool          // the Job ran past its deadline
	Deadline         time.Duration // that deadline, for the explanation
	// Gone says why the pod ended from outside when it did ("the pod was deleted",
	// "evicted: ..."): its phase was interrupted.
	Gone string
	// Message is the container's termination message (gantry-phase's protocol failure).
	Message string
}

// Runner is the tofu/kubernetes executor: runner.Runner with one pod per phase.
type Runner struct {
	Launcher Launcher
	Portal   *Portal
	// PortalURL is the runner listener's URL as pods reach it (the phase endpoint).
	PortalURL string
	// CloudEndpoint is the cloud's URL as pods reach it (SANDBOX_ENDPOINT).
	CloudEndpoint string
	// Limits are the pods' (MemoryBytes and CPUs; zero fields take oci's defaults).
	Limits oci.Limits
	// WorkRoot is where the states an apply could not store are kept
	// (tofurun.KeptStates(WorkRoot)), as the other executors keep theirs.
	WorkRoot string
	// Timeouts bound each phase's pod (zero: runner's defaults).
	Timeouts runner.Timeouts
}

func (r *Runner) Name() string                     { return Name }
func (r *Runner) Simulated() bool                  { return false }
func (r *Runner) Isolated() bool                   { return true }
func (r *Runner) Health(ctx context.Context) error { return r.Launcher.Health(ctx) }

// Plan runs a plan in a pod.
func (r *Runner) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	res, err := r.phase(ctx, phaseReq{phase: PhasePlan, kind: req.Kind, runID: req.RunID, workspaceID: req.WorkspaceID,
		config: req.Config, creds: req.Credentials, vars: req.Variables, log: req.Log})
	return runner.PlanResult{PlanFile: res.PlanFile, PlanJSON: res.PlanJSON, Log: res.Log, HasChanges: res.HasChanges}, err
}

// Apply applies the saved plan in a pod.
func (r *Runner) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	res, err := r.phase(ctx, phaseReq{phase: PhaseApply, runID: req.RunID, workspaceID: req.WorkspaceID,
		config: req.Config, planFile: req.PlanFile, creds: req.Credentials, log: req.Log})
	return runner.ApplyResult{Outputs: res.Outputs, Log: res.Log}, err
}

// Verify runs the refresh-only comparison in a pod.
func (r *Runner) Verify(ctx context.Context, req runner.VerifyRequest) (runner.VerifyResult, error) {
	res, err := r.phase(ctx, phaseReq{phase: PhaseVerify, runID: req.RunID, workspaceID: req.WorkspaceID,
		config: req.Config, creds: req.Credentials, vars: req.Variables, log: req.Log})
	return runner.VerifyResult{Converged: res.Converged, DriftJSON: res.DriftJSON, Log: res.Log}, err
}

type phaseReq struct {
	phase              string
	kind               runner.Kind
	runID, workspaceID string
	config, planFile   []byte
	creds              runner.Credentials
	vars               secret.Variables
	log                io.Writer
}

// phase runs one phase: a session on the phase endpoint, a pod that fetches its inputs
// there and uploads its outcome, the pod's log followed into the live log, and
// everything removed afterwards.
func (r *Runner) phase(ctx context.Context, req phaseReq) (Result, error) {
	job, err := newJobName(req.phase)
	if err != nil {
		return Result{}, err
	}
	masker, _ := req.log.(runner.Masker)
	sess, token, err := r.Portal.Open(Inputs{
		Description: Description{Job: job, Phase: req.phase, Kind: req.kind, RunID: req.runID, WorkspaceID: req.workspaceID,
			CloudExpires: req.creds.CloudExpires, Wiring: req.creds.Wiring},
		Config: req.config, PlanFile: req.planFile, Refresh: req.creds.Refresh, Mask: masker})
	if err != nil {
		return Result{}, err
	}
	defer r.Portal.Close(sess)
	// The followed log is kept too: it is the evidence of a pod that died before it
	// could upload its own. The follower writes it while the phase may read it.
	var followed syncio.Buffer
	spec := PodSpec{Job: job, Phase: req.phase, RunID: req.runID,
		Env:     map[string]string{EnvPhaseURL: strings.TrimRight(r.PortalURL, "/") + PathPrefix + job, EnvCloudEndpoint: r.CloudEndpoint},
		Secrets: phaseSecrets(token, req.creds, req.vars), Log: io.MultiWriter(runner.LogTo(req.log), &followed),
		Timeout: r.timeout(req.phase)}
	pod, err := r.Launcher.Launch(ctx, spec)
	if err != nil {
		return Result{}, fmt.Errorf("starting the phase's pod: %w", err)
	}
	exit, werr := pod.Wait(ctx)
	if ctx.Err() != nil {
		// Cancelled, timed out or the lease lost: nothing of the phase may stay behind.
		derr := pod.Delete(context.WithoutCancel(ctx), true)
		return Result{Log: followed.Bytes()}, errors.Join(fmt.Errorf("the job was cancelled or exceeded its time limit: %w", context.Cause(ctx)), derr)
	}
	// The pod ended: its log and credentials have no use any more.
	derr := pod.Delete(context.WithoutCancel(ctx), false)
	if werr != nil {
		return Result{Log: followed.Bytes()}, errors.Join(fmt.Errorf("waiting for the phase's pod: %w", werr), derr)
	}
	res, uploaded := sess.Result()
	if !uploaded {
		return Result{Log: followed.Bytes()}, errors.Join(exit.err(r.limits()), derr)
	}
	err = res.Error.err()
	if res.Kept != nil {
		err = r.keep(req.runID, res.Kept, err)
	}
	return res, err
}

// err is the error of a pod that ended without uploading an outcome, in the words and
// with the sentinels of the runc executor: a memory or time limit is a failed tofu
// (tofurun.ErrTofu); a pod that was deleted, evicted or killed is an interrupted
// phase (runner.ErrInterrupted), whose fate the lease decides.
func (e Exit) err(limits oci.Limits) error {
	switch {
	case e.OOMKilled:
		explain := oci.Result{ExitCode: e.ExitCode, OOMKilled: true, Limits: limits}.Explain()
		return fmt.Errorf("the phase's pod: %s: %w", explain, tofurun.ErrTofu)
	case e.DeadlineExceeded:
		explain := oci.Result{ExitCode: e.ExitCode, TimedOut: true, Timeout: e.Deadline}.Explain()
		return fmt.Errorf("the phase's pod: %s: %w", explain, tofurun.ErrTofu)
	case e.Gone != "":
		return fmt.Errorf("the phase's pod ended from outside (%s): %w", e.Gone, runner.ErrInterrupted)
	case e.ExitCode == 1 && e.Message != "":
		return fmt.Errorf("gantry-phase failed: %s", e.Message)
	}
	return fmt.Errorf("the phase's pod ended before it reported (%s): %w", oci.Result{ExitCode: e.ExitCode}.Explain(), runner.ErrInterrupted)
}

// keep writes the state an apply could not store where this portal keeps such states,
// and names the place in the error.
func (r *Runner) keep(runID string, kept *KeptStateUp, err error) error {
	where, ferr := tofurun.KeepState(r.WorkRoot, runID, kept.Data)
	if ferr != nil {
		return fmt.Errorf("%w; keeping the state the pod could not store failed: %v", err, ferr)
	}
	return fmt.Errorf("%w; the portal keeps it at %s", err, where)
}

func (r *Runner) limits() oci.Limits {
	l := r.Limits
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = oci.DefaultMemoryBytes
	}
	if l.CPUs <= 0 {
		l.CPUs = oci.DefaultCPUs
	}
	return l
}

func (r *Runner) timeout(phase string) time.Duration {
	t := r.Timeouts
	switch phase {
	case PhaseApply:
		return or(t.Apply, runner.ApplyTimeout)
	case PhaseVerify:
		return or(t.Verify, runner.VerifyTimeout)
	}
	return or(t.Plan, runner.PlanTimeout)
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// phaseSecrets are the files of the phase's Secret.
func phaseSecrets(token string, c runner.Credentials, vars secret.Variables) map[string][]byte {
	s := map[string][]byte{SecretEndpointToken: []byte(token)}
	if c.StateUsername != "" {
		s[SecretStateUsername], s[SecretStatePassword] = []byte(c.StateUsername), []byte(c.StatePassword)
	}
	if c.CloudToken != "" {
		s[SecretCloudToken] = []byte(c.CloudToken)
	}
	for name, v := range vars {
		s[secretVarPrefix+name] = []byte(v)
	}
	return s
}

// newJobName is a fresh Job name for phase: gantry-<phase>-<random>.
func newJobName(phase string) (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "gantry-" + phase + "-" + hex.EncodeToString(b), nil
}
