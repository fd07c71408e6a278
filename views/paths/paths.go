// Package paths builds every URL Gantry links to, so no page or handler assembles a
// path from strings. Route registration uses the Route* patterns beside them.
package paths

import (
	"net/url"
	"strconv"
)

const (
	RouteTemplate         = "/catalog/:name"
	RouteRun              = "/runs/:id"
	RouteRunAction        = "/runs/:id/:action"
	RouteRunEvents        = "/runs/:id/events"
	RouteInboxEvents      = "/approvals/events"
	RouteRunReview        = "/runs/:id/review"
	RouteRunReviewPart    = "/runs/:id/review/:section"
	RouteRunEvidence      = "/runs/:id/evidence"
	RouteWorkspace        = "/workspaces/:id"
	RouteWorkspaceDestroy = "/workspaces/:id/destroy"
	RouteWorkspaceArchive = "/workspaces/:id/archive"
	// RouteWorkspaceRollback asks before, and requests, a rollback to a state version.
	RouteWorkspaceRollback = "/workspaces/:id/rollback"
	// RouteWorkspacePromote is the promotion form of a workspace, and where it posts.
	RouteWorkspacePromote = "/workspaces/:id/promote"
	RouteEnvironment      = "/environments/:id"
	RouteEditEnvironment  = "/environments/:id/edit"
	RouteAPIEnvironment   = "/api/v1/environments/:id"
	RouteStatic           = "/static/*"
	RouteWebhook          = "/settings/webhooks/:id"
	RouteWebhookAction    = "/settings/webhooks/:id/:action"
	RouteWebhookRedeliver = "/settings/deliveries/:id/redeliver"
)

// Notifications: personal preferences, the organization's webhooks, and (gantry dev
// only) the mail the local SMTP catcher caught.
func NotificationSettings() string { return "/settings/notifications" }
func Webhooks() string             { return "/settings/webhooks" }
func Webhook(id string) string     { return Webhooks() + "/" + url.PathEscape(id) }

// WebhookAction is enable, disable or delete of webhook id (a POST).
func WebhookAction(id, action string) string { return Webhook(id) + "/" + url.PathEscape(action) }
func WebhookRedeliver(deliveryID string) string {
	return "/settings/deliveries/" + url.PathEscape(deliveryID) + "/redeliver"
}
func DevMail() string { return "/dev/mail" }

func Home() string           { return "/" }
func Login() string          { return "/login" }
func Callback() string       { return "/auth/callback" }
func Logout() string         { return "/logout" }
func SignedOut() string      { return "/signed-out" }
func SwitchOrg() string      { return "/org/switch" }
func Healthz() string        { return "/healthz" }
func Readyz() string         { return "/readyz" }
func Static(f string) string { return "/static/" + f } // f: a file's hashed name (static.Hashed)

// Reauthenticate signs the person in again at the provider (no single sign-on) and
// comes back to returnTo: what an elevated decision asks for.
func Reauthenticate(returnTo string) string {
	return Login() + "?" + url.Values{"reauth": {"1"}, "return_to": {returnTo}}.Encode()
}

// LoginReturning is the login URL that comes back to returnTo afterwards.
func LoginReturning(returnTo string) string {
	if returnTo == "" || returnTo == Home() {
		return Login()
	}
	return Login() + "?" + url.Values{"return_to": {returnTo}}.Encode()
}

func Environments() string             { return "/environments" }
func NewEnvironment() string           { return "/environments/new" }
func Environment(id string) string     { return "/environments/" + url.PathEscape(id) }
func EditEnvironment(id string) string { return Environment(id) + "/edit" }
func APIEnvironments() string          { return "/api/v1/environments" }
func APIEnvironment(id string) string  { return APIEnvironments() + "/" + url.PathEscape(id) }

func Catalog() string             { return "/catalog" }
func Template(name string) string { return "/catalog/" + url.PathEscape(name) }
func NewRequest(template string) string {
	return "/requests/new?" + url.Values{"template": {template}}.Encode()
}

