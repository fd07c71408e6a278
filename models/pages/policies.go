package pages

import (
	"context"
	"strconv"
	"strings"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/policy"
	"gantry/policies"
)

// PolicyStore is what the policies page reads of the policy store (policy.Store).
type PolicyStore interface {
	Versions(ctx context.Context, q policy.VersionQuery) (listing.Result[policy.Version], int64, error)
	Bundle(ctx context.Context, orgID string) (*policies.Bundle, error)
	EnvironmentModes(ctx context.Context, environmentID string) ([]policy.RuleMode, error)
	SetModes(ctx context.Context, environmentID string, modes map[string]string) error
	Upload(ctx context.Context, name, rego, tests string) (policy.OrgPolicy, error)
}

// EnvironmentLister lists environments: admins see all of them (List), operators those
// they may request runs in (Choices) (environment.Directory).
type EnvironmentLister interface {
	List(ctx context.Context) ([]environment.Environment, error)
	Choices(ctx context.Context) ([]environment.Environment, error)
}

// Policies builds the policies page: the organization's bundle of rules, its uploaded
// policy versions and the environments whose enforcement the reader may look at.
type Policies struct {
	Store        PolicyStore
	Environments EnvironmentLister
}

// Sort keys of the policies page's rules.
const (
	SortRule   = "rule"
	SortOrigin = "origin"
	SortMode   = "mode"
)

// RuleSortKeys are the keys the bundle's rules sort by.
func RuleSortKeys() []string { return []string{SortRule, SortOrigin, SortMode} }

// PolicyQuery searches and filters both tables of the policies page with one form: a
// filter that cannot hold for a table empties it (built-in rules have no uploaded
// versions, and every rule of the bundle is in force); each table sorts and pages on
// its own.
type PolicyQuery struct {
	Text     string
	Mode     string // an enforcement mode, or "" for any
	Origin   string // policies.OriginBuiltin, policies.OriginOrg, or ""
	Status   string // policy.StatusActive, StatusInactive, StatusSuperseded, or ""
	Rules    listing.Page
	Versions listing.Page
	// Tables is false for a list form that was refused: the page without its tables.
	Tables bool
}

// PolicyPage is the policies page.
type PolicyPage struct {
	BundleDigest string
	// BundleRules are every rule of the bundle in its own order (the API lists them
	// all); Rules those the query lets through, sorted and paged.
	BundleRules []policies.Rule
	Rules       listing.Result[policies.Rule]
	RulesTotal  int64
	Versions    listing.Result[policy.Version]
	// VersionsSort is the uploaded versions' order.
	VersionsSort listing.Sort
	// VersionsTotal counts the uploaded versions that match (0 when the query asks for
	// built-in rules alone).
	VersionsTotal int64
	// Environments are those whose enforcement the reader may look at; Listed is false
	// for viewers and auditors, who are listed none.
	Environments []environment.Environment
	Listed       bool
	CanManage    bool
	// Errors are the messages beside the upload's fields of a refused upload.
	Errors map[string]string
}

// modeRank orders enforcement modes by strength.
var modeRank = map[policies.Enforcement]int{policies.Advisory: 1, policies.SoftMandatory: 2, policies.HardMandatory: 3}

// ruleOrders are the orders of the bundle's rules, paged in memory (the bundle is).
var ruleOrders = []listing.Order[policies.Rule]{
	{Key: SortRule, Columns: []listing.Column[policies.Rule]{
		{SQL: "title", Value: func(r policies.Rule) string { return r.Title }},
		{SQL: "id", Value: func(r policies.Rule) string { return r.ID }}}},
	{Key: SortOrigin, Columns: []listing.Column[policies.Rule]{
		{SQL: "origin", Value: func(r policies.Rule) string { return r.Origin }},
		{SQL: "title", Value: func(r policies.Rule) string { return r.Title }},
		{SQL: "id", Value: func(r policies.Rule) string { return r.ID }}}},
	{Key: SortMode, Columns: []listing.Column[policies.Rule]{
		{SQL: "mode", Kind: listing.Int, Value: func(r policies.Rule) string { return strconv.Itoa(modeRank[r.Enforcement]) }},
		{SQL: "title", Value: func(r policies.Rule) string { return r.Title }},
		{SQL: "id", Value: func(r policies.Rule) string { return r.ID }}}},
}

