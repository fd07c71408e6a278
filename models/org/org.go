// Package org holds organizations, the users who sign in and their memberships (one
// role per organization).
package org

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/apitoken"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/notify"
	"gantry/models/runport"
	"gantry/models/signin"
)

// Organization is a tenant: everything in Gantry belongs to exactly one.
type Organization struct {
	ID        string
	Slug      string
	Name      string
	CreatedAt time.Time
}

// User is one identity at one OpenID Provider.
type User struct {
	ID      string
	Issuer  string
	Subject string
	Email   string
	Name    string
	// Groups is the ID token's groups claim at the last sign-in: a snapshot the rules
	// (named environment owners), workers and notifications read.
	Groups []string `gorm:"serializer:json;type:jsonb"`
	// LastSignIn is what the provider asserted at the last sign-in, and how Gantry read
	// it (nil before the first, and for service accounts): diagnostics, never a token.
	LastSignIn *signin.Asserted `gorm:"serializer:json;type:jsonb"`
	// ServiceAccount: a member of no OpenID Provider, acting only through API tokens.
	ServiceAccount bool
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// DisplayName is the name when the provider gave one, else the e-mail address.
func (u User) DisplayName() string {
	if u.Name != "" {
		return u.Name
	}
	if u.Email != "" {
		return u.Email
	}
	return u.Subject
}

// Membership gives a user one role in one organization.
type Membership struct {
	OrganizationID string `gorm:"primaryKey"`
	UserID         string `gorm:"primaryKey"`
	Role           authz.Role
	// CloudLive is the entitlement to request and approve runs on live executors;
	// owners grant it per member.
	CloudLive bool
	// Source is SourceDirect or SourceRule: only the rules change what a rule made.
	Source    string `gorm:"default:direct"`
	CreatedAt time.Time
}

// MembershipView is a membership with the names a page needs.
type MembershipView struct {
	OrganizationID   string
	OrganizationSlug string
	OrganizationName string
	UserID           string
	UserName         string
	UserEmail        string
	Role             authz.Role
	CloudLive        bool
	// Source is SourceDirect or SourceRule.
	Source         string
	Groups         []string `gorm:"serializer:json"`
	ServiceAccount bool
	// LastSignIn is the member's last sign-in's claims snapshot (nil: none yet).
	LastSignIn *signin.Asserted `gorm:"serializer:json"`
}

// Service manages organizations, users and memberships.
type Service struct {
	db    *gorm.DB
	audit *audit.Log
}

// NewService returns the organization service.
func NewService(gdb *gorm.DB, log *audit.Log) *Service { return &Service{db: gdb, audit: log} }

// Login is what the provider asserted about a person at sign-in.
type Login struct {
	Issuer, Subject, Email, Name string
	// Groups is the groups claim (nil when the provider sends none).
	Groups []string
	// Asserted is the sign-in's claims snapshot, kept for diagnostics (nil: none).
	Asserted *signin.Asserted
}

// UpsertLoginUser finds or creates the user for (issuer, subject) and refreshes the
// e-mail, name and groups the provider asserts (the groups snapshot is replaced at
// every sign-in). It is called by the login callback, before any subject exists, so it
// needs no permission.
func (s *Service) UpsertLoginUser(ctx context.Context, in Login) (User, error) {
	groups := cleanGroups(in.Groups)
	u := User{ID: db.NewID("usr"), Issuer: in.Issuer, Subject: in.Subject, Email: in.Email, Name: in.Name, Groups: groups, LastSignIn: in.Asserted}
	raw, _ := json.Marshal(groups)
	var asserted any // SQL NULL when the caller has no snapshot
	if in.Asserted != nil {
		b, _ := json.Marshal(in.Asserted)
		asserted = string(b)
	}
	err := db.Conn(ctx, s.db).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "issuer"}, {Name: "subject"}},
		DoUpdates: clause.Assignments(map[string]any{"email": in.Email, "name": in.Name, "groups": string(raw),
			"last_sign_in": gorm.Expr("COALESCE(?::jsonb, users.last_sign_in)", asserted), "updated_at": gorm.Expr("now()")}),
	}, clause.Returning{}).Create(&u).Error
	if err != nil {
		return User{}, fmt.Errorf("saving user: %w", db.Translate(err))
	}
	return u, nil
}

// maxGroups bounds the groups kept per user: a provider sending thousands is
// misconfigured, and the snapshot is read on every decision.
const maxGroups = 200

