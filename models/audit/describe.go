package audit

import (
	"encoding/json"
	"fmt"
	"strings"

	"gantry/models/runport"
)

// Names resolves the ids and codes an event carries to what people call them.
type Names struct {
	Environments map[string]string
	Workspaces   map[string]string
	Users        map[string]string
	// RunStates says a run state's code (QUEUED, PENDING_APPROVAL: the run.<state>
	// actions' suffix, upper case) in words ("Waiting for approval"): the run state
	// table's words (models/run), which this package cannot import. Nil leaves the
	// code.
	RunStates func(code string) string
}

// Ref is an object a sentence names: a link target when Kind and ID are set.
type Ref struct {
	Kind  string // "run", "workspace", "environment", "export", or "" for plain words
	ID    string
	Label string
}

// Sentence is an event in words: Actor Verb Object Rest ("Olivia approved run #3 of
// web in production").
type Sentence struct {
	Actor  string
	Verb   string
	Object Ref
	Rest   string
}

// String is the sentence as plain text.
func (s Sentence) String() string {
	parts := []string{s.Actor, s.Verb}
	if s.Object.Label != "" {
		parts = append(parts, s.Object.Label)
	}
	out := strings.Join(parts, " ")
	if s.Rest != "" {
		out += " " + s.Rest
	}
	return out
}

// eventData is what sentences read of an event's data.
type eventData struct {
	Number      int64  `json:"number"`
	WorkspaceID string `json:"workspace_id"`
	Reason      string `json:"reason"`
	Kind        string `json:"kind"`
	Template    string `json:"template"`
	Serial      int64  `json:"serial"`
	Name        string `json:"name"`
	Role        string `json:"role"`
	// Group and Groups: a group rule's group, the groups that matched a person.
	Group       string          `json:"group"`
	Groups      []string        `json:"groups"`
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	RuleID      string          `json:"rule_id"`
	Events      int64           `json:"events"`
	Format      string          `json:"format"`
	Phase       string          `json:"phase"`
	Simulated   bool            `json:"simulated"`
	Minutes     int64           `json:"duration_minutes"`
	CloseReason string          `json:"close_reason"`
	Rejection   string          `json:"rejection_reason"`
	// SelfApproved: the approval was the requester's own (runport.SelfApprovedField).
	SelfApproved bool `json:"self_approved"`
	// StateWritten: a cancelled apply stored a state version before it stopped.
	StateWritten bool `json:"state_written"`
}

// groupsWords names the groups that matched, for a group rule's membership change.
func groupsWords(groups []string) string {
	if len(groups) == 0 {
		return ""
	}
	return " (groups " + strings.Join(groups, ", ") + ")"
}

