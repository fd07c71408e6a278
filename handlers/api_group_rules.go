package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/authz"
	"gantry/models/org"
	"gantry/views/paths"
)

// GroupRuleAdmin lists, adds, removes and previews an organization's group rules
// (org.GroupRules): admins and owners read and preview, owners change (the service
// checks).
type GroupRuleAdmin interface {
	Rules(ctx context.Context) ([]org.GroupRule, error)
	AddRule(ctx context.Context, in org.RuleInput) (org.GroupRule, error)
	RemoveRule(ctx context.Context, id string) error
	Preview(ctx context.Context, in org.RuleInput) ([]org.PreviewRow, error)
}

func (h API) registerGroupRules(g *echo.Group, spec *openapi.Spec) {
	spec.Route(g, openapi.Op{Method: http.MethodGet, Path: paths.APIGroupRules(), ID: "listGroupRules", Tag: "group-rules", Scope: "admin (admins and owners)",
		Summary: "The organization's group rules, by group: which provider or directory group makes members with which role", Response: apiGroupRules{}}, h.groupRules)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.APIGroupRules(), ID: "addGroupRule", Tag: "group-rules", Scope: "admin (owners only)",
		Summary: "Map a group to a role and optionally cloud.live (never owner: 422 on role; a group that has a rule: 422 on group); the members rules made get it at once, others at their next sign-in",
		Body:    apiGroupRuleInput{}, Status: http.StatusCreated, Response: apiGroupRule{}}, h.addGroupRule)
	spec.Route(g, openapi.Op{Method: http.MethodDelete, Path: paths.RouteAPIGroupRule, ID: "removeGroupRule", Tag: "group-rules", Scope: "admin (owners only)",
		Summary: "Remove a group rule: the members it made lose what it gave at once", Status: http.StatusNoContent}, h.removeGroupRule)
	spec.Route(g, openapi.Op{Method: http.MethodPost, Path: paths.APIGroupRulesPreview(), ID: "previewGroupRule", Tag: "group-rules", Scope: "admin (admins and owners)", ChangesNothing: true,
		Summary: "Whom a rule would reach, with the rules as they are plus this one, from the members' last group snapshots and the directory: changes nothing",
		Body:    apiGroupRuleInput{}, Response: apiGroupRulePreview{}}, h.previewGroupRule)
}

// apiRuleRole is a role a group rule may give: one of org.RuleRoles.
type apiRuleRole string

// OpenAPIEnum lists the roles, from the rule that defines them.
func (apiRuleRole) OpenAPIEnum() []string {
	var out []string
	for _, r := range org.RuleRoles {
		out = append(out, string(r))
	}
	return out
}

type apiGroupRuleInput struct {
	Group     string      `json:"group" doc:"as the provider sends it: a name, a path such as /platform/approvers, or an Entra group's object id; a SCIM group by display name; at most 256 characters"`
	Role      apiRuleRole `json:"role" doc:"owner stays invitation-only"`
	CloudLive bool        `json:"cloud_live,omitempty" doc:"the rule also gives the live-cloud entitlement"`
}

func (in apiGroupRuleInput) rule() org.RuleInput {
	return org.RuleInput{Group: in.Group, Role: authz.Role(in.Role), CloudLive: in.CloudLive}
}

type apiGroupRule struct {
	ID        string    `json:"id"`
	Group     string    `json:"group"`
	Role      string    `json:"role"`
	CloudLive bool      `json:"cloud_live"`
	CreatedBy string    `json:"created_by" doc:"the user id of the owner who added it"`
	CreatedAt time.Time `json:"created_at"`
}

type apiGroupRules struct {
	Rules []apiGroupRule `json:"rules"`
}

type apiGroupRulePreview struct {
	Rows []apiPreviewRow `json:"rows"`
}

type apiPreviewRow struct {
	UserID string `json:"user_id" doc:"empty for a directory user who has not signed in as a member"`
	Name   string `json:"name"`
	Email  string `json:"email"`
	Role   string `json:"role" doc:"the membership's role today (empty: none)"`
	Source string `json:"source" doc:"where the membership came from: direct (an invitation or a person's action, never changed by a rule) or rule (empty: none)"`
	Effect string `json:"effect" doc:"what the rules would do, in words"`
}

func toAPIGroupRule(r org.GroupRule) apiGroupRule {
	return apiGroupRule{ID: r.ID, Group: r.GroupName, Role: string(r.Role), CloudLive: r.CloudLive, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC()}
}

func (h API) groupRules(c echo.Context) error {
	rules, err := h.GroupRules.Rules(c.Request().Context())
	if err != nil {
		return err
	}
	out := apiGroupRules{Rules: []apiGroupRule{}}
	for _, r := range rules {
		out.Rules = append(out.Rules, toAPIGroupRule(r))
	}
	return c.JSON(http.StatusOK, out)
}

func (h API) addGroupRule(c echo.Context) error {
	var body apiGroupRuleInput
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	rule, err := h.GroupRules.AddRule(c.Request().Context(), body.rule())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toAPIGroupRule(rule))
}

func (h API) removeGroupRule(c echo.Context) error {
	if err := h.GroupRules.RemoveRule(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h API) previewGroupRule(c echo.Context) error {
	var body apiGroupRuleInput
	if err := bindJSON(c, &body); err != nil {
		return err
	}
	rows, err := h.GroupRules.Preview(c.Request().Context(), body.rule())
	if err != nil {
		return err
	}
	out := apiGroupRulePreview{Rows: []apiPreviewRow{}}
	for _, r := range rows {
		out.Rows = append(out.Rows, apiPreviewRow{UserID: r.UserID, Name: r.Name, Email: r.Email, Role: string(r.Role), Source: r.Source, Effect: r.Effect})
	}
	return c.JSON(http.StatusOK, out)
}
