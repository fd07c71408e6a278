package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/pages"
	"gantry/models/policy"
	"gantry/models/risk"
	"gantry/views/paths"
)

func (h API) registerGovernance(g *echo.Group, spec *openapi.Spec) {
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIPolicies(), ID: "listPolicies", Tag: "policies", Scope: "read",
		Summary: "The organization's policy bundle (built-in and uploaded rules in force) and every uploaded version",
		Query: []openapi.Param{{Name: "sort", Description: "name or uploaded (of the versions); a leading - reverses"},
			{Name: "after"}, {Name: "before"}, {Name: "limit", Type: "integer"}}, Response: apiPolicies{}}, h.policies)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIMatrix(), ID: "getApprovalMatrix", Tag: "matrix", Scope: "read",
		Summary: "The approval matrix in force: risk rules and who decides each level", Response: apiMatrixVersion{}}, h.matrix)
	spec.Route(g, openapi.Op{Method: http.MethodPut, Path: paths.APIMatrix(), ID: "saveApprovalMatrix", Tag: "matrix", Scope: "admin (owners only)",
		Summary: "Save a new version of the approval matrix onto base_version (409 when another version was saved meanwhile)",
		Body:    apiMatrixSave{}, Response: apiMatrixVersion{}}, h.saveMatrix)
}

type apiPolicies struct {
	BundleDigest string          `json:"bundle_digest"`
	Rules        []apiPolicyDef  `json:"rules"`
	Versions     []apiPolicyVers `json:"versions"`
	Next         string          `json:"next,omitempty"`
	Prev         string          `json:"prev,omitempty"`
}

type apiPolicyDef struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Enforcement string `json:"enforcement"`
	Version     string `json:"version" doc:"sha256 of the rule's Rego source: an override binds to it"`
	Origin      string `json:"origin"`
}

type apiPolicyVers struct {
	Name        string    `json:"name"`
	Version     int       `json:"version"`
	Title       string    `json:"title"`
	Enforcement string    `json:"enforcement"`
	Digest      string    `json:"digest"`
	Active      bool      `json:"active"`
	Latest      bool      `json:"latest"`
	UploadedBy  string    `json:"uploaded_by"`
	CreatedAt   time.Time `json:"created_at"`
}

func (h API) policies(c echo.Context) error {
	ctx := c.Request().Context()
	limit, err := apiLimit(c, 50)
	if err != nil {
		return err
	}
	l, err := readList(c, paths.APIPolicies(), []string{policy.SortName, policy.SortUploaded}, listing.Sort{Key: policy.SortName}, limit)
	if err != nil {
		return err
	}
	page, err := h.PolicyPages.Page(ctx, pages.PolicyQuery{Versions: l.page, Tables: true})
	if err != nil {
		return err
	}
	versions := page.Versions
	out := apiPolicies{BundleDigest: page.BundleDigest, Rules: []apiPolicyDef{}, Versions: []apiPolicyVers{},
		Next: pageLink(c, paths.APIPolicies(), "after", versions.Next), Prev: pageLink(c, paths.APIPolicies(), "before", versions.Prev)}
	for _, r := range page.BundleRules {
		out.Rules = append(out.Rules, apiPolicyDef{ID: r.ID, Title: r.Title, Description: r.Description, Enforcement: string(r.Enforcement),
			Version: r.Version, Origin: r.Origin})
	}
	for _, v := range versions.Rows {
		out.Versions = append(out.Versions, apiPolicyVers{Name: v.Name, Version: v.Version, Title: v.Title, Enforcement: v.Enforcement,
			Digest: v.Digest, Active: v.Active, Latest: v.Latest, UploadedBy: v.UploadedByName, CreatedAt: v.CreatedAt.UTC()})
	}
	return c.JSON(http.StatusOK, out)
}

type apiMatrixVersion struct {
	Version   int         `json:"version"`
	Matrix    risk.Matrix `json:"matrix"`
	Comment   string      `json:"comment"`
	SavedBy   string      `json:"saved_by"`
	CreatedAt time.Time   `json:"created_at"`
}

type apiMatrixSave struct {
	// BaseVersion is the version the edit started from.
	BaseVersion int         `json:"base_version"`
	Matrix      risk.Matrix `json:"matrix"`
	Comment     string      `json:"comment,omitempty"`
}

func toAPIMatrix(v risk.Version) apiMatrixVersion {
	return apiMatrixVersion{Version: v.Version, Matrix: v.Matrix, Comment: v.Comment, SavedBy: v.CreatedByName, CreatedAt: v.CreatedAt.UTC()}
}

func (h API) matrix(c echo.Context) error {
	history, err := h.Matrix.History(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIMatrix(risk.Latest(history)))
}