// cleanGroups keeps the groups that are short, printable strings, sorted and unique.
func cleanGroups(in []string) []string {
	out := []string{}
	for _, g := range in {
		g = strings.TrimSpace(g)
		if g == "" || len(g) > 128 || strings.ContainsFunc(g, unicode.IsControl) || !utf8.ValidString(g) {
			continue
		}
		out = append(out, g)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxGroups {
		out = out[:maxGroups]
	}
	return out
}

// Member is what the run rules need to know about user userID in organization orgID
// (run.Members): name, role, cloud.live and groups; errs.ErrNotFound when the user is
// not a member. It checks no permission: the run service authorizes its own subject.
func (s *Service) Member(ctx context.Context, orgID, userID string) (runport.Member, error) {
	var rows []MembershipView
	err := db.Conn(ctx, s.db).Raw(memberQuery+` WHERE m.organization_id = ? AND m.user_id = ?`, orgID, userID).Scan(&rows).Error
	if err != nil {
		return runport.Member{}, fmt.Errorf("reading membership: %w", err)
	}
	if len(rows) == 0 {
		return runport.Member{}, fmt.Errorf("member %s: %w", userID, errs.ErrNotFound)
	}
	return memberOf(rows[0]), nil
}

// List is every member of organization orgID as the run rules see them (run.Members:
// who may decide its waiting runs). It checks no permission.
func (s *Service) List(ctx context.Context, orgID string) ([]runport.OrgMember, error) {
	var rows []MembershipView
	if err := db.Conn(ctx, s.db).Raw(memberQuery+` WHERE m.organization_id = ? ORDER BY m.user_id`, orgID).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading memberships: %w", err)
	}
	out := make([]runport.OrgMember, len(rows))
	for i, m := range rows {
		out[i] = runport.OrgMember{UserID: m.UserID, Member: memberOf(m)}
	}
	return out, nil
}

// Contacts are those of userIDs who are members of organization orgID, with the name
// and address mail reaches them at (notify.People). It checks no permission: the
// notification fan-out asks for the people a notice is addressed to.
func (s *Service) Contacts(ctx context.Context, orgID string, userIDs []string) ([]notify.Contact, error) {
	if len(userIDs) == 0 {
		return nil, nil
	}
	var rows []MembershipView
	if err := db.Conn(ctx, s.db).Raw(memberQuery+` WHERE m.organization_id = ? AND m.user_id IN ? ORDER BY m.user_id`, orgID, userIDs).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading contacts: %w", err)
	}
	out := make([]notify.Contact, len(rows))
	for i, m := range rows {
		out[i] = notify.Contact{UserID: m.UserID, Name: memberOf(m).Name, Email: m.UserEmail}
	}
	return out, nil
}

func memberOf(m MembershipView) runport.Member {
	name := m.UserName
	if name == "" {
		name = m.UserEmail
	}
	return runport.Member{Name: name, Role: m.Role, CloudLive: m.CloudLive, Groups: m.Groups}
}

const memberQuery = `
		SELECT m.organization_id, o.slug AS organization_slug, o.name AS organization_name,
		       m.user_id, u.name AS user_name, u.email AS user_email, m.role, m.cloud_live, m.source, u.groups, u.service_account, u.last_sign_in
		  FROM memberships m
		  JOIN organizations o ON o.id = m.organization_id
		  JOIN users u ON u.id = m.user_id`

// Holder is member userID of organization orgID as API tokens see them
// (errs.ErrNotFound when they are no member: their tokens stop working).
func (s *Service) Holder(ctx context.Context, orgID, userID string) (apitoken.Holder, error) {
	var rows []MembershipView
	err := db.Conn(ctx, s.db).Raw(memberQuery+` WHERE m.organization_id = ? AND m.user_id = ?`, orgID, userID).Scan(&rows).Error
	if err != nil {
		return apitoken.Holder{}, fmt.Errorf("reading membership: %w", db.Translate(err))
	}
	if len(rows) == 0 {
		return apitoken.Holder{}, fmt.Errorf("member %s: %w", userID, errs.ErrNotFound)
	}
	return apitoken.Holder{Name: memberOf(rows[0]).Name, Role: rows[0].Role, ServiceAccount: rows[0].ServiceAccount}, nil
}

