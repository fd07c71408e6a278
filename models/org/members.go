package org

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/runport"
)

// Members administers the memberships of the subject's organization (the members
// page): roles, cloud.live, invitations and removal, every change audited. Taking
// rights away (a lower role, removal, cloud.live revoked) voids that member's approvals
// that have not started applying, in the same transaction: the runs wait again.
type Members struct {
	db        *gorm.DB
	audit     *audit.Log
	approvals runport.MemberWatcher
}

// NewMembers returns the members service; approvals is the run lifecycle.
func NewMembers(gdb *gorm.DB, log *audit.Log, approvals runport.MemberWatcher) *Members {
	return &Members{db: gdb, audit: log, approvals: approvals}
}

// List returns the members of the subject's organization (members.manage).
func (s *Members) List(ctx context.Context) ([]MembershipView, error) {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return nil, err
	}
	return membersOf(ctx, s.db, subject.OrganizationID)
}

// Invitations lists the open invitations of the subject's organization.
func (s *Members) Invitations(ctx context.Context) ([]Invitation, error) {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return nil, err
	}
	var out []Invitation
	if err := db.Conn(ctx, s.db).Where("organization_id = ?", subject.OrganizationID).Order("email").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("listing invitations: %w", err)
	}
	return out, nil
}

// mayGiveRole checks that subject may give (or take away) role: owners only make or
// unmake owners.
func mayGiveRole(subject authz.Subject, role authz.Role) error {
	if role == authz.RoleOwner && !subject.Can(authz.PermEntitlementsManage) {
		return errs.Explain(errs.ErrForbidden, "Only an owner makes or unmakes owners.")
	}
	return nil
}

// Invite invites an e-mail address with a role: the invitation becomes a membership at
// the first sign-in with that verified address.
func (s *Members) Invite(ctx context.Context, email string, role authz.Role) error {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return err
	}
	email = strings.ToLower(strings.TrimSpace(email))
	v := &errs.Validation{}
	if at := strings.Index(email, "@"); at < 1 || at == len(email)-1 || len(email) > 254 || strings.ContainsAny(email, " \t<>,;\"") {
		v.Add("email", "Enter an e-mail address, such as ana@example.com.")
	}
	if !role.Valid() {
		v.Add("role", "Choose viewer, operator, admin, owner or auditor.")
	}
	if err := v.Err(); err != nil {
		return err
	}
	if err := mayGiveRole(subject, role); err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		var members int64
		err := conn.Table("memberships m").Joins("JOIN users u ON u.id = m.user_id").
			Where("m.organization_id = ? AND lower(u.email) = ?", subject.OrganizationID, email).Count(&members).Error
		if err != nil {
			return fmt.Errorf("checking members: %w", err)
		}
		if members > 0 {
			v := &errs.Validation{}
			v.Add("email", "This address is already a member: change their role in the table above.")
			return v
		}
		// Replacing an invitation is changing what it gives: an owner's invitation is an
		// owner's to change.
		var open Invitation
		err = conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND email = ?", subject.OrganizationID, email).Take(&open).Error
		switch {
		case err == nil:
			if err := mayGiveRole(subject, open.Role); err != nil {
				return err
			}
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return fmt.Errorf("reading invitation: %w", err)
		}
		return saveInvitation(ctx, s.db, s.audit, subject, Invitation{OrganizationID: subject.OrganizationID, Email: email, Role: role})
	})
}

// RevokeInvitation withdraws the invitation of email.
func (s *Members) RevokeInvitation(ctx context.Context, email string) error {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		var inv Invitation
		err := db.Conn(ctx, s.db).Clauses(clause.Locking{Strength: "UPDATE"}).
			Where("organization_id = ? AND email = ?", subject.OrganizationID, strings.ToLower(strings.TrimSpace(email))).Take(&inv).Error
		if err != nil {
			return fmt.Errorf("invitation: %w", db.Translate(err))
		}
		if err := mayGiveRole(subject, inv.Role); err != nil {
			return err
		}
		if err := db.Conn(ctx, s.db).Where("organization_id = ? AND email = ?", inv.OrganizationID, inv.Email).Delete(&Invitation{}).Error; err != nil {
			return fmt.Errorf("revoking invitation: %w", err)
		}
		return s.audit.Record(ctx, audit.Entry{Action: "invitation.revoked", TargetType: "invitation", TargetID: inv.Email,
			Data: map[string]any{"role": inv.Role}})
	})
}

