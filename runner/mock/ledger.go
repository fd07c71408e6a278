package mock

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// The applies ledger: the mock's side effect, made countable. Each simulated apply
// appends one line "sha256:<plan digest> <run id>" (the digest as runs record it) to a file (O_APPEND, synced), before its
// result is returned, so an apply that happened is on record even if the portal dies
// the next instant. The chaos suite reads it: no plan digest may appear twice.

// Ledger is an append-only record of the applies a mock executor made.
type Ledger struct {
	mu   sync.Mutex
	path string
}

// NewLedger records applies in the file at path (created when missing).
func NewLedger(path string) *Ledger { return &Ledger{path: path} }

// NewRecording returns a runner recording its applies in l.
func NewRecording(l *Ledger) *Runner { return &Runner{ledger: l} }

// record appends one apply of the plan file planFile for run runID.
func (l *Ledger) record(planFile []byte, runID string) error {
	if l == nil {
		return nil
	}
	sum := sha256.Sum256(planFile)
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the applies ledger: %w", err)
	}
	_, err = fmt.Fprintf(f, "sha256:%s %s\n", hex.EncodeToString(sum[:]), runID)
	return errors.Join(err, f.Sync(), f.Close())
}

// ReadLedger returns the runs that applied each plan digest, in order (an empty map
// when the file does not exist yet).
func ReadLedger(path string) (map[string][]string, error) {
	out := map[string][]string{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		digest, runID, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return nil, fmt.Errorf("applies ledger: malformed line %q", sc.Text())
		}
		out[digest] = append(out[digest], runID)
	}
	return out, sc.Err()
}
