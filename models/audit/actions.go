package audit

// The audit log's vocabulary: every action Gantry records, how a person reads it, and
// the one function that turns an event into a sentence. Pages and the JSON API both
// take their words from here; an action missing from the table still reads (by its
// code), and a test holds the table complete.

// Action is one kind of event, with the words the filter shows for it.
type Action struct {
	Code  string
	Label string
}

// Actions lists every action in the order the history's filter offers them.
var Actions = []Action{
	{"run.queued", "Run requested"},
	{"run.planning", "Run planning"},
	{"run.planned", "Run planned"},
	{"run.no_changes", "Run without changes"},
	{"run.policy_blocked", "Run blocked by policy"},
	{"run.pending_approval", "Run waiting for approval"},
	{"run.escalated", "Run escalated"},
	{"run.approved", "Run approved"},
	{"run.rejected", "Run rejected"},
	{"run.running", "Run applying"},
	{"run.verifying", "Run verifying"},
	{"run.succeeded", "Run succeeded"},
	{"run.failed", "Run failed"},
	{"run.cancelled", "Run cancelled"},
	{"run.expired", "Run expired"},
	{"run.stale", "Run went stale"},
	{"run.apply_interrupted", "Apply interrupted"},
	{"run.apply_stopped", "Cancelled apply stopped"},
	{"run.lease_expired", "Worker lost: phase taken over"},
	{"policy.overridden", "Policy overridden"},
	{"state.version_created", "State version written"},
	{"state.credentials_issued", "State credential issued"},
	{"state.credentials_revoked", "State credential revoked"},
	{"state.lock_fenced", "State lock fenced"},
	{"workspace.created", "Workspace created"},
	{"workspace.archived", "Workspace archived"},
	{"workspace.restored", "Workspace restored"},
	{"environment.created", "Environment created"},
	{"environment.updated", "Environment changed"},
	{"environment.grant_added", "Environment grant added"},
	{"environment.grant_removed", "Environment grant removed"},
	{"environment.static_credential_set", "Static credential set"},
	{"environment.static_credential_cleared", "Static credential cleared"},
	{"environment.static_read_credential_set", "Static read credential set"},
	{"environment.static_read_credential_cleared", "Static read credential cleared"},
	{"policy.modes_changed", "Policy enforcement changed"},
	{"policy.uploaded", "Policy uploaded"},
	{"policy.activated", "Policy activated"},
	{"policy.deactivated", "Policy deactivated"},
	{"risk_matrix.updated", "Approval matrix changed"},
	{"membership.role_set", "Member added"},
	{"membership.role_changed", "Role changed"},
	{"membership.removed", "Member removed"},
	{"membership.cloud_live_granted", "Live-cloud entitlement granted"},
	{"membership.cloud_live_revoked", "Live-cloud entitlement revoked"},
	{"membership.rule_admitted", "Member added by a group rule"},
	{"membership.rule_changed", "Member changed by the group rules"},
	{"membership.rule_ended", "Membership ended by the group rules"},
	{"group_rule.added", "Group rule added"},
	{"group_rule.removed", "Group rule removed"},
	{"invitation.created", "Invitation sent"},
	{"invitation.accepted", "Invitation accepted"},
	{"invitation.revoked", "Invitation revoked"},
	{"user.signed_in", "Signed in"},
	{"user.signed_out", "Signed out"},
	{"organization.created", "Organization created"},
	{"keys.rewrapped", "Keys re-wrapped"},
	{"audit.export_requested", "Audit export requested"},
	{"audit.exported", "Audit export signed"},
	{"webhook.created", "Webhook added"},
	{"webhook.enabled", "Webhook turned on"},
	{"webhook.disabled", "Webhook turned off"},
	{"webhook.deleted", "Webhook deleted"},
	{"webhook.redelivered", "Webhook delivery sent again"},
	{"membership.service_account_added", "Service account added"},
	{"api_token.issued", "API token made"},
	{"api_token.revoked", "API token revoked"},
	{"api_token.used", "API token used"},
	{"scim.token_rotated", "SCIM token made"},
	{"scim.user_created", "Directory user provisioned"},
	{"scim.user_replaced", "Directory user replaced"},
	{"scim.user_patched", "Directory user changed"},
	{"scim.user_deleted", "Directory user deleted"},
	{"scim.user_deprovisioned", "Access ended by the directory"},
	{"scim.group_created", "Directory group provisioned"},
	{"scim.group_replaced", "Directory group replaced"},
	{"scim.group_patched", "Directory group changed"},
	{"scim.group_deleted", "Directory group deleted"},
	{"breakglass.requested", "Break-glass window requested"},
	{"breakglass.approved", "Break-glass window approved"},
	{"breakglass.rejected", "Break-glass window rejected"},
	{"breakglass.cancelled", "Break-glass window cancelled"},
	{"breakglass.expired", "Break-glass window expired"},
	{"breakglass.opened", "Break-glass window opened"},
	{"breakglass.credentials_issued", "Break-glass credentials issued"},
	{"breakglass.ended", "Break-glass window ended"},
	{"breakglass.codification_requested", "Break-glass codification requested"},
	{"breakglass.codified", "Break-glass change codified"},
	{"breakglass.closed", "Break-glass window closed"},
}

// KnownAction reports whether code is in the vocabulary.
func KnownAction(code string) bool {
	_, ok := actionLabel(code)
	return ok
}

// ActionLabel is action code in words ("Run waiting for approval"), as the history's
// filter and the run page's history say it; an action the vocabulary lacks reads as its
// code.
func ActionLabel(code string) string {
	if label, ok := actionLabel(code); ok {
		return label
	}
	return code
}

func actionLabel(code string) (string, bool) {
	for _, a := range Actions {
		if a.Code == code {
			return a.Label, true
		}
	}
	return "", false
}
