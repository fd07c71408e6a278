package syncio_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/syncio"
)

// write has n goroutines write line to w lines times each while read reads.
func write(w interface{ Write([]byte) (int, error) }, n, lines int, line string, read func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for range lines {
				_, _ = w.Write([]byte(line))
				read()
			}
		})
	}
	wg.Wait()
}

// TestWriterSerialises: writes from many goroutines reach a bytes.Buffer whole, one at
// a time (go test -race sees no race), and Locked reads it between them.
func TestWriterSerialises(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := syncio.NewWriter(&out)
	write(w, 8, 100, "a line\n", func() { w.Locked(func() { _ = out.Len() }) })
	require.Equal(t, strings.Repeat("a line\n", 800), out.String())
}

// TestBufferReadsWhileWritten: a Buffer is read while it is written, and its Bytes is a
// copy the writes do not change.
func TestBufferReadsWhileWritten(t *testing.T) {
	t.Parallel()
	var b syncio.Buffer
	write(&b, 8, 100, "a line\n", func() { _ = b.String() })
	require.Equal(t, strings.Repeat("a line\n", 800), b.String())
	got := b.Bytes()
	_, _ = b.Write([]byte("more"))
	require.Equal(t, strings.Repeat("a line\n", 800), string(got))
}
