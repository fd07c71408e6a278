package runner

import "errors"

// ErrInterrupted is a phase whose process was ended from outside before it could report
// its outcome (runner/kube: its pod deleted or evicted, its node lost). Whether it
// changed anything is unknown, so it is neither a failure nor a success: the worker
// leaves the run to its lease, exactly as when the portal running the phase dies. River
// hands the job to its next attempt at once, which finds the phase begun under the
// job's own lease: a plan or a verification is done again, an apply becomes
// APPLY_INTERRUPTED and is never applied again (run.Applies.BeginApply).
var ErrInterrupted = errors.New("the phase was interrupted before it reported its outcome")
