package cloud

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"
)

// The applies ledger: the cloud counts applies per plan digest. Every apply token Gantry
// mints names the digest of the plan it applies (gantry_plan) and its attempt at it (the
// apply's lease, gantry_lease). The first change an attempt asks for is recorded, durably,
// before it is made. A plan digest with two attempts is a plan applied twice: what Gantry's
// one rule forbids, and what its chaos and scale-out tests look for here, on the far side of
// every fault Gantry can suffer.
//
// The ledger counts attempts, not successes: an attempt whose change was refused (a bad
// attribute, a conflict) still tried to apply the plan.

// appliesFile is the ledger, one JSON line per attempt, appended and synced.
const appliesFile = "applies.jsonl"

// ApplyAttempt is one attempt at applying a plan: an apply token's first change.
type ApplyAttempt struct {
	PlanDigest string    `json:"plan_digest"`
	Run        string    `json:"run"`
	Lease      int64     `json:"lease"`
	Org        string    `json:"org"`
	Env        string    `json:"env"`
	Workspace  string    `json:"workspace"`
	At         time.Time `json:"at"`
}

// PlanApplies is every attempt at one plan digest, oldest first.
type PlanApplies struct {
	PlanDigest string         `json:"plan_digest"`
	Attempts   []ApplyAttempt `json:"attempts"`
}

// Applies is the ledger by plan digest (GET /admin/v1/applies), sorted by digest.
type Applies struct {
	Plans []PlanApplies `json:"plans"`
}

// Twice lists the plan digests with more than one attempt: plans applied twice.
func (a Applies) Twice() []PlanApplies {
	var out []PlanApplies
	for _, p := range a.Plans {
		if len(p.Attempts) > 1 {
			out = append(out, p)
		}
	}
	return out
}

// planDigestRe is a plan digest as Gantry records it.
var planDigestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// attemptKey names one attempt.
type attemptKey struct {
	digest, run string
	lease       int64
}

// appliesLedger appends attempts to <DataDir>/applies.jsonl, each once per process (the
// file is read at start, so a restarted cloud does not record an attempt again; two
// servers on one directory may, and ReadApplies counts each attempt once).
type appliesLedger struct {
	path string
	mu   sync.Mutex
	seen map[attemptKey]bool
}

func newAppliesLedger(dataDir string) (*appliesLedger, error) {
	l := &appliesLedger{path: filepath.Join(dataDir, appliesFile), seen: map[attemptKey]bool{}}
	a, err := ReadApplies(dataDir)
	if err != nil {
		return nil, err
	}
	for _, p := range a.Plans {
		for _, at := range p.Attempts {
			l.seen[attemptKey{at.PlanDigest, at.Run, at.Lease}] = true
		}
	}
	return l, nil
}

// record notes who's attempt, durably, unless it is noted already. who is an apply token's
// identity (authenticate checked its plan digest and lease).
func (l *appliesLedger) record(who Identity, at time.Time) error {
	key := attemptKey{who.PlanDigest, who.Run, who.Lease}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[key] {
		return nil
	}
	line, err := json.Marshal(ApplyAttempt{PlanDigest: who.PlanDigest, Run: who.Run, Lease: who.Lease,
		Org: who.Org, Env: who.Env, Workspace: who.Workspace, At: at})
	if err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the applies ledger: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("recording an apply in the ledger: %w", err)
	}
	l.seen[key] = true
	return nil
}

// ReadApplies reads the applies ledger of the cloud whose data directory is dataDir, each
// attempt once. A line cut short by a crash (the last one) is skipped; any other damage is
// an error.
func ReadApplies(dataDir string) (Applies, error) {
	f, err := os.Open(filepath.Join(dataDir, appliesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Applies{Plans: []PlanApplies{}}, nil
	}
	if err != nil {
		return Applies{}, fmt.Errorf("reading the applies ledger: %w", err)
	}
	defer f.Close()
	byDigest := map[string][]ApplyAttempt{}
	seen := map[attemptKey]bool{}
	sc := bufio.NewScanner(f)
	var bad error
	for n := 1; sc.Scan(); n++ {
		if bad != nil {
			return Applies{}, bad // a damaged line that was not the last one
		}
		var a ApplyAttempt
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil || !planDigestRe.MatchString(a.PlanDigest) {
			bad = fmt.Errorf("the applies ledger is damaged at line %d", n)
			continue
		}
		key := attemptKey{a.PlanDigest, a.Run, a.Lease}
		if seen[key] {
			continue
		}
		seen[key] = true
		byDigest[a.PlanDigest] = append(byDigest[a.PlanDigest], a)
	}
	if err := sc.Err(); err != nil {
		return Applies{}, fmt.Errorf("reading the applies ledger: %w", err)
	}
	out := Applies{Plans: make([]PlanApplies, 0, len(byDigest))}
	for d, attempts := range byDigest {
		sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].At.Before(attempts[j].At) })
		out.Plans = append(out.Plans, PlanApplies{PlanDigest: d, Attempts: attempts})
	}
	sort.Slice(out.Plans, func(i, j int) bool { return out.Plans[i].PlanDigest < out.Plans[j].PlanDigest })
	return out, nil
}

// adminApplies answers GET /admin/v1/applies: the ledger by plan digest.
func (s *Server) adminApplies(w http.ResponseWriter, r *http.Request) {
	if !s.adminAllowed(w, r) {
		return
	}
	a, err := ReadApplies(s.cfg.DataDir)
	if err != nil {
		s.log.Error("sandbox cloud: reading the applies ledger", "error", err)
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}