// User returns the user with id.
func (s *Service) User(ctx context.Context, id string) (User, error) {
	var u User
	if err := db.Conn(ctx, s.db).Where("id = ?", id).Take(&u).Error; err != nil {
		return User{}, fmt.Errorf("reading user: %w", db.Translate(err))
	}
	return u, nil
}

// MembershipsOf lists the organizations user userID belongs to, by name.
func (s *Service) MembershipsOf(ctx context.Context, userID string) ([]MembershipView, error) {
	var out []MembershipView
	err := db.Conn(ctx, s.db).Raw(memberQuery+` WHERE m.user_id = ? ORDER BY o.name`, userID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("listing memberships: %w", err)
	}
	return out, nil
}

// Members lists the members of the subject's organization.
func (s *Service) Members(ctx context.Context) ([]MembershipView, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	return membersOf(ctx, s.db, subject.OrganizationID)
}

// membersOf lists the members of organization orgID by name.
func membersOf(ctx context.Context, gdb *gorm.DB, orgID string) ([]MembershipView, error) {
	var out []MembershipView
	err := db.Conn(ctx, gdb).Raw(memberQuery+` WHERE m.organization_id = ? ORDER BY u.name, u.email`, orgID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("listing members: %w", err)
	}
	return out, nil
}

// Organizations lists every organization by slug, for the operator's commands (it
// checks no permission: they run with the database URL, not as a member).
func (s *Service) Organizations(ctx context.Context) ([]Organization, error) {
	var out []Organization
	if err := db.Conn(ctx, s.db).Order("slug").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing organizations: %w", err)
	}
	return out, nil
}

// EnsureOrganization creates the organization with slug unless it exists, and returns
// it. Used by demo seeding and bootstrap; the creation is audited as the system.
func (s *Service) EnsureOrganization(ctx context.Context, slug, name string) (Organization, error) {
	var o Organization
	err := db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		err := conn.Where("slug = ?", slug).Take(&o).Error
		if err == nil {
			return nil
		}
		if err != gorm.ErrRecordNotFound {
			return fmt.Errorf("reading organization: %w", err)
		}
		o = Organization{ID: db.NewID("org"), Slug: slug, Name: name}
		if err := conn.Create(&o).Error; err != nil {
			return fmt.Errorf("creating organization: %w", db.Translate(err))
		}
		return s.audit.RecordAs(ctx, authz.System(o.ID), audit.Entry{
			Action: "organization.created", TargetType: "organization", TargetID: o.ID,
			Data: map[string]any{"slug": slug, "name": name},
		})
	})
	return o, err
}

// EnsureMembership gives user userID role in organization orgID (creating or changing
// the membership) as the system, audited when anything changed.
func (s *Service) EnsureMembership(ctx context.Context, orgID, userID string, role authz.Role) error {
	if !role.Valid() {
		return fmt.Errorf("unknown role %q", role)
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		var m Membership
		err := conn.Where("organization_id = ? AND user_id = ?", orgID, userID).Take(&m).Error
		switch {
		case err == nil && m.Role == role:
			return nil
		case err == nil:
			if err := conn.Model(&m).Where("organization_id = ? AND user_id = ?", orgID, userID).Update("role", role).Error; err != nil {
				return fmt.Errorf("changing role: %w", err)
			}
		case err == gorm.ErrRecordNotFound:
			if err := conn.Create(&Membership{OrganizationID: orgID, UserID: userID, Role: role}).Error; err != nil {
				return fmt.Errorf("creating membership: %w", db.Translate(err))
			}
		default:
			return fmt.Errorf("reading membership: %w", err)
		}
		return s.audit.RecordAs(ctx, authz.System(orgID), audit.Entry{
			Action: "membership.role_set", TargetType: "user", TargetID: userID,
			Data: map[string]any{"role": role},
		})
	})
}

// EnsureCloudLive grants member userID of orgID cloud.live as the system (demo seeding
// and bootstrap; owners use the members page), audited when it changed anything.
func (s *Service) EnsureCloudLive(ctx context.Context, orgID, userID string) error {
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		res := db.Conn(ctx, s.db).Model(&Membership{}).Where("organization_id = ? AND user_id = ? AND NOT cloud_live", orgID, userID).
			Update("cloud_live", true)
		if res.Error != nil {
			return fmt.Errorf("granting cloud.live: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		return s.audit.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "membership.cloud_live_granted", TargetType: "user", TargetID: userID})
	})
}
