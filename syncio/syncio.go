// Package syncio holds the writers several goroutines share: a process's stdout and
// stderr copied by two goroutines, a log a follower writes while a phase reads it, a
// build's messages and its progress lines. It is a leaf, so that the runners and the
// tests beside cmd/ and deploy/ use the same two types instead of each keeping a mutex
// of its own.
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer serialises writes to an io.Writer that is not safe for concurrent use. It
// never uses ReadFrom: a bytes.Buffer's would read past another goroutine's write.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer passing every write on to w, one at a time.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Locked runs read while no write is under way: to read what the writes went to.
func (l *Writer) Locked(read func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	read()
}

// Buffer is a bytes.Buffer written by some goroutines while others read it. Its zero
// value is empty and ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
