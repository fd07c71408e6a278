package tofu

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestProgressLine(t *testing.T) {
	var p BuildProgress
	require.Equal(t, "OpenTofu: starting, 2s", ProgressLine("OpenTofu", &p, 1500*time.Millisecond))
	p.SetStep("waiting for another process building OpenTofu")
	require.Equal(t, "OpenTofu: waiting for another process building OpenTofu, 1m1s", ProgressLine("OpenTofu", &p, 61*time.Second))
	p.expect("Gantry", 1040)
	p.compiled("Gantry", "gantry/models/run")
	require.Equal(t, "Gantry: compiling Gantry (1 of 1040 packages), 10s", ProgressLine("Gantry", &p, 10*time.Second))
	p.SetStep("downloading modules")
	require.Equal(t, "Gantry: downloading modules (1 of 1040 packages), 10s", ProgressLine("Gantry", &p, 10*time.Second))
}

// TestProgressCountsEveryBuild: the toolchain is several builds (OpenTofu, the provider,
// gantry-fwd), all counted before the first compiles. The step never names its own
// build's count: the only count said is that of every build, the one the run pages'
// percentage is computed from (it once read "73 %" beside "1398 of 1399 packages").
func TestProgressCountsEveryBuild(t *testing.T) {
	var p BuildProgress
	p.expect("OpenTofu", 1399)
	p.expect("gantry-fwd", 521)
	for i := range 1398 {
		p.compiled("OpenTofu", fmt.Sprintf("pkg/%d", i))
	}
	step, done, total := p.Counts()
	require.Equal(t, "compiling OpenTofu", step, "the step carries no count of its own")
	require.Equal(t, [2]int{1398, 1920}, [2]int{done, total})
	require.Equal(t, "OpenTofu: compiling OpenTofu (1398 of 1920 packages), 4m0s", ProgressLine("OpenTofu", &p, 4*time.Minute))
	p.mirror("gantry-fwd", 20, 521, "another process is building gantry-fwd")
	step, done, total = p.Counts()
	require.Equal(t, "another process is building gantry-fwd", step)
	require.Equal(t, [2]int{1418, 1920}, [2]int{done, total})
}

// TestReportWritesALineEveryInterval: a line per interval while the build runs, none
// once stop has returned.
func TestReportWritesALineEveryInterval(t *testing.T) {
	var p BuildProgress
	p.SetStep("compiling OpenTofu")
	out := &syncBuffer{wrote: make(chan struct{}, 16)}
	stop := Report(out, "OpenTofu", &p, 20*time.Millisecond)
	for range 3 {
		<-out.wrote // woken by each line the ticker writes
	}
	stop()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.GreaterOrEqual(t, len(lines), 3, out.String())
	require.True(t, strings.HasPrefix(lines[0], "OpenTofu: compiling OpenTofu, "), lines[0])
	// Absence can only be seen over a span: a ticker left running would write again
	// within 20 ms; five intervals of nothing say that stop ended it.
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, len(lines), strings.Count(out.String(), "\n"), "nothing after stop")
}

// syncBuffer is a bytes.Buffer written from one goroutine and read from another.
type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // told of every write (nil: nobody listens)
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote != nil {
		select {
		case s.wrote <- struct{}{}:
		default:
		}
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
