package run

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"gantry/models/words"
)

// Drift (DESIGN §9): a drift check is a run of kind drift_check, a refresh-only plan of
// the configuration that wrote the workspace's state. What it finds is attributed, per
// resource, by who changed the resource in the cloud (the cloud's change history, read
// by the check's worker with its read-only token): a break-glass window of the
// workspace (expected drift, to be codified) or anyone else (unowned drift, which
// people are told of). This file holds the pure part: reading the refresh-only plan,
// attributing and saying it in words.

// Drift is what a finished drift check found.
type Drift struct {
	// Serial is the serial of the state version the world was compared with.
	Serial    int               `json:"serial"`
	Resources []DriftedResource `json:"resources"`
}

// DriftedResource is one live resource that differs from the state.
type DriftedResource struct {
	Address string `json:"address"`
	Type    string `json:"type"`
	ID      string `json:"id"`
	// Action is what the refresh found: "update" (changed) or "delete" (gone).
	Action string `json:"action"`
	// Changed names the attributes that differ (for an update).
	Changed []string `json:"changed,omitempty"`
	// WindowID is the break-glass window whose changes explain it ("": unowned).
	WindowID string `json:"window_id,omitempty"`
	// By says who changed it, in words.
	By string `json:"by"`
}

// Owned reports whether the resource's drift is explained by a break-glass window.
func (d DriftedResource) Owned() bool { return d.WindowID != "" }

// CloudChange is one change of a live resource as the cloud recorded it.
type CloudChange struct {
	// By is "run", "breakglass", "key" or "admin" (the change history protocol's
	// words, docs/change-history.md; anything else is someone outside Gantry).
	By      string
	Action  string
	Subject string
	Run     string
	Window  string
	Phase   string
	Reason  string
	At      time.Time
}

// Observed is a drifted resource as the check's worker found it: from the refresh-only
// plan, with the cloud's record of who changed it (HistoryError says why there is
// none).
type Observed struct {
	Address, Type, ID, Action string
	Changed                   []string
	Changes                   []CloudChange
	HistoryError              string
}

// refreshPlan is the part of a refresh-only plan's `tofu show -json` read here.
type refreshPlan struct {
	ResourceDrift []struct {
		Address string `json:"address"`
		Mode    string `json:"mode"`
		Type    string `json:"type"`
		Change  struct {
			Actions []string                   `json:"actions"`
			Before  map[string]json.RawMessage `json:"before"`
			After   map[string]json.RawMessage `json:"after"`
		} `json:"change"`
	} `json:"resource_drift"`
}

// DriftOf reads the drifted managed resources of a refresh-only plan: each with its
// cloud id, what happened to it and which attributes differ. A plan without drift
// gives none.
func DriftOf(planJSON []byte) ([]Observed, error) {
	var p refreshPlan
	if err := json.Unmarshal(planJSON, &p); err != nil {
		return nil, fmt.Errorf("reading the refresh-only plan: %w", err)
	}
	var out []Observed
	for _, d := range p.ResourceDrift {
		if d.Mode != "managed" || len(d.Change.Actions) == 0 || slices.Equal(d.Change.Actions, []string{"no-op"}) {
			continue
		}
		o := Observed{Address: d.Address, Type: d.Type, Action: "update"}
		if slices.Contains(d.Change.Actions, "delete") && d.Change.After == nil {
			o.Action = "delete"
		}
		var id string
		_ = json.Unmarshal(d.Change.Before["id"], &id)
		o.ID = id
		if o.Action == "update" {
			for name, before := range d.Change.Before {
				if !jsonEqual(before, d.Change.After[name]) {
					o.Changed = append(o.Changed, name)
				}
			}
			for name, after := range d.Change.After {
				if _, ok := d.Change.Before[name]; !ok && !jsonEqual(nil, after) {
					o.Changed = append(o.Changed, name)
				}
			}
			if len(o.Changed) == 0 {
				// Only a provider's own spelling moved (an empty map read back where the
				// state held none): nothing in the world changed.
				continue
			}
			sort.Strings(o.Changed)
		}
		out = append(out, o)
	}
	return out, nil
}

// Drifted reports whether a refresh-only plan found a managed resource that differs
// from the state by meaning (DriftOf): what a verification after an apply asks.
func Drifted(planJSON []byte) (bool, error) {
	obs, err := DriftOf(planJSON)
	return len(obs) > 0, err
}

// jsonEqual compares two JSON values by meaning: key order and spacing aside, and an
// absent or null value the same as an empty object or list, at any depth. Providers
// built on the older plugin SDK read an empty collection back as {} or [] where the
// state they wrote holds null (hashicorp/kubernetes 1.x: metadata annotations, quota
// scopes), which is no change anyone made; emptying a collection that held something,
// or filling one, still differs.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if (len(a) > 0 && json.Unmarshal(a, &x) != nil) || (len(b) > 0 && json.Unmarshal(b, &y) != nil) {
		return string(a) == string(b)
	}
	ax, _ := json.Marshal(meaning(x))
	by, _ := json.Marshal(meaning(y))
	return string(ax) == string(by)
}

