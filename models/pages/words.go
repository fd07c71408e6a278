package pages

import "gantry/models/run"

// runStateWords says a run state's code in the run state table's words: what the audit
// history's sentences say of a run's move (audit.Names.RunStates), the same words as
// the run's badge.
func runStateWords(code string) string { return run.State(code).Words() }
