// Package demo seeds the development data `gantry dev` starts with: two organizations,
// one user per role in each, and development, staging and production environments.
// Seeding is idempotent, so a second start of `gantry dev` changes nothing.
package demo

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/org"
)

// Org is a demo organization.
type Org struct{ Slug, Name string }

// User is a demo user: an identity at the development OpenID Provider and one role in
// one organization. The password is for the development provider only.
type User struct {
	Subject, Email, Name, Password string
	OrgSlug                        string
	Role                           authz.Role
	// Groups are what the development provider puts in the ID token's groups claim.
	Groups []string
	// CloudLive: the demo runs live OpenTofu against the sandbox cloud, so everyone who
	// requests or approves there holds cloud.live.
	CloudLive bool
}

// LeadsGroup is the demo group of an organization's owners and admins; it owns the
// production environment (a matrix row may name the environment's owners).
func LeadsGroup(orgSlug string) string { return orgSlug + "-platform-leads" }

// DevelopersGroup is the demo group of an organization's operators.
func DevelopersGroup(orgSlug string) string { return orgSlug + "-developers" }

// Orgs are the two demo tenants.
var Orgs = []Org{{Slug: "acme", Name: "Acme Corp"}, {Slug: "globex", Name: "Globex"}}

var firstNames = map[string]map[authz.Role]string{
	"acme":   {authz.RoleOwner: "Alice", authz.RoleAdmin: "Adam", authz.RoleOperator: "Olivia", authz.RoleViewer: "Victor", authz.RoleAuditor: "Audrey"},
	"globex": {authz.RoleOwner: "Grace", authz.RoleAdmin: "Gustav", authz.RoleOperator: "Greta", authz.RoleViewer: "Gil", authz.RoleAuditor: "Gemma"},
}

// Users returns one user per role in each demo organization, e.g. admin@acme.test with
// password "admin-acme".
func Users() []User {
	var out []User
	for _, o := range Orgs {
		for _, role := range []authz.Role{authz.RoleOwner, authz.RoleAdmin, authz.RoleOperator, authz.RoleViewer, authz.RoleAuditor} {
			u := User{
				Subject:  o.Slug + "-" + string(role),
				Email:    string(role) + "@" + o.Slug + ".test",
				Name:     firstNames[o.Slug][role] + " (" + o.Name + " " + string(role) + ")",
				Password: string(role) + "-" + o.Slug,
				OrgSlug:  o.Slug,
				Role:     role,
			}
			switch role {
			case authz.RoleOwner, authz.RoleAdmin:
				u.Groups, u.CloudLive = []string{LeadsGroup(o.Slug)}, true
			case authz.RoleOperator:
				u.Groups, u.CloudLive = []string{DevelopersGroup(o.Slug)}, true
			}
			out = append(out, u)
		}
	}
	return out
}

// Find returns the demo user with e-mail email.
func Find(email string) (User, bool) {
	for _, u := range Users() {
		if u.Email == email {
			return u, true
		}
	}
	return User{}, false
}

// Seed makes sure the demo organizations, users (as identities at issuer), memberships
// and environments exist. It returns the organization ids by slug.
func Seed(ctx context.Context, gdb *gorm.DB, issuer string) (map[string]string, error) {
	log := audit.New(gdb)
	orgs := org.NewService(gdb, log)
	envs := environment.NewService(gdb, log, nil)
	ids := map[string]string{}
	for _, o := range Orgs {
		created, err := orgs.EnsureOrganization(ctx, o.Slug, o.Name)
		if err != nil {
			return nil, fmt.Errorf("seeding organization %s: %w", o.Slug, err)
		}
		ids[o.Slug] = created.ID
		sysCtx := authz.WithSubject(ctx, authz.System(created.ID))
		existing, err := envs.List(sysCtx)
		if err != nil {
			return nil, fmt.Errorf("seeding environments: %w", err)
		}
		have := map[string]bool{}
		for _, e := range existing {
			have[e.Name] = true
		}
		for _, tier := range environment.Tiers {
			if have[string(tier)] {
				continue
			}
			// Staging is protected in the demo too, so the approval gate is there to try.
			requires := tier != environment.TierDevelopment
			in := environment.Input{Name: string(tier), Tier: string(tier), RequiresApproval: &requires}
			if tier == environment.TierProduction {
				in.OwnerGroups = &[]string{LeadsGroup(o.Slug)}
			}
			if _, err := envs.Create(sysCtx, in); err != nil {
				return nil, fmt.Errorf("seeding environment %s: %w", tier, err)
			}
		}
	}
	for _, u := range Users() {
		err := db.Tx(ctx, gdb, func(ctx context.Context) error {
			user, err := orgs.UpsertLoginUser(ctx, org.Login{Issuer: issuer, Subject: u.Subject, Email: u.Email, Name: u.Name, Groups: u.Groups})
			if err != nil {
				return err
			}
			if err := orgs.EnsureMembership(ctx, ids[u.OrgSlug], user.ID, u.Role); err != nil {
				return err
			}
			if u.CloudLive {
				return orgs.EnsureCloudLive(ctx, ids[u.OrgSlug], user.ID)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("seeding user %s: %w", u.Email, err)
		}
	}
	return ids, nil
}