// change runs fn on member userID's locked membership, in one transaction that first
// takes the organization's member lock: one member change at a time per organization,
// so the last-owner count holds. fn voids approvals before it audits anything (the
// runs' lock order: rows before the audit chain).
func (s *Members) change(ctx context.Context, subject authz.Subject, userID string, fn func(ctx context.Context, m Membership) error) error {
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := lockMembers(ctx, s.db, subject.OrganizationID); err != nil {
			return err
		}
		m, err := s.member(ctx, subject, userID)
		if err != nil {
			return err
		}
		if err := fn(ctx, m); err != nil {
			return err
		}
		// Which waiting runs the member may decide now ("Waiting for you").
		return s.approvals.RefreshDecidersOf(ctx, m.OrganizationID, userID)
	})
}

// lockMembers takes organization orgID's member lock for the caller's transaction: one
// member change at a time per organization, from the members page or the group rules.
func lockMembers(ctx context.Context, gdb *gorm.DB, orgID string) error {
	if err := db.Conn(ctx, gdb).Exec("SELECT pg_advisory_xact_lock(hashtextextended('members:' || ?, 0))", orgID).Error; err != nil {
		return fmt.Errorf("locking members: %w", err)
	}
	return nil
}

// member locks and returns user userID's membership of the subject's organization.
func (s *Members) member(ctx context.Context, subject authz.Subject, userID string) (Membership, error) {
	var m Membership
	err := db.Conn(ctx, s.db).Clauses(clause.Locking{Strength: "UPDATE"}).
		Where("organization_id = ? AND user_id = ?", subject.OrganizationID, userID).Take(&m).Error
	if err != nil {
		return Membership{}, fmt.Errorf("member %s: %w", userID, db.Translate(err))
	}
	return m, nil
}

// keepAnOwner refuses a change that would leave the organization without an owner.
func (s *Members) keepAnOwner(ctx context.Context, orgID, userID string) error {
	var others int64
	err := db.Conn(ctx, s.db).Model(&Membership{}).Where("organization_id = ? AND role = ? AND user_id <> ?", orgID, authz.RoleOwner, userID).Count(&others).Error
	if err != nil {
		return fmt.Errorf("counting owners: %w", err)
	}
	if others == 0 {
		return errs.Explain(errs.ErrConflict, "This is the organization's last owner: make someone else an owner first.")
	}
	return nil
}

// lowers reports whether going from role from to role to takes rights away.
func lowers(from, to authz.Role) bool {
	return from != to && !to.AtLeast(from)
}

// SetRole gives member userID role. A lower role voids the member's approvals that
// have not started applying.
func (s *Members) SetRole(ctx context.Context, userID string, role authz.Role) error {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return err
	}
	if !role.Valid() {
		v := &errs.Validation{}
		v.Add("role", "Choose viewer, operator, admin, owner or auditor.")
		return v
	}
	return s.change(ctx, subject, userID, func(ctx context.Context, m Membership) error {
		if m.Role == role {
			return nil
		}
		if err := mayGiveRole(subject, m.Role); err != nil {
			return err
		}
		if err := mayGiveRole(subject, role); err != nil {
			return err
		}
		if m.Role == authz.RoleOwner {
			if err := s.keepAnOwner(ctx, m.OrganizationID, userID); err != nil {
				return err
			}
		}
		if lowers(m.Role, role) {
			if err := s.approvals.VoidApprovalsOf(ctx, m.OrganizationID, userID, fmt.Sprintf("%s changed their role from %s to %s", subject.Name, m.Role, role)); err != nil {
				return err
			}
		}
		// A person's change makes the membership theirs: the rules no longer change it.
		if err := db.Conn(ctx, s.db).Model(&Membership{}).Where("organization_id = ? AND user_id = ?", m.OrganizationID, userID).
			Updates(map[string]any{"role": role, "source": SourceDirect}).Error; err != nil {
			return fmt.Errorf("changing role: %w", err)
		}
		return s.audit.Record(ctx, audit.Entry{Action: "membership.role_changed", TargetType: "user", TargetID: userID,
			Data: map[string]any{"before": m.Role, "after": role, "source_before": m.Source}})
	})
}

