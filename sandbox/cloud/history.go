package cloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gantry/sandbox/api"
)

// The change history: the cloud records which identity changed each object, every time,
// and keeps the record after the object is deleted. Gantry's drift checks read it (with
// their read-only token) to say who made a drift: a break-glass window of the workspace
// (expected) or anyone else (unowned drift), by who changed the object, not by when.
//
// The wire types live here, not in sandbox/api, on purpose: the provider links sandbox/api
// and sandbox/client, and its build is pinned by the catalog's lock files.

// ChangeRecord is one change of an object.
type ChangeRecord struct {
	// By is who changed it: "run" (a run's apply token), "breakglass" (a person through a
	// break-glass window's token), "key" (a static API key) or "admin" (the admin API).
	By     string `json:"by"`
	Action string `json:"action"` // "create", "update", "delete" or "data"
	// Subject is the token's sub claim or "key:<id>"; Run, Window and Phase its claims.
	Subject string `json:"subject,omitempty"`
	Run     string `json:"run,omitempty"`
	Window  string `json:"window,omitempty"`
	Phase   string `json:"phase,omitempty"`
	Reason  string `json:"reason,omitempty"` // admin changes: why
	// Generation is the object's generation after the change (0 after a delete).
	Generation int64     `json:"generation"`
	At         time.Time `json:"at"`
}

// History is an object's changes, oldest first (at most maxHistory of the newest).
type History struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"`
	Namespace api.Namespace  `json:"namespace"`
	Deleted   bool           `json:"deleted"`
	Changes   []ChangeRecord `json:"changes"`
}

// maxHistory bounds what is kept per object.
const maxHistory = 100

// historyStore keeps one file per object that ever existed: <DataDir>/changes/<kind>/<id>.json.
type historyStore struct{ dir string }

func newHistoryStore(dataDir string) (*historyStore, error) {
	dir := filepath.Join(dataDir, "changes")
	for _, k := range api.Kinds() {
		if err := os.MkdirAll(filepath.Join(dir, k.Name), 0o700); err != nil {
			return nil, fmt.Errorf("sandbox cloud: creating the history directory: %w", err)
		}
	}
	return &historyStore{dir: dir}, nil
}

func (h *historyStore) load(k api.Kind, id string) (*History, error) {
	if !k.ValidID(id) {
		return nil, errNotFound
	}
	body, err := os.ReadFile(filepath.Join(h.dir, k.Name, id+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s %s: %w", k.Name, id, err)
	}
	var out History
	if err := json.Unmarshal(body, &out); err != nil || out.ID != id || out.Kind != k.Name {
		return nil, fmt.Errorf("the history file of %s %s is damaged", k.Name, id)
	}
	return &out, nil
}

// record appends a change of obj (deleted: the change deleted it). Callers hold Server.mu.
func (h *historyStore) record(k api.Kind, obj *api.Object, rec ChangeRecord, deleted bool) error {
	cur, err := h.load(k, obj.ID)
	if errors.Is(err, errNotFound) {
		cur, err = &History{ID: obj.ID, Kind: k.Name}, nil
	}
	if err != nil {
		return err
	}
	cur.Namespace, cur.Deleted = obj.Namespace, deleted
	cur.Changes = append(cur.Changes, rec)
	if n := len(cur.Changes); n > maxHistory {
		cur.Changes = cur.Changes[n-maxHistory:]
	}
	body, err := json.MarshalIndent(cur, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(h.dir, k.Name), obj.ID+".json", append(body, '\n')); err != nil {
		return fmt.Errorf("saving the history of %s %s: %w", k.Name, obj.ID, err)
	}
	return nil
}

// changeBy is the record of a change made by who.
func changeBy(who Identity, action string, generation int64, at time.Time) ChangeRecord {
	rec := ChangeRecord{By: "run", Action: action, Subject: who.Subject, Run: who.Run, Window: who.Window, Phase: who.Phase,
		Generation: generation, At: at}
	switch {
	case who.Static():
		rec.By, rec.Run, rec.Window, rec.Phase = "key", "", "", ""
	case who.Phase == PhaseBreakglass:
		rec.By = "breakglass"
	}
	return rec
}

// adminChange is the record of a change through the admin API.
func adminChange(action, reason string, generation int64, at time.Time) ChangeRecord {
	return ChangeRecord{By: "admin", Action: action, Reason: reason, Generation: generation, At: at}
}

// byResourceType names the kind of a change history request from its OpenTofu resource
// type: sandbox_<kind>. Any other type is no kind of this cloud (404 from workload).
func byResourceType(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		kind, ok := strings.CutPrefix(r.PathValue("type"), "sandbox_")
		if !ok {
			kind = ""
		}
		r.SetPathValue("kind", kind)
		next(w, r)
	}
}

// getHistory answers GET /v1/changes/sandbox_{kind}/{id}, the change history protocol
// Gantry's drift checks read: the history of an object of the caller's namespace, also
// after it was deleted (anything else is 404). Read tokens may ask.
func (s *Server) getHistory(w http.ResponseWriter, req *request) error {
	h, err := s.history.load(req.kind, req.id)
	if errors.Is(err, errNotFound) {
		// An object older than the history (or none at all): what its last_change says.
		obj, err := s.lookup(req.kind, req.who, req.id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, History{ID: obj.ID, Kind: req.kind.Name, Namespace: obj.Namespace,
			Changes: []ChangeRecord{{By: obj.LastChange.By, Action: obj.LastChange.Action, Subject: obj.LastChange.Subject,
				Run: obj.LastChange.Run, Phase: obj.LastChange.Phase, Reason: obj.LastChange.Reason, Generation: obj.Generation, At: obj.LastChange.At}}})
		return nil
	}
	if err != nil {
		return err
	}
	if !visible(req.kind, req.who, &api.Object{Namespace: h.Namespace}) {
		return notFound(req.kind, req.id)
	}
	writeJSON(w, http.StatusOK, h)
	return nil
}
