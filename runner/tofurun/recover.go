package tofurun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gantry/runner"
)

// What an apply does when tofu could not store its state.
//
// `tofu apply` writes the new state to Gantry's http backend at the end. The backend
// answers 503 while its database is away (a restart), and tofu retries that for about
// 40 s (tofu.Env: TF_HTTP_RETRY_MAX, TF_HTTP_RETRY_WAIT_MAX). Past that it gives up,
// leaves the state it could not store in errored.tfstate in the working directory and
// exits 1; usually it could not unlock either, so the workspace lock stays held under
// its lock id. The job's directory is removed when the phase ends, and with it the only
// record of what the apply created: so the runner pushes the file itself
// (`tofu state push errored.tfstate`, with the phase's own credential, whose lock the
// backend lets the push take again as the same holding), retrying with backoff for
// StateRecovery while the phase lives: the credential is the phase's and is revoked
// when it ends.

// DefaultStateRecovery is how long a left-behind state is pushed for, by default.
const DefaultStateRecovery = 2 * time.Minute

// erroredState is the file tofu writes the state it could not store to.
const erroredState = "errored.tfstate"

// ErrStateNotStored is an apply whose state tofu could not store and the runner could
// not push afterwards either: the resources it changed are in no state version. The
// state is kept on the host (the error says where) for an admin to recover.
var ErrStateNotStored = errors.New("the apply's state could not be stored")

// logSnapshot returns a copy of the job log so far. The token refresher may be writing
// to it, so it is read under the log writer's lock.
func (j *job) logSnapshot() []byte {
	var snapshot []byte
	j.out.Locked(func() { snapshot = bytes.Clone(j.log.Bytes()) })
	return snapshot
}

// recoverState follows an apply that failed with applyErr, whose output was applyLog.
// Without an errored.tfstate there is nothing to recover: the failure stands as it is.
//
// With one, the outcome (a decision, not tofu's exit code):
//   - pushed, and the state was tofu's only failure: the apply applied and its state is
//     stored, under this run's credential, as the version the apply should have written.
//     Recording it as applied is honest: the worker finds that version (FinishApply), and
//     the verification that follows compares the live resources with it like after any
//     apply. The log says the state was recovered.
//   - pushed, but the apply had failed too (a resource error): the apply failed, with its
//     partial state stored (what it did create is in the workspace's state, not lost).
//   - not pushed (the backend stayed away past StateRecovery, or the phase ended): the
//     apply must not read as applied, since nothing proves its state landed. It fails
//     with ErrStateNotStored, and the file is kept on the host (see keep) rather than
//     removed with the working directory.
func (j *job) recoverState(ctx context.Context, runID string, applyLog []byte, applyErr error) (runner.ApplyResult, error) {
	data, err := readRegular(filepath.Join(j.dir, erroredState))
	if errors.Is(err, fs.ErrNotExist) {
		return runner.ApplyResult{}, applyErr
	}
	if err != nil {
		fmt.Fprintf(j.out, "\n# %s is unusable: %v\n", erroredState, err)
		return runner.ApplyResult{}, applyErr
	}
	window := j.r.StateRecovery
	if window <= 0 {
		window = DefaultStateRecovery
	}
	fmt.Fprintf(j.out, "\n# tofu could not store the state of this apply and left it in %s: pushing it to the state backend (for up to %s)\n",
		erroredState, window)
	if err := j.pushState(ctx, window); err != nil {
		where, kerr := KeepState(j.r.WorkRoot, runID, data)
		if kerr != nil {
			fmt.Fprintf(j.out, "# the state was not stored, and keeping %s failed: %v\n", erroredState, kerr)
			return runner.ApplyResult{}, fmt.Errorf("%w: %w; pushing it failed (%v), and keeping it failed: %v", ErrStateNotStored, applyErr, err, kerr)
		}
		fmt.Fprintf(j.out, "# the state was not stored: %s is kept on the runner's host at %s\n", erroredState, where)
		return runner.ApplyResult{}, fmt.Errorf("%w: %w; pushing the %s tofu left failed (%v); it is kept on the runner's host at %s",
			ErrStateNotStored, applyErr, erroredState, err, where)
	}
	fmt.Fprintf(j.out, "# state recovered: %s is stored in the state backend\n", erroredState)
	if !onlyStateFailed(applyLog) {
		return runner.ApplyResult{}, fmt.Errorf("%w (the state it left behind was stored afterwards)", applyErr)
	}
	outputs, err := j.capture(ctx, "output", "-json")
	if err != nil {
		return runner.ApplyResult{}, err
	}
	return runner.ApplyResult{Outputs: outputs}, nil
}

// pushState runs `tofu state push errored.tfstate` until it succeeds, for at most window
// and while ctx lives, waiting longer after each failure. Each attempt already retries
// a backend that answers 5xx (tofu's own retries); the backend refuses a state that does
// not follow the workspace's (lineage, serial), so a push can never overwrite a newer
// one.
func (j *job) pushState(ctx context.Context, window time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	wait := time.Second
	for attempt := 1; ; attempt++ {
		_, err := j.tofu(ctx, []int{0}, "state", "push", "-no-color", "-lock-timeout="+lockTimeout, erroredState)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d attempts: %w", attempt, err)
		}
		fmt.Fprintf(j.out, "# the push failed; trying again in %s\n", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d attempts: %w", attempt, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
	}
}

// KeptStates is the directory beside a work root where the states applies could not
// store are kept: not inside it, since a restarted portal empties its work root
// (cmd/gantry sweepScratch), and with a "+", which no replica's tag (and so no other
// replica's work root) contains.
func KeptStates(workRoot string) string { return filepath.Clean(workRoot) + "+errored-states" }

// KeepState writes a state that could not be stored to KeptStates(workRoot) (0700, the file 0600,
// owned by the portal: the copy is read, never the job's file moved) and returns its
// path. The work root already holds the jobs' plan files and states while they run; this
// copy outlives the job so that an admin can push it (the apply's error, and so the
// failed run's reason, names it). It is not in the database: the database may be what
// is away.
func KeepState(workRoot, runID string, data []byte) (string, error) {
	dir := KeptStates(workRoot)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, safeName(runID)+"-*.tfstate") // mode 0600
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// safeName keeps a run id to the characters a file name may safely carry.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
	if s == "" {
		return "run"
	}
	return s
}

// diagnosticSummary matches the first line of an error diagnostic as tofu prints it:
// "Error: <summary>" (with -no-color), or inside the box drawn around it otherwise.
var diagnosticSummary = regexp.MustCompile(`(?m)^(?:│ )?Error: (.+?)\s*$`)

// stateSaving are the summaries of the errors tofu reports when the apply itself
// succeeded but storing its state, and then unlocking, failed (OpenTofu
// internal/backend/local/backend_apply.go, internal/command/clistate).
var stateSaving = map[string]bool{
	"Failed to save state":               true,
	"Failed to persist state to backend": true,
	"Error releasing the state lock":     true,
}

// onlyStateFailed reports whether the apply's output shows that storing the state was
// all that failed: it reports that (the "Failed to persist state to backend"
// diagnostic) and no error other than the state-saving ones. Anything else, or output
// it cannot read, counts as a failed apply: a wrong "failed" costs a rerun, a wrong
// "applied" would hide a half-done change.
func onlyStateFailed(applyLog []byte) bool {
	persisted := false
	for _, m := range diagnosticSummary.FindAllSubmatch(applyLog, -1) {
		summary := string(m[1])
		if !stateSaving[summary] {
			return false
		}
		persisted = persisted || summary == "Failed to persist state to backend"
	}
	return persisted
}