// SetCloudLive grants or revokes member userID's cloud.live entitlement (owners).
// Revoking it voids the member's approvals that have not started applying.
func (s *Members) SetCloudLive(ctx context.Context, userID string, on bool) error {
	subject, err := authz.Require(ctx, authz.PermEntitlementsManage)
	if err != nil {
		return err
	}
	return s.change(ctx, subject, userID, func(ctx context.Context, m Membership) error {
		if m.CloudLive == on {
			return nil
		}
		action := "membership.cloud_live_granted"
		if !on {
			action = "membership.cloud_live_revoked"
			if err := s.approvals.VoidApprovalsOf(ctx, m.OrganizationID, userID, subject.Name+" revoked their live-cloud entitlement"); err != nil {
				return err
			}
		}
		if err := db.Conn(ctx, s.db).Model(&Membership{}).Where("organization_id = ? AND user_id = ?", m.OrganizationID, userID).
			Updates(map[string]any{"cloud_live": on, "source": SourceDirect}).Error; err != nil {
			return fmt.Errorf("setting cloud.live: %w", err)
		}
		return s.audit.Record(ctx, audit.Entry{Action: action, TargetType: "user", TargetID: userID,
			Data: map[string]any{"source_before": m.Source}})
	})
}

// Remove ends member userID's membership (their grants and environment ownerships go
// with it) and voids their approvals that have not started applying. Nobody removes
// themselves here (ask another admin), and the last owner stays.
func (s *Members) Remove(ctx context.Context, userID string) error {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return err
	}
	if userID == subject.UserID {
		return errs.Explain(errs.ErrConflict, "You cannot remove yourself: ask another admin or owner.")
	}
	return s.change(ctx, subject, userID, func(ctx context.Context, m Membership) error {
		if err := mayGiveRole(subject, m.Role); err != nil {
			return err
		}
		if m.Role == authz.RoleOwner {
			if err := s.keepAnOwner(ctx, m.OrganizationID, userID); err != nil {
				return err
			}
		}
		if err := s.approvals.VoidApprovalsOf(ctx, m.OrganizationID, userID, subject.Name+" removed them from the organization"); err != nil {
			return err
		}
		res := db.Conn(ctx, s.db).Where("organization_id = ? AND user_id = ?", m.OrganizationID, userID).Delete(&Membership{})
		if res.Error != nil {
			if errors.Is(db.Translate(res.Error), errs.ErrConflict) {
				return errs.Explain(errs.ErrConflict, "This member still owns records that need them; change their role instead.")
			}
			return fmt.Errorf("removing member: %w", res.Error)
		}
		return s.audit.Record(ctx, audit.Entry{Action: "membership.removed", TargetType: "user", TargetID: userID,
			Data: map[string]any{"role": m.Role, "cloud_live": m.CloudLive}})
	})
}

// ServiceAccountIssuer marks a service account's user row: no OpenID Provider has this
// issuer, so nobody signs in as one.
const ServiceAccountIssuer = "gantry:service-account"

// AddServiceAccount adds a service account to the subject's organization (admins and
// owners): a member with a role like anyone (never owner), that acts only through API
// tokens its admins make for it. Bad input is *errs.Validation; nothing is written.
func (s *Members) AddServiceAccount(ctx context.Context, name string, role authz.Role) (User, error) {
	subject, err := authz.Require(ctx, authz.PermMembersManage)
	if err != nil {
		return User{}, err
	}
	name = strings.TrimSpace(name)
	v := &errs.Validation{}
	if name == "" || len([]rune(name)) > 100 || strings.ContainsRune(name, 0) {
		v.Add("name", "Name it after what uses it, in 1 to 100 characters, e.g. deploy-pipeline.")
	}
	if !role.Valid() || role == authz.RoleOwner {
		v.Add("role", "Choose viewer, operator, admin or auditor: a service account is never an owner.")
	}
	if err := v.Err(); err != nil {
		return User{}, err
	}
	u := User{ID: db.NewID("usr"), Issuer: ServiceAccountIssuer, Name: name, ServiceAccount: true, Groups: []string{}}
	u.Subject = u.ID
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := db.Conn(ctx, s.db).Create(&u).Error; err != nil {
			return fmt.Errorf("creating service account: %w", db.Translate(err))
		}
		if err := db.Conn(ctx, s.db).Create(&Membership{OrganizationID: subject.OrganizationID, UserID: u.ID, Role: role}).Error; err != nil {
			return fmt.Errorf("adding service account: %w", db.Translate(err))
		}
		return s.audit.Record(ctx, audit.Entry{Action: "membership.service_account_added", TargetType: "user", TargetID: u.ID,
			Data: map[string]any{"name": name, "role": role}})
	})
	return u, err
}
