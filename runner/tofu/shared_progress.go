package tofu

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A pinned build is shared between processes (tools/tofubuild started by `go tool task dev`,
// gantry dev, parallel test binaries): one holds the lock and builds, the others wait. So
// that a waiter can still say how far the build has come, the builder writes its count of
// compiled packages to a file beside the lock, "<done> <total>", about every second, and
// removes it when it ends; a waiter mirrors it into its own progress.

// progressEvery is how often the builder writes its count and a waiter reads it.
const progressEvery = time.Second

// progressFile is where the build of the binary at path publishes its count.
func progressFile(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".progress")
}

// publishProgress writes label's count in p to file every progressEvery until the
// returned stop is called, which removes the file.
func publishProgress(file, label string, p *BuildProgress) (stop func()) {
	tmp := file + ".tmp-" + strconv.Itoa(os.Getpid())
	end := repeat(func() {
		n, total := p.countsOf(label)
		if os.WriteFile(tmp, fmt.Appendf(nil, "%d %d\n", n, total), 0o644) == nil {
			_ = os.Rename(tmp, file)
		}
	})
	return func() {
		end()
		_ = os.Remove(file)
	}
}

// mirrorProgress reads file every progressEvery into p as label's count, saying that
// another process builds, until the returned stop is called.
func mirrorProgress(file, label string, p *BuildProgress) (stop func()) {
	if p == nil {
		return func() {}
	}
	return repeat(func() {
		if n, total, ok := readProgress(file); ok {
			p.mirror(label, n, total, "another process is building "+label)
		}
	})
}

// repeat calls f at once and then every progressEvery, on a goroutine of its own, until
// the returned stop is called; stop returns once f has run for the last time.
func repeat(f func()) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			f()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// readProgress reads "<done> <total>" from file.
func readProgress(file string) (done, total int, ok bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	done, err1 := strconv.Atoi(f[0])
	total, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || done < 0 || total < done {
		return 0, 0, false
	}
	return done, total, true
}
