package runport

// What a drift check found, in the words governance reports and the run pages share.

// DriftStatus sums up what a drift check found.
type DriftStatus string

const (
	// DriftClean: the live resources match the state.
	DriftClean DriftStatus = "clean"
	// DriftExpected: every drifted resource was changed through a break-glass window of
	// the workspace: a manual change on the record, waiting to be codified.
	DriftExpected DriftStatus = "expected"
	// DriftUnowned: some resource was changed by nobody Gantry knows of.
	DriftUnowned DriftStatus = "unowned"
)

// Label is the status in a few words, for lists and badges.
func (s DriftStatus) Label() string {
	switch s {
	case DriftClean:
		return "no drift"
	case DriftExpected:
		return "drift from a break-glass window"
	case DriftUnowned:
		return "unowned drift"
	}
	return "not checked"
}
