package run

import "gantry/models/runport"

// The vocabulary runs share with the aggregates below them is defined in models/runport,
// so that org, state, catalog and breakglass's store implement what runs need, and
// governance reports on drift, without importing models/run;
// these names keep it at hand inside the run lifecycle.
type (
	Member           = runport.Member
	OrgMember        = runport.OrgMember
	MemberWatcher    = runport.MemberWatcher
	Predecessor      = runport.Predecessor
	StateWatcher     = runport.StateWatcher
	StateVersionInfo = runport.StateVersionInfo
	StateResource    = runport.StateResource
	Validated        = runport.Validated
	RunnerInfo       = runport.RunnerInfo
	InputValue       = runport.InputValue
	TemplateFacts    = runport.TemplateFacts
	DriftStatus      = runport.DriftStatus
	Verdict          = runport.Verdict
	WindowInfo       = runport.WindowInfo
	DriftCheck       = runport.DriftCheck
)

// The findings of a drift check (runport.DriftStatus).
const (
	DriftClean    = runport.DriftClean
	DriftExpected = runport.DriftExpected
	DriftUnowned  = runport.DriftUnowned
)

// NoPredecessor is runport.NoPredecessor: a plan computed against no state.
const NoPredecessor = runport.NoPredecessor
