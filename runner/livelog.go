package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"
	"unicode/utf8"
)

// Masked stands in for a secret wherever a live log chunk would have shown it: a fixed
// marker, so nothing of the value (not even its length) is told.
const Masked = "[masked]"

// Live log defaults: a chunk is stored at least this often while output arrives, and
// no chunk is much larger than this (a page that reconnects reads few rows).
const (
	LiveLogEvery = 250 * time.Millisecond
	LiveLogChunk = 8 << 10
)

// maxHeld bounds what is held back unmasked, waiting to see whether it completes a
// secret: only pathological output (a secret's own overlapping repetitions, written
// without end) holds more than a secret's length, and past this much it is masked as
// far as it is known and let go.
const maxHeld = 64 << 10

// ChunkStore stores one chunk of a phase's live log: masked text, in order.
type ChunkStore func(ctx context.Context, text []byte) error

// LiveLog is what a phase writes its log to while it runs (a request's Log): it cuts the
// output into chunks of complete lines, masks the phase's secrets in them and hands
// each to its store, at least every LiveLogEvery while output arrives, whenever
// LiveLogChunk bytes are waiting, and at Close. A line still incomplete a tick later
// is stored as far as it goes; a very long one is split.
//
// No chunk ever holds a secret or a piece of one: output that may be the beginning of a
// secret (a secret split across two writes) is held back until the next write says
// whether it is, so a flush in the middle of a line never cuts through one.
//
// Writes never fail: the live view must not fail the phase, whose whole log is kept as
// evidence by the runner anyway. A chunk the store refuses stays pending and is offered
// again at the next flush.
type LiveLog struct {
	ctx     context.Context
	store   ChunkStore
	logger  *slog.Logger
	secrets [][]byte
	every   time.Duration
	size    int

	mu     sync.Mutex
	held   []byte // unmasked: its end may be the start of a secret
	ready  []byte // masked, not stored yet
	timer  *time.Timer
	closed bool
}

// NewLiveLog returns a live log storing chunks with store, masking secrets (empty ones
// are ignored). The store is called with ctx, and one last time at Close without its
// cancellation (the chunks of a phase that timed out are still worth showing).
func NewLiveLog(ctx context.Context, store ChunkStore, logger *slog.Logger, secrets ...string) *LiveLog {
	if logger == nil {
		logger = slog.Default()
	}
	return &LiveLog{ctx: ctx, store: store, logger: logger, secrets: secretForms(secrets), every: LiveLogEvery, size: LiveLogChunk}
}

// secretForms are the byte strings to mask for secrets: each value, and its JSON
// escaping when that differs (tofu prints a string with quotes or newlines escaped),
// longest first, without duplicates.
func secretForms(secrets []string) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, []byte(s))
		}
	}
	for _, s := range secrets {
		add(s)
		if quoted, err := json.Marshal(s); err == nil {
			add(string(quoted[1 : len(quoted)-1]))
		}
	}
	slices.SortFunc(out, func(a, b []byte) int { return len(b) - len(a) })
	return out
}

// Write takes p into the log. It never fails.
func (l *LiveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return len(p), nil
	}
	l.absorb(p, false)
	if len(l.ready) >= l.size {
		l.flush(false, false)
	}
	if len(l.ready) > 0 && l.timer == nil {
		l.timer = time.AfterFunc(l.every, l.tick)
	}
	return len(p), nil
}

// tick is the timer's flush: complete lines, or, when no line is complete, the
// incomplete one as far as it is known.
func (l *LiveLog) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.closed {
		return
	}
	l.flush(!bytes.Contains(l.ready, []byte("\n")), false)
	if len(l.ready) > 0 {
		l.timer = time.AfterFunc(l.every, l.tick)
	}
}

// Close stores everything still pending (nothing is held back any more: no write
// follows to complete a secret). Writes after Close are dropped.
func (l *LiveLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.absorb(nil, true)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), 10*time.Second)
	defer cancel()
	l.ctx = ctx
	l.flush(true, true)
	return nil
}