// ResubmitRun is the request form filled in with run id's request (of template), to
// edit and submit again.
func ResubmitRun(template, id string) string {
	return "/requests/new?" + url.Values{"template": {template}, "from_run": {id}}.Encode()
}

// ChangeWorkspace is the change form of workspace id (of template): its own page,
// the workspace and environment fixed, filled in with what the workspace holds.
func ChangeWorkspace(_, id string) string { return Workspace(id) + "/change" }
func Requests() string                    { return "/requests" }
func ValidateRequest() string             { return "/requests/validate" }
func PreviewRequest() string              { return "/requests/preview" }
func Run(id string) string                { return "/runs/" + url.PathEscape(id) }
func RunEvents(id string) string          { return Run(id) + "/events" }

// RunEventsSince is the live stream of a run whose page shows the run as of version
// (its update time in nanoseconds): the stream stays quiet until the run changes.
func RunEventsSince(id string, version int64) string {
	return RunEvents(id) + "?" + url.Values{"since": {strconv.FormatInt(version, 10)}}.Encode()
}
func RunApprove(id string) string   { return Run(id) + "/approve" }
func RunReject(id string) string    { return Run(id) + "/reject" }
func RunRecover(id string) string   { return Run(id) + "/recover" }
func RunCancel(id string) string    { return Run(id) + "/cancel" }
func RunPlanAgain(id string) string { return Run(id) + "/plan-again" }
func RunPlanJSON(id string) string  { return Run(id) + "/plan.json" }
func RunPlanText(id string) string  { return Run(id) + "/plan.txt" }
func RunOverride(id string) string  { return Run(id) + "/override" }
func RunReview(id string) string    { return Run(id) + "/review" }
func RunEvidence(id string) string  { return Run(id) + "/evidence" }

// RunReviewSection is one page of one section of a run's plan review.
func RunReviewSection(id, section string, page int) string {
	return RunReview(id) + "/" + url.PathEscape(section) + "?" + url.Values{"page": {strconv.Itoa(page)}}.Encode()
}
func Workspaces() string         { return "/workspaces" }
func Workspace(id string) string { return "/workspaces/" + url.PathEscape(id) }
func Runs() string               { return "/runs" }

