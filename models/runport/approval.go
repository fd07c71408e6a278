package runport

// How a run came to be approved, in the words the run page, the evidence report, the
// audit history and export and the governance report share. Seed 001: "A gate
// satisfied by the change's own author is a finding, not a gate."

// SelfApproved marks a decision made by the run's own requester: four eyes was off for
// the run's risk, so the rules let the requester approve her own run.
const SelfApproved = "self-approved: the requester approved their own run"

// SelfApprovedField is the field of a run.approved audit event that records it (true),
// so an export says it without the rest of the log.
const SelfApprovedField = "self_approved"

// SelfService marks what Gantry approves by itself (risk 1 outside a protected
// environment): no person decided, which is not self-approval.
const SelfService = "self-service (no person's gate)"
