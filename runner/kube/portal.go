package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"gantry/runner"
)

// DefaultMaxResultBytes bounds a phase's uploaded outcome (its plan file, plan JSON and
// log, base64 in JSON) when Portal.MaxResultBytes is unset.
const DefaultMaxResultBytes = 512 << 20

// Portal is the phase endpoint: the job-scoped sessions of the phases this portal
// process runs as Jobs, and the HTTP handler the pods reach them through (served below
// PathPrefix on the runner listener). A session lives in memory from just before its
// Job is created until its phase ends, and answers only to its own endpoint token: a
// pod sees nothing of any other run.
type Portal struct {
	// MaxResultBytes bounds an upload (zero: DefaultMaxResultBytes).
	MaxResultBytes int64

	mu       sync.Mutex
	sessions map[string]*Session
}

// NewPortal returns an endpoint with no sessions.
func NewPortal() *Portal { return &Portal{sessions: map[string]*Session{}} }

// Inputs are what a phase's pod fetches, and what the endpoint does for it.
type Inputs struct {
	Description
	Config   []byte
	PlanFile []byte // an apply's saved plan
	// Refresh mints the phase's next workload token (nil: the token is not refreshed).
	Refresh func(ctx context.Context) (string, time.Time, error)
	// Mask hears of every token minted here before the pod gets it (the phase's live log).
	Mask runner.Masker
}

// Session is one phase's state on the endpoint.
type Session struct {
	in    Inputs
	token [sha256.Size]byte // sha256 of the endpoint token: the token itself is not kept

	mu     sync.Mutex
	result *Result
	done   chan struct{}
}

// Done is closed once the pod uploaded the phase's outcome.
func (s *Session) Done() <-chan struct{} { return s.done }

// Result is the uploaded outcome, once Done is closed.
func (s *Session) Result() (Result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.result == nil {
		return Result{}, false
	}
	return *s.result, true
}

// jobName is what a Job name may be (a DNS label), and so a session's key.
var jobName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Open starts the session of the Job in.Job and returns it with its endpoint token
// (random, 256 bits; the token goes into the Job's Secret and nowhere else).
func (p *Portal) Open(in Inputs) (*Session, string, error) {
	if !jobName.MatchString(in.Job) {
		return nil, "", fmt.Errorf("phase endpoint: %q is not a Job name", in.Job)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, "", err
	}
	token := hex.EncodeToString(raw)
	in.Refreshable = in.Refresh != nil && !in.CloudExpires.IsZero()
	s := &Session{in: in, token: sha256.Sum256([]byte(token)), done: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions == nil {
		p.sessions = map[string]*Session{}
	}
	if _, dup := p.sessions[in.Job]; dup {
		return nil, "", fmt.Errorf("phase endpoint: a session for Job %s is open already", in.Job)
	}
	p.sessions[in.Job] = s
	return s, token, nil
}

// Close ends the session of s: from now on its Job's requests are 404, whatever token
// they carry.
func (p *Portal) Close(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sessions[s.in.Job] == s {
		delete(p.sessions, s.in.Job)
	}
}

// Sessions is the number of open sessions (tests check none is left).
func (p *Portal) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// ServeHTTP answers a pod: PathPrefix<job>[/config|/plan|/token|/result].
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	job, resource, _ := strings.Cut(rest, "/")
	if resource != "" {
		resource = "/" + resource
	}
	p.mu.Lock()
	s := p.sessions[job]
	p.mu.Unlock()
	if s == nil {
		// No session: another replica's Job, one whose phase ended, or none at all.
		http.Error(w, "no phase session for this Job", http.StatusNotFound)
		return
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || bearer == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gantry-phase"`)
		http.Error(w, "the phase endpoint token is missing", http.StatusUnauthorized)
		return
	}
	sum := sha256.Sum256([]byte(bearer))
	if subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
		// A token of another phase (another run's, or an earlier phase's) is not this one's.
		http.Error(w, "this token is not this Job's", http.StatusForbidden)
		return
	}
	switch {
	case resource == "" && r.Method == http.MethodGet:
		writeJSON(w, s.in.Description)
	case resource == pathConfig && r.Method == http.MethodGet:
		writeBlob(w, s.in.Config)
	case resource == pathPlan && r.Method == http.MethodGet:
		if s.in.Phase != PhaseApply {
			http.Error(w, "only an apply has a plan file", http.StatusNotFound)
			return
		}
		writeBlob(w, s.in.PlanFile)
	case resource == pathToken && r.Method == http.MethodPost:
		s.refresh(w, r)
	case resource == pathResult && r.Method == http.MethodPost:
		p.upload(w, r, s)
	case resource == "" || resource == pathConfig || resource == pathPlan || resource == pathToken || resource == pathResult:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	default:
		http.NotFound(w, r)
	}
}

// refresh mints the phase's next workload token. The live log masks it before the pod
// gets it, so nothing tofu prints of it is stored in clear.
func (s *Session) refresh(w http.ResponseWriter, r *http.Request) {
	if !s.in.Refreshable {
		http.Error(w, "this phase's cloud credential is not refreshed", http.StatusConflict)
		return
	}
	token, expires, err := s.in.Refresh(r.Context())
	if err != nil {
		http.Error(w, "minting a fresh workload token failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if s.in.Mask != nil {
		s.in.Mask.AddSecret(token)
	}
	writeJSON(w, TokenAnswer{Token: token, Expires: expires})
}

// upload takes the phase's outcome, once: a second upload is refused (409), whatever it
// says, so nothing a pod does after its phase reported can change what the portal
// records.
func (p *Portal) upload(w http.ResponseWriter, r *http.Request, s *Session) {
	limit := p.MaxResultBytes
	if limit <= 0 {
		limit = DefaultMaxResultBytes
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		http.Error(w, "reading the result: "+err.Error(), http.StatusBadRequest)
		return
	}
	if int64(len(body)) > limit {
		http.Error(w, fmt.Sprintf("the result exceeds %d bytes", limit), http.StatusRequestEntityTooLarge)
		return
	}
	var res Result
	if err := json.Unmarshal(body, &res); err != nil {
		http.Error(w, "the result is not a phase result: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.result != nil {
		http.Error(w, "this phase's result was uploaded already", http.StatusConflict)
		return
	}
	s.result = &res
	close(s.done)
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func writeBlob(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(data)
}

// errNoSession is a phase endpoint that no longer knows the Job: its phase is over for
// the portal (or the portal restarted).
var errNoSession = errors.New("the portal holds no session for this Job")
