package runport

import "fmt"

// Preparation is how far an executor's preparation has come: in development the OpenTofu
// toolchain builds in the background for minutes after the portal already serves. The
// runners report it (runner.Preparing); the run page shows it while a run's next phase
// waits for it (models/pages).
type Preparation struct {
	// What is being prepared, for people: "the OpenTofu build".
	What string
	// Step is what happens now: "compiling OpenTofu", without a count (the count shown
	// is Done of Total, what Percent is computed from).
	Step string
	// Done and Total count the work (packages compiled of those needed); Total 0 means
	// not known yet.
	Done, Total int
	// Failed is why the preparation failed; the executor then cannot run jobs.
	Failed string
}

// Percent is the share of the work done, 0 to 100 (99 at most until it is finished:
// linking and the last steps come after the last package).
func (p Preparation) Percent() int {
	if p.Total <= 0 {
		return 0
	}
	return min(99, p.Done*100/p.Total)
}

// Waiting says, in one line, what a job on this executor waits for.
func (p Preparation) Waiting() string {
	return fmt.Sprintf("waiting for %s (%d %%)", p.What, p.Percent())
}