// Filtered is a list's path with its search, filters, sort and page in q (path alone
// when q is empty): path is one of the list paths (Workspaces, Runs, Approvals,
// Policies).
func Filtered(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// WorkspaceDestroy asks before a workspace is destroyed.
func WorkspaceDestroy(id string) string { return Workspace(id) + "/destroy" }

// WorkspaceArchive archives a workspace that holds nothing.
func WorkspaceArchive(id string) string { return Workspace(id) + "/archive" }

// WorkspaceRollback is the page that asks before rolling workspace id back to state
// version versionID (the form posts to the same path).
func WorkspaceRollback(id, versionID string) string {
	return WorkspaceRollbackAction(id) + "?" + url.Values{"version": {versionID}}.Encode()
}

// WorkspacePromote is the promotion form of workspace id (and where it posts).
func WorkspacePromote(id string) string { return Workspace(id) + "/promote" }

// WorkspaceRollbackAction is where the rollback form posts (the version in its fields).
func WorkspaceRollbackAction(id string) string { return Workspace(id) + "/rollback" }
func Approvals() string                        { return "/approvals" }

// InboxEvents is the live stream of the navigation's count of runs waiting for you.
func InboxEvents() string { return RouteInboxEvents }
func Audit() string       { return "/audit" }

// Route patterns of the audit pages.
const (
	RouteAuditExport         = "/audit/exports/:id"
	RouteAuditExportProgress = "/audit/exports/:id/progress"
	RouteAuditExportDownload = "/audit/exports/:id/download"
)

// AuditFiltered is the audit history with filters (and paging) in q.
func AuditFiltered(q url.Values) string {
	if len(q) == 0 {
		return Audit()
	}
	return Audit() + "?" + q.Encode()
}
func AuditExports() string                 { return Audit() + "/exports" }
func AuditExport(id string) string         { return AuditExports() + "/" + url.PathEscape(id) }
func AuditExportProgress(id string) string { return AuditExport(id) + "/progress" }
func AuditExportDownload(id string) string { return AuditExport(id) + "/download" }
func Governance() string                   { return "/governance" }
func GovernanceMarkdown() string           { return "/governance.md" }
func APIAuditEvents() string               { return "/api/v1/audit/events" }
func APIAuditKeys() string                 { return "/api/v1/audit/keys" }

// APIAuditEventsFiltered is the audit events API with filters (and paging) in q.
func APIAuditEventsFiltered(q url.Values) string {
	if len(q) == 0 {
		return APIAuditEvents()
	}
	return APIAuditEvents() + "?" + q.Encode()
}

// WorkloadIssuer is the path of Gantry's workload identity issuer (under the base URL).
func WorkloadIssuer() string    { return "/workload" }
func WorkloadDiscovery() string { return WorkloadIssuer() + "/.well-known/openid-configuration" }
func WorkloadJWKS() string      { return WorkloadIssuer() + "/jwks" }

// WorkloadIntrospection is where a cloud asks whether a workload token is still live
// (RFC 7662; identity.IntrospectionPath under the issuer).
func WorkloadIntrospection() string { return WorkloadIssuer() + "/introspect" }

func Executors() string { return "/executors" }

// Route patterns of the members page.
const RouteMemberAction = "/members/:id/:action"

func Members() string                    { return "/members" }
func InviteMember() string               { return Members() + "/invite" }
func RevokeInvitation() string           { return Members() + "/invitations/revoke" }
func MemberAction(id, act string) string { return Members() + "/" + url.PathEscape(id) + "/" + act }

// Group rules, managed on the members page: add one, preview one (a POST that changes
// nothing), remove one.
const RouteRemoveGroupRule = "/members/rules/:id/remove"

func GroupRules() string               { return Members() + "/rules" }
func PreviewGroupRule() string         { return GroupRules() + "/preview" }
func RemoveGroupRule(id string) string { return GroupRules() + "/" + url.PathEscape(id) + "/remove" }

// ApprovalMatrix is the organization's risk rules and approval matrix (settings).
func ApprovalMatrix() string { return "/settings/approval-matrix" }

// Route patterns of the policy pages.
const (
	RoutePolicyActive        = "/policies/:name/active"
	RouteEnvironmentPolicies = "/environments/:id/policies"
)

// Policies is the organization's policy bundle: every rule, the environments' modes
// pages and the organization's own policies.
func Policies() string { return "/policies" }

// UploadPolicy is where a new version of an organization policy is posted.
func UploadPolicy() string { return Policies() + "/upload" }

// PolicyActive is where an organization policy is activated or deactivated.
func PolicyActive(name string) string { return Policies() + "/" + url.PathEscape(name) + "/active" }

// EnvironmentPolicies is an environment's policy enforcement modes.
func EnvironmentPolicies(id string) string { return Environment(id) + "/policies" }

// Route patterns of the manual change path and drift detection (DESIGN §9).
const (
	// RouteWorkspaceBreakglass is the form asking for a break-glass window on a
	// workspace, and where it posts.
	RouteWorkspaceBreakglass = "/workspaces/:id/breakglass"
	// RouteWorkspaceDrift checks a workspace's drift now (POST).
	RouteWorkspaceDrift = "/workspaces/:id/drift"
	// RouteWorkspaceCorrect plans to bring a drifted workspace back to its state (POST).
	RouteWorkspaceCorrect = "/workspaces/:id/correct"
	RouteBreakglass       = "/breakglass/:id"
	RouteBreakglassAction = "/breakglass/:id/:action"
)

// BreakglassActions are what the window page posts: approve, reject, cancel, open,
// credentials, end, codify and close.
var BreakglassActions = []string{"approve", "reject", "cancel", "open", "credentials", "end", "codify", "close"}

func WorkspaceBreakglass(id string) string { return Workspace(id) + "/breakglass" }
func WorkspaceDrift(id string) string      { return Workspace(id) + "/drift" }
func WorkspaceCorrect(id string) string    { return Workspace(id) + "/correct" }

// BreakglassWindows is the organization's list of break-glass windows.
func BreakglassWindows() string { return "/breakglass" }

// BreakglassWindow is the page of window id; BreakglassAction where its forms post.
func BreakglassWindow(id string) string { return BreakglassWindows() + "/" + url.PathEscape(id) }
func BreakglassAction(id, action string) string {
	return BreakglassWindow(id) + "/" + url.PathEscape(action)
}

// Drift is the organization's drift list: each workspace's newest drift check.
func Drift() string { return "/drift" }

// API tokens (DESIGN §10): the tokens page, revoking one, adding a service account.
const RouteTokenRevoke = "/settings/tokens/:id/revoke"

func Tokens() string               { return "/settings/tokens" }
func TokenRevoke(id string) string { return Tokens() + "/" + url.PathEscape(id) + "/revoke" }
func ServiceAccounts() string      { return "/settings/service-accounts" }

// SCIMSettings is the owners' page that makes and rotates the organization's SCIM token.
func SCIMSettings() string { return "/settings/scim" }

// SCIMBase is where directories reach SCIM 2.0 (handlers/scim), under the portal's URL.
func SCIMBase() string { return "/scim/v2" }

// The JSON API (handlers/api*.go): its routes and the links its answers carry.
const (
	RouteAPITemplate        = "/api/v1/templates/:name"
	RouteAPIRun             = "/api/v1/runs/:id"
	RouteAPIWorkspace       = "/api/v1/workspaces/:id"
	RouteAPIAuditExport     = "/api/v1/audit/exports/:id"
	RouteAPIEnvironmentMode = "/api/v1/environments/:id/policy-modes"
	RouteAPIPolicyActive    = "/api/v1/policies/:name/active"
	RouteAPIGroupRule       = "/api/v1/group-rules/:id"
)

func APIDocument() string                     { return "/api/v1/openapi.json" }
func APIReference() string                    { return "/api/reference" }
func APITemplates() string                    { return "/api/v1/templates" }
func APITemplate(name string) string          { return APITemplates() + "/" + url.PathEscape(name) }
func APIRequests() string                     { return "/api/v1/requests" }
func APIRuns() string                         { return "/api/v1/runs" }
func APIRun(id string) string                 { return APIRuns() + "/" + url.PathEscape(id) }
func APIRunEvents(id string) string           { return APIRun(id) + "/events" }
func APIRunReview(id string) string           { return APIRun(id) + "/review" }
func APIRunEvidence(id string) string         { return APIRun(id) + "/evidence" }
func APIWorkspaces() string                   { return "/api/v1/workspaces" }
func APIWorkspace(id string) string           { return APIWorkspaces() + "/" + url.PathEscape(id) }
func APIPolicies() string                     { return "/api/v1/policies" }
func APIMatrix() string                       { return "/api/v1/approval-matrix" }
func APIAuditExports() string                 { return "/api/v1/audit/exports" }
func APIAuditExport(id string) string         { return APIAuditExports() + "/" + url.PathEscape(id) }
func APIGroupRules() string                   { return "/api/v1/group-rules" }
func APIGroupRule(id string) string           { return APIGroupRules() + "/" + url.PathEscape(id) }
func APIGroupRulesPreview() string            { return APIGroupRules() + "/preview" }
func APIAuditExportDownload(id string) string { return APIAuditExport(id) + "/download" }

// RouteWorkspaceChange is a workspace's change form, and where it posts;
// RouteWorkspaceChangePreview its live preview ("was → now", what it replaces).
const (
	RouteWorkspaceChange        = "/workspaces/:id/change"
	RouteWorkspaceChangePreview = "/workspaces/:id/change/preview"
)

// PreviewChange is the live preview of a change of workspace id.
func PreviewChange(id string) string { return ChangeWorkspace("", id) + "/preview" }
