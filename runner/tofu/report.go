package tofu

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Report writes a progress line for the build of label to out every interval, until the
// returned stop is called (once or more): what `go tool task dev` and `tofu:build` show while a build
// runs, so that a terminal never sits silent for minutes.
func Report(out io.Writer, label string, p *BuildProgress, every time.Duration) (stop func()) {
	started := time.Now()
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				fmt.Fprintln(out, ProgressLine(label, p, time.Since(started)))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-ended
	}
}

// ProgressLine says how far the build of label has come: "OpenTofu: compiling OpenTofu
// (338 of 1399 packages), 4m0s". The count, once the builds are counted, is that of all
// of them (Counts): the one the run pages' percentage is computed from.
func ProgressLine(label string, p *BuildProgress, elapsed time.Duration) string {
	step, done, total := p.Counts()
	if step == "" {
		step = "starting"
	}
	if total > 0 {
		step += fmt.Sprintf(" (%d of %d packages)", done, total)
	}
	return fmt.Sprintf("%s: %s, %s", label, step, elapsed.Round(time.Second))
}
