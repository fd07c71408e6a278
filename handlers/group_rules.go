package handlers

import (
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"gantry/handlers/render"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/models/pages"
	"gantry/views"
	"gantry/views/paths"
)

// ruleForm is the group rule form as the person filled it in.
type ruleForm struct {
	in        org.RuleInput
	submitted bool
}

func readRuleForm(c echo.Context) ruleForm {
	return ruleForm{in: org.RuleInput{Group: c.FormValue("group"), Role: authz.Role(c.FormValue("role")),
		CloudLive: c.FormValue("cloud_live") == "on"}, submitted: true}
}

// groupRulesProps is the group rules section of page, with the form holding form.
func groupRulesProps(page pages.MembersPage, form ruleForm) views.GroupRulesProps {
	p := views.GroupRulesProps{CanManage: page.CanManageRules, Previewed: page.Preview != nil, MaxGroup: org.MaxGroupName,
		Form: views.GroupRuleForm{Group: form.in.Group, Role: string(form.in.Role), CloudLive: form.in.CloudLive, Errors: page.RuleErrors}}
	if !form.submitted {
		p.Form.Role = string(authz.RoleViewer)
	}
	for _, r := range org.RuleRoles {
		p.Roles = append(p.Roles, string(r))
	}
	for _, r := range page.Rules {
		p.Rules = append(p.Rules, views.GroupRuleRow{ID: r.ID, Group: r.GroupName, Role: string(r.Role), CloudLive: r.CloudLive})
	}
	for _, r := range page.Preview {
		p.Preview = append(p.Preview, views.RulePreviewRow{Name: r.Name, Email: r.Email, Role: string(r.Role),
			FromRule: r.Source == org.SourceRule, Effect: r.Effect})
	}
	return p
}

// previewRule shows whom the group rule in the form would reach. It changes nothing, so
// it spends no form key (web's readOnlyPosts): Add can follow with the same form.
func (h Members) previewRule(c echo.Context) error {
	form := readRuleForm(c)
	page, err := h.Pages.PreviewRule(c.Request().Context(), form.in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if page.RuleErrors != nil {
		status = http.StatusUnprocessableEntity
	}
	return render.Page(c, status, views.MembersPage(membersProps(c, page, views.InviteForm{Role: string(authz.RoleOperator)}, form)))
}

// addRule adds the group rule in the form.
func (h Members) addRule(c echo.Context) error {
	ctx, form := c.Request().Context(), readRuleForm(c)
	refused, err := h.Pages.AddRule(ctx, form.in)
	if err != nil {
		return err
	}
	if refused != nil {
		return render.Page(c, http.StatusUnprocessableEntity, views.MembersPage(membersProps(c, *refused, views.InviteForm{Role: string(authz.RoleOperator)}, form)))
	}
	_ = render.Flash(c, "success", "Group rule added: people in "+form.in.Group+" join as "+string(form.in.Role)+" at their next sign-in.")
	return render.Redirect(c, paths.Members()+"#group-rules")
}

// removeRule asks first, then removes the group rule: its members lose what it gave.
func (h Members) removeRule(c echo.Context) error {
	ctx := c.Request().Context()
	rules, err := h.Rules.Rules(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(rules, func(r org.GroupRule) bool { return r.ID == c.Param("id") })
	if i < 0 {
		return errs.ErrNotFound
	}
	r := rules[i]
	if c.FormValue("confirm") != "yes" {
		return render.Page(c, http.StatusOK, views.ConfirmRemoveGroupRule(views.GroupRuleRow{ID: r.ID, Group: r.GroupName, Role: string(r.Role), CloudLive: r.CloudLive}))
	}
	if err := h.Rules.RemoveRule(ctx, r.ID); err != nil {
		return err
	}
	_ = render.Flash(c, "success", "Group rule removed: the members only it made have lost what it gave.")
	return render.Redirect(c, paths.Members()+"#group-rules")
}