// meaning is v with every empty object and list, and every object key holding one or
// null, taken away (nil for nothing left).
func meaning(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if m := meaning(e); m != nil {
				out[k] = m
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(v) == 0 {
			return nil
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = meaning(e)
		}
		return out
	}
	return v
}

// covers reports whether a change at at falls while window w was open: a change made
// with its credentials after it ended (a token lives up to 15 minutes and cannot be
// revoked) is nobody's to own.
func covers(w WindowInfo, at time.Time) bool {
	return w.OpenedAt != nil && !at.Before(*w.OpenedAt) && (w.EndedAt == nil || !at.After(*w.EndedAt))
}

// attribute says who made each drifted resource drift: the changes the cloud recorded
// after the state version the check compared with (since) count; a resource all of
// whose changes were made through a break-glass window of the workspace (windows, by
// id) is that window's, anything else is unowned. It returns the resources in plan
// order and the status.
func attribute(obs []Observed, since time.Time, windows map[string]WindowInfo) ([]DriftedResource, DriftStatus) {
	status := DriftClean
	out := make([]DriftedResource, 0, len(obs))
	for _, o := range obs {
		d := DriftedResource{Address: o.Address, Type: o.Type, ID: o.ID, Action: o.Action, Changed: o.Changed}
		var relevant []CloudChange
		for _, c := range o.Changes {
			if c.At.After(since) {
				relevant = append(relevant, c)
			}
		}
		var strangers []string
		window := ""
		for _, c := range relevant {
			w, known := windows[c.Window]
			switch {
			case c.By == "breakglass" && known && covers(w, c.At):
				window = w.ID
			case c.By == "breakglass" && known:
				strangers = append(strangers, "break-glass window "+c.Window+"'s credentials, outside the window (at "+c.At.UTC().Format(time.RFC3339)+")")
			default:
				strangers = append(strangers, changedBy(c))
			}
		}
		switch {
		case o.HistoryError != "":
			d.By = "nobody on record: the cloud's change history could not be read (" + o.HistoryError + ")"
		case len(relevant) == 0:
			d.By = "nobody on record: the cloud recorded no change to it since the state was written"
		case len(strangers) > 0:
			d.By = strings.Join(slices.Compact(strangers), "; ")
		default:
			w := windows[window]
			d.WindowID = window
			d.By = fmt.Sprintf("%s, through break-glass window %s (%s)", w.RequestedByName, w.ID, w.Reason)
		}
		if d.Owned() {
			if status == DriftClean {
				status = DriftExpected
			}
		} else {
			status = DriftUnowned
		}
		out = append(out, d)
	}
	return out, status
}

// changedBy says who made one change nobody owns, in words.
func changedBy(c CloudChange) string {
	switch c.By {
	case "admin":
		s := "the cloud's admin API, outside any run or window"
		if c.Reason != "" {
			s += " (reason given: " + c.Reason + ")"
		}
		return s
	case "key":
		return "a static API key (" + c.Subject + "), outside any run or window"
	case "run":
		return "the " + c.Phase + " of run " + c.Run + ", after the state was written"
	case "breakglass":
		return "break-glass window " + c.Window + ", which is not this workspace's"
	}
	return "an identity the cloud calls " + c.By
}

// DriftSummary says what a drift check found in a sentence.
func DriftSummary(d Drift, status DriftStatus) string {
	if status == DriftClean || len(d.Resources) == 0 {
		return fmt.Sprintf("no drift: the live resources match state version %d", d.Serial)
	}
	var owned, unowned int
	for _, r := range d.Resources {
		if r.Owned() {
			owned++
		} else {
			unowned++
		}
	}
	verb := "differ"
	if len(d.Resources) == 1 {
		verb = "differs"
	}
	s := fmt.Sprintf("%s: %s %s from state version %d", status.Label(), words.Count(len(d.Resources), "resource", "resources"), verb, d.Serial)
	switch {
	case unowned > 0 && owned > 0:
		s += fmt.Sprintf(" (%d changed by nobody on record, %d through a break-glass window)", unowned, owned)
	case unowned > 0:
		s += ", changed by nobody on record"
	default:
		s += ", changed through a break-glass window: codify it or correct it"
	}
	return s
}

// gatedPlan is the plan the gates (classification, risk, policy, the review) judge: a
// codification's refresh-only plan changes nothing in the world but accepts its drift
// into state, so its drift is what it changes (resource_drift read as
// resource_changes); any other run's plan as it is.
func gatedPlan(r Run, planJSON []byte) ([]byte, error) {
	if r.Kind != KindCodify {
		return planJSON, nil
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(planJSON, &doc); err != nil {
		return nil, fmt.Errorf("reading the refresh-only plan: %w", err)
	}
	drift, ok := doc["resource_drift"]
	if !ok {
		drift = json.RawMessage("[]")
	}
	doc["resource_changes"] = drift
	return json.Marshal(doc)
}