// absorb masks what arrived behind what was held back and moves to ready all of it that
// can no longer become part of a secret; final: all of it.
func (l *LiveLog) absorb(p []byte, final bool) {
	raw := append(l.held, p...)
	covered := l.coverage(raw)
	cut := len(raw)
	if !final {
		cut -= l.startOfSecret(raw)
		// A secret found across the cut is held back whole: the next write may extend
		// it into a longer (overlapping) one.
		for cut > 0 && cut < len(raw) && covered[cut-1] && covered[cut] {
			cut--
		}
		if len(raw)-cut > maxHeld {
			cut = len(raw) - l.startOfSecret(raw)
		}
	}
	l.ready = appendMasked(l.ready, raw[:cut], covered[:cut])
	l.held = append([]byte(nil), raw[cut:]...)
}

// Mask returns text with every secret of the log masked as its chunks are: a phase's
// whole log at once (the log a runner returns holds what it printed, in clear; it is
// stored as the phase's evidence and shown once the phase ends).
func (l *LiveLog) Mask(text []byte) []byte {
	if len(text) == 0 {
		return text
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return appendMasked(nil, text, l.coverage(text))
}

// AddSecret masks secret too, from now on and in Mask: a credential minted while the
// phase runs (a refreshed workload token, see KeepFresh) is added before the job gets
// it, so nothing the job prints of it is ever stored in clear.
func (l *LiveLog) AddSecret(secret string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range secretForms([]string{secret}) {
		if !slices.ContainsFunc(l.secrets, func(s []byte) bool { return bytes.Equal(s, f) }) {
			l.secrets = append(l.secrets, f)
		}
	}
	slices.SortFunc(l.secrets, func(a, b []byte) int { return len(b) - len(a) })
}

// coverage marks every byte of raw that belongs to an occurrence of a secret
// (occurrences may overlap).
func (l *LiveLog) coverage(raw []byte) []bool {
	covered := make([]bool, len(raw))
	for _, s := range l.secrets {
		for off := 0; off < len(raw); {
			i := bytes.Index(raw[off:], s)
			if i < 0 {
				break
			}
			for j := off + i; j < off+i+len(s); j++ {
				covered[j] = true
			}
			off += i + 1
		}
	}
	return covered
}

// startOfSecret is the length of the longest end of raw that is the beginning (not the
// whole) of a secret: what must wait for the next write.
func (l *LiveLog) startOfSecret(raw []byte) int {
	longest := 0
	for _, s := range l.secrets {
		for k := min(len(s)-1, len(raw)); k > longest; k-- {
			if bytes.HasSuffix(raw, s[:k]) {
				longest = k
				break
			}
		}
	}
	return longest
}

// appendMasked appends raw to dst with every run of covered bytes replaced by one
// marker.
func appendMasked(dst, raw []byte, covered []bool) []byte {
	for i := 0; i < len(raw); {
		if !covered[i] {
			dst = append(dst, raw[i])
			i++
			continue
		}
		dst = append(dst, Masked...)
		for i < len(raw) && covered[i] {
			i++
		}
	}
	return dst
}

// flush stores ready in chunks: complete lines, at most size bytes each unless one line
// is longer (then split at a character boundary); partial: the last, incomplete line
// too; final: everything. A refused chunk stays for the next flush.
func (l *LiveLog) flush(partial, final bool) {
	for len(l.ready) > 0 {
		n := chunkEnd(l.ready, l.size, partial, final)
		if n == 0 {
			return
		}
		if err := l.store(l.ctx, l.ready[:n]); err != nil {
			l.logger.WarnContext(l.ctx, "storing a live log chunk; it is offered again at the next flush", "error", err)
			return
		}
		l.ready = l.ready[n:]
	}
}

// chunkEnd is how much of b the next chunk takes (0: nothing yet).
func chunkEnd(b []byte, size int, partial, final bool) int {
	limit := min(len(b), size)
	if i := bytes.LastIndexByte(b[:limit], '\n'); i >= 0 {
		return i + 1
	}
	if final && limit == len(b) {
		return limit
	}
	if len(b) > size || partial || final {
		return runeBoundary(b, limit)
	}
	return 0
}

// runeBoundary is limit, or less when b[:limit] ends in the middle of a UTF-8 sequence:
// a chunk is text, and a character cut in two would show as two broken ones. (An
// invalid sequence counts as complete: it never becomes a character.)
func runeBoundary(b []byte, limit int) int {
	start := limit - 1
	for start > 0 && limit-start < utf8.UTFMax && !utf8.RuneStart(b[start]) {
		start--
	}
	if start < 0 || utf8.FullRune(b[start:limit]) {
		return limit
	}
	return start
}