// Page reads the policies page for q. Every member reads the policies; the bundle is
// read for the reader's organization.
func (s Policies) Page(ctx context.Context, q PolicyQuery) (PolicyPage, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return PolicyPage{}, err
	}
	b, err := s.Store.Bundle(ctx, subject.OrganizationID)
	if err != nil {
		return PolicyPage{}, err
	}
	p := PolicyPage{BundleDigest: b.Digest(), BundleRules: b.Rules(), CanManage: subject.Can(authz.PermPoliciesManage), VersionsSort: q.Versions.Sort}
	if p.Environments, p.Listed, err = s.environments(ctx, subject); err != nil {
		return PolicyPage{}, err
	}
	if !q.Tables {
		return p, nil
	}
	rules := matchingRules(p.BundleRules, q)
	if p.Rules, err = listing.Slice(rules, ruleOrders, q.Rules); err != nil {
		return PolicyPage{}, err
	}
	p.RulesTotal = int64(len(rules))
	if q.Origin != policies.OriginBuiltin {
		p.Versions, p.VersionsTotal, err = s.Store.Versions(ctx, policy.VersionQuery{Text: q.Text, Enforcement: q.Mode, Status: q.Status, Page: q.Versions})
		if err != nil {
			return PolicyPage{}, err
		}
	}
	return p, nil
}

// Upload stores a new version of the organization policy name. A refused upload
// answers the page for q to draw again, with the messages beside the upload's fields
// (the policy is then zero).
func (s Policies) Upload(ctx context.Context, name, rego, tests string, q PolicyQuery) (policy.OrgPolicy, *PolicyPage, error) {
	o, err := s.Store.Upload(ctx, name, rego, tests)
	v, refused := errs.AsValidation(err)
	if !refused {
		return o, nil, err
	}
	page, perr := s.Page(ctx, q)
	if perr != nil {
		return policy.OrgPolicy{}, nil, perr
	}
	page.Errors = v.Fields
	return policy.OrgPolicy{}, &page, nil
}

// ModesPage is an environment's enforcement page: every rule with the mode in force
// there.
type ModesPage struct {
	EnvironmentID, EnvironmentName string
	Rules                          []policy.RuleMode
	CanManage                      bool
	// Submitted are the modes a refused save sent (shown over those in force), Errors
	// its messages beside their rules.
	Submitted, Errors map[string]string
}

// Modes reads environment id's enforcement page. Another organization's or a hidden
// environment is not found.
func (s Policies) Modes(ctx context.Context, id string) (ModesPage, error) {
	rules, err := s.Store.EnvironmentModes(ctx, id)
	if err != nil {
		return ModesPage{}, err
	}
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return ModesPage{}, err
	}
	p := ModesPage{EnvironmentID: id, EnvironmentName: id, Rules: rules, CanManage: subject.Can(authz.PermPoliciesManage)}
	envs, _, err := s.environments(ctx, subject)
	if err != nil {
		return ModesPage{}, err
	}
	for _, e := range envs {
		if e.ID == id {
			p.EnvironmentName = e.Name
		}
	}
	return p, nil
}

// SaveModes sets the enforcement of rules in environment id. A refused save answers
// the page to draw again with the modes sent and the messages beside them.
func (s Policies) SaveModes(ctx context.Context, id string, modes map[string]string) (*ModesPage, error) {
	err := s.Store.SetModes(ctx, id, modes)
	v, refused := errs.AsValidation(err)
	if !refused {
		return nil, err
	}
	page, perr := s.Modes(ctx, id)
	if perr != nil {
		return nil, perr
	}
	page.Submitted, page.Errors = modes, v.Fields
	return &page, nil
}

// matchingRules are the rules q's text and filters let through.
func matchingRules(all []policies.Rule, q PolicyQuery) []policies.Rule {
	text := strings.ToLower(q.Text)
	var out []policies.Rule
	for _, r := range all {
		found := text == "" || strings.Contains(strings.ToLower(r.ID+"\n"+r.Title+"\n"+r.Description), text)
		if found && (q.Mode == "" || string(r.Enforcement) == q.Mode) && (q.Origin == "" || r.Origin == q.Origin) &&
			(q.Status == "" || q.Status == policy.StatusActive) {
			out = append(out, r)
		}
	}
	return out
}

// environments lists what subject's role may see of the organization's environments;
// viewers and auditors are listed none (listed is false).
func (s Policies) environments(ctx context.Context, subject authz.Subject) (envs []environment.Environment, listed bool, err error) {
	switch {
	case subject.Can(authz.PermEnvironmentsManage):
		envs, err = s.Environments.List(ctx)
	case subject.Can(authz.PermProvisioningPlan):
		envs, err = s.Environments.Choices(ctx)
	default:
		return nil, false, nil
	}
	return envs, err == nil, err
}