func (h API) saveMatrix(c echo.Context) error {
	var body apiMatrixSave
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	saved, err := h.Matrix.SaveOnto(c.Request().Context(), body.BaseVersion, body.Matrix, body.Comment)
	if errors.Is(err, errs.ErrConflict) {
		return errs.Explain(errs.ErrConflict, "Another version of the approval matrix was saved since version the edit started from: read it again, edit it and save onto it.")
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIMatrix(saved))
}

// RegisterAPI adds the audit log's API routes to g, documented in spec: the history,
// the signing keys and exports.
func (h Audit) RegisterAPI(g *echo.Group, spec *openapi.Spec) {
	filters := []openapi.Param{{Name: "actor"}, {Name: "action"}, {Name: "run", Description: "its id, or its label: orders-db #3"}, {Name: "environment"},
		{Name: "workspace", Description: "its id, or its name: orders-db, or orders-db (staging) where the name is in several environments"},
		{Name: "from", Description: "RFC 3339 or 2026-12-01T09:30 (UTC)"}, {Name: "to"}}
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIAuditEvents(), ID: "listAuditEvents", Tag: "audit", Scope: "audit",
		Summary: "The audit history, newest first, with the hash chain's state",
		Query:   append(filters, openapi.Param{Name: "before", Type: "integer"}, openapi.Param{Name: "limit", Type: "integer"}), Response: auditPageJSON{}}, h.historyJSON)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIAuditKeys(), ID: "getAuditKeys", Tag: "audit", Scope: "read",
		Summary: "The organization's published signing keys (exports and attestations verify against them)", Response: exportfile.KeySet{}}, h.keys)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.APIAuditExports(), ID: "createAuditExport", Tag: "audit", Scope: "audit",
		Summary: "Ask for a signed export of the audit log (built in the background: poll it)", Body: apiExportRequest{},
		Status: http.StatusAccepted, Response: apiExport{}}, h.apiRequestExport)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIAuditExport, ID: "getAuditExport", Tag: "audit", Scope: "audit",
		Summary: "An export's progress", Response: apiExport{}}, h.apiExport)
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.RouteAPIAuditExport + "/download", ID: "downloadAuditExport", Tag: "audit", Scope: "audit",
		Summary: "A ready export's file (JSON lines or CSV with its signed manifest); gantry audit verify checks it", ContentType: "application/x-ndjson",
		OtherContentTypes: []string{"text/csv; charset=utf-8"}, Ranged: true,
		Conflict: "The export is not built yet (CONFLICT): poll it until its status is ready."}, h.apiDownload)
}

type apiExportRequest struct {
	Format      string `json:"format" doc:"jsonl or csv"`
	From        string `json:"from" doc:"RFC 3339"`
	To          string `json:"to" doc:"RFC 3339"`
	Actor       string `json:"actor,omitempty"`
	Action      string `json:"action,omitempty"`
	Run         string `json:"run,omitempty"`
	Environment string `json:"environment,omitempty"`
	Workspace   string `json:"workspace,omitempty"`
}

type apiExport struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Format      string     `json:"format"`
	Percent     int        `json:"percent"`
	EventsTotal *int64     `json:"events_total"`
	SHA256      string     `json:"sha256"`
	Error       string     `json:"error"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	Self        string     `json:"self"`
	Download    string     `json:"download"`
}

func toAPIExport(e audit.Export) apiExport {
	return apiExport{ID: e.ID, Status: e.Status, Format: e.Format, Percent: e.Percent(), EventsTotal: e.EventsTotal, SHA256: e.SHA256,
		Error: e.Error, CreatedAt: e.CreatedAt.UTC(), FinishedAt: utcPtr(e.FinishedAt), Self: paths.APIAuditExport(e.ID),
		Download: paths.APIAuditExportDownload(e.ID)}
}

func (h Audit) apiRequestExport(c echo.Context) error {
	var body apiExportRequest
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	q, err := queryFrom(map[string][]string{"from": {body.From}, "to": {body.To}, "actor": {body.Actor}, "action": {body.Action},
		"run": {body.Run}, "environment": {body.Environment}, "workspace": {body.Workspace}})
	if err != nil {
		return err
	}
	e, err := h.Exports.Request(c.Request().Context(), audit.ExportRequest{Query: q, Format: body.Format})
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, paths.APIAuditExport(e.ID))
	return c.JSON(http.StatusAccepted, toAPIExport(e))
}

func (h Audit) apiExport(c echo.Context) error {
	e, err := h.Exports.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAPIExport(e))
}

func (h Audit) apiDownload(c echo.Context) error { return h.download(c) }