// Describe turns an event into a sentence with names.
func Describe(e Event, n Names) Sentence {
	var d eventData
	_ = json.Unmarshal(e.Data, &d) // a field missing or of another type reads as empty
	s := Sentence{Actor: e.ActorName}
	if e.ActorID == "system" {
		s.Actor = "Gantry"
	}
	ws := nameOr(n.Workspaces, firstOf(e.WorkspaceID, d.WorkspaceID), "")
	env := nameOr(n.Environments, e.EnvironmentID, "")
	where := ""
	if ws != "" {
		where = "of " + ws
		if env != "" {
			where += " in " + env
		}
	}
	runRef := Ref{Kind: "run", ID: e.RunID, Label: "a run " + where}
	if e.RunID == "" && e.TargetType == "run" {
		runRef.ID = e.TargetID
	}
	if d.Number > 0 {
		runRef.Label = strings.TrimSpace(fmt.Sprintf("run #%d %s", d.Number, where))
	}
	reason := ""
	if d.Reason != "" {
		reason = "(" + d.Reason + ")"
	}
	if state, ok := strings.CutPrefix(e.Action, "run."); ok {
		s.Object = runRef
		switch state {
		case "queued":
			s.Verb = "requested"
			if d.Template != "" {
				s.Rest = "from template " + d.Template
			}
			if d.Kind == "destroy" {
				s.Rest = strings.TrimSpace(s.Rest + " (a destroy)")
			}
		case "escalated":
			s.Verb, s.Rest = "escalated", reason
		case "apply_stopped":
			s.Verb, s.Rest = "stopped the cancelled apply of", "(it wrote no state)"
			if d.StateWritten {
				s.Rest = "(the state it wrote is stored)"
			}
		case "approved", "rejected", "cancelled":
			s.Verb, s.Rest = state, reason
			if d.SelfApproved {
				s.Rest = strings.TrimSpace(s.Rest + " [" + runport.SelfApproved + "]")
			}
		default:
			// The stored action stays coded; the sentence says the state as the run's
			// badge does, quoted as the name it is.
			label := strings.ToUpper(state)
			if n.RunStates != nil {
				label = n.RunStates(label)
			}
			s.Verb, s.Rest = "moved", strings.TrimSpace("to “"+label+"” "+reason)
		}
		if d.Simulated {
			s.Rest = strings.TrimSpace(s.Rest + " [SIMULATED]")
		}
		return s
	}
	wsRef := Ref{Kind: "workspace", ID: firstOf(e.WorkspaceID, e.TargetID), Label: "workspace " + nameOr(n.Workspaces, firstOf(e.WorkspaceID, e.TargetID), e.TargetID)}
	envRef := Ref{Kind: "environment", ID: e.TargetID, Label: "environment " + nameOr(n.Environments, e.TargetID, e.TargetID)}
	switch e.Action {
	case "policy.overridden":
		s.Verb, s.Object, s.Rest = "overrode policy "+d.RuleID+" on", runRef, reason
	case "state.version_created":
		s.Verb = "wrote state"
		s.Object = Ref{Kind: "workspace", ID: wsRef.ID, Label: fmt.Sprintf("serial %d of %s", d.Serial, wsRef.Label)}
	case "state.credentials_issued":
		s.Verb, s.Object, s.Rest = "issued a "+d.Phase+" state credential for", wsRef, ""
	case "state.credentials_revoked":
		s.Verb, s.Object, s.Rest = "revoked state credentials of", wsRef, reason
	case "state.lock_fenced":
		s.Verb, s.Object, s.Rest = "fenced the state lock of", wsRef, reason
	case "workspace.created":
		s.Verb, s.Object = "created", wsRef
		if env != "" {
			s.Rest = "in " + env
		}
	case "workspace.archived":
		s.Verb, s.Object, s.Rest = "archived", wsRef, "(it holds nothing; its runs and state history are kept)"
	case "workspace.restored":
		s.Verb, s.Object, s.Rest = "brought back", wsRef, "from the archive by requesting a run in it"

	case "environment.created", "environment.updated":
		s.Verb, s.Object = strings.TrimPrefix(e.Action, "environment."), envRef
	case "environment.grant_added":
		s.Verb, s.Object = "granted a member access to", envRef
	case "environment.grant_removed":
		s.Verb, s.Object = "removed a member's access to", envRef
	case "environment.static_credential_set":
		s.Verb, s.Object, s.Rest = "set a static credential on", envRef, "(the write credential applies use; a standing credential: a finding)"
	case "environment.static_credential_cleared":
		s.Verb, s.Object = "cleared the static credential of", envRef
	case "environment.static_read_credential_set":
		s.Verb, s.Object, s.Rest = "set a static read credential on", envRef, "(the credential plans and verifications use; a standing credential: a finding)"
	case "environment.static_read_credential_cleared":
		s.Verb, s.Object = "cleared the static read credential of", envRef
	case "policy.modes_changed":
		s.Verb, s.Object = "changed policy enforcement of", envRef
	case "policy.uploaded", "policy.activated", "policy.deactivated":
		s.Verb, s.Object = strings.TrimPrefix(e.Action, "policy."), Ref{Label: "organization policy " + e.TargetID}
	case "risk_matrix.updated":
		s.Verb, s.Object = "changed", Ref{Label: "the approval matrix (version " + e.TargetID + ")"}
	case "membership.role_set", "membership.role_changed":
		s.Verb, s.Object = "changed the role of", Ref{Label: "member " + nameOr(n.Users, e.TargetID, e.TargetID)}
		if after := unquote(d.After); after != "" {
			s.Rest = "to " + after
		} else if d.Role != "" {
			s.Rest = "to " + d.Role
		}
	case "membership.service_account_added":
		s.Verb, s.Object, s.Rest = "added", Ref{Label: "service account " + firstOf(d.Name, e.TargetID)}, "as "+d.Role
	case "scim.token_rotated":
		s.Verb, s.Object = "made", Ref{Label: "a new SCIM token for the directory"}
	case "scim.user_created", "scim.user_replaced", "scim.user_patched", "scim.user_deleted", "scim.user_deprovisioned",
		"scim.group_created", "scim.group_replaced", "scim.group_patched", "scim.group_deleted":
		verb := e.Action[strings.Index(e.Action, "_")+1:]
		s.Verb = map[string]string{"created": "provisioned", "replaced": "replaced", "patched": "changed", "deleted": "deleted",
			"deprovisioned": "ended the access of"}[verb]
		kind := map[bool]string{true: "directory group ", false: "directory user "}[strings.HasPrefix(e.Action, "scim.group_")]
		s.Object = Ref{Label: kind + e.TargetID}
	case "api_token.issued", "api_token.revoked", "api_token.used":
		s.Verb = map[string]string{"api_token.issued": "made", "api_token.revoked": "revoked", "api_token.used": "used"}[e.Action]
		s.Object = Ref{Label: "API token " + firstOf(d.Name, e.TargetID) + " (" + e.TargetID + ")"}
	case "membership.removed":
		s.Verb, s.Object = "removed", Ref{Label: "member " + nameOr(n.Users, e.TargetID, e.TargetID)}
	case "membership.rule_admitted":
		s.Verb, s.Object, s.Rest = "added", Ref{Label: "member " + nameOr(n.Users, e.TargetID, firstOf(d.Name, e.TargetID))}, "as "+d.Role+" by a group rule"+groupsWords(d.Groups)
	case "membership.rule_changed":
		s.Verb, s.Object, s.Rest = "changed the role of", Ref{Label: "member " + nameOr(n.Users, e.TargetID, firstOf(d.Name, e.TargetID))}, "to "+d.Role+" by the group rules"+groupsWords(d.Groups)
	case "membership.rule_ended":
		s.Verb, s.Object, s.Rest = "ended the membership of", Ref{Label: "member " + nameOr(n.Users, e.TargetID, firstOf(d.Name, e.TargetID))}, "by the group rules"
		if d.Reason != "" {
			s.Rest += ": " + d.Reason
		}
	case "group_rule.added":
		s.Verb, s.Object, s.Rest = "added", Ref{Label: "a group rule for " + firstOf(d.Group, e.TargetID)}, "giving "+d.Role
	case "group_rule.removed":
		s.Verb, s.Object = "removed", Ref{Label: "the group rule for " + firstOf(d.Group, e.TargetID)}
	case "membership.cloud_live_granted":
		s.Verb, s.Object = "granted the live-cloud entitlement to", Ref{Label: "member " + nameOr(n.Users, e.TargetID, e.TargetID)}
	case "membership.cloud_live_revoked":
		s.Verb, s.Object = "revoked the live-cloud entitlement of", Ref{Label: "member " + nameOr(n.Users, e.TargetID, e.TargetID)}
	case "invitation.created":
		s.Verb, s.Object, s.Rest = "invited", Ref{Label: e.TargetID}, "as "+d.Role
	case "invitation.accepted":
		s.Verb, s.Object = "accepted the invitation of", Ref{Label: e.TargetID}
	case "invitation.revoked":
		s.Verb, s.Object = "revoked the invitation of", Ref{Label: e.TargetID}
	case "user.signed_in":
		s.Verb = "signed in"
	case "user.signed_out":
		s.Verb = "signed out"
	case "organization.created":
		s.Verb, s.Object = "created", Ref{Label: "the organization"}
	case "keys.rewrapped":
		s.Verb, s.Object = "re-wrapped", Ref{Label: "data keys under a new key-encryption key"}
	case "audit.export_requested":
		s.Verb, s.Object = "requested", Ref{Kind: "export", ID: e.TargetID, Label: "an audit export (" + d.Format + ")"}
	case "audit.exported":
		s.Verb, s.Object = "signed", Ref{Kind: "export", ID: e.TargetID, Label: fmt.Sprintf("audit export of %d events", d.Events)}
	case "webhook.created", "webhook.enabled", "webhook.disabled", "webhook.deleted", "webhook.redelivered":
		hook := Ref{Kind: "webhook", ID: e.TargetID, Label: "webhook " + firstOf(d.Name, e.TargetID)}
		s.Verb, s.Object = map[string]string{"webhook.created": "added", "webhook.enabled": "turned on", "webhook.disabled": "turned off",
			"webhook.deleted": "deleted", "webhook.redelivered": "sent a delivery again to"}[e.Action], hook
		if e.Action == "webhook.disabled" && d.Reason != "" {
			s.Rest = "(" + d.Reason + ")"
		}
	default:
		if step, ok := strings.CutPrefix(e.Action, "breakglass."); ok {
			label := "break-glass window " + e.TargetID
			if ws != "" {
				label += " on " + ws
			}
			s.Object = Ref{Kind: "breakglass", ID: e.TargetID, Label: label}
			s.Verb = map[string]string{"requested": "asked for", "approved": "approved", "rejected": "rejected", "cancelled": "cancelled",
				"expired": "expired", "opened": "opened", "credentials_issued": "was given credentials for", "ended": "ended",
				"codification_requested": "asked to codify", "codified": "codified", "closed": "closed"}[step]
			switch step {
			case "requested":
				s.Rest = strings.TrimSpace(fmt.Sprintf("for %d minutes %s", d.Minutes, reason))
			case "rejected":
				s.Rest = "(" + d.Rejection + ")"
			case "closed":
				s.Rest = "without codification (" + d.CloseReason + ")"
			case "expired", "ended", "codified":
				s.Rest = reason
			}
			if s.Verb == "" {
				s.Verb = "recorded " + e.Action + " on"
			}
			return s
		}
		s.Verb, s.Object = "recorded "+e.Action+" on", Ref{Label: e.TargetType + " " + e.TargetID}
	}
	return s
}

func nameOr(m map[string]string, id, fallback string) string {
	if name, ok := m[id]; ok && name != "" {
		return name
	}
	return fallback
}

func firstOf(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

func unquote(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// WorkspaceOfData is the workspace an event names in its data (run events recorded
// before events carried their scope).
func WorkspaceOfData(e Event) string {
	var d struct {
		WorkspaceID string `json:"workspace_id"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.WorkspaceID
}
