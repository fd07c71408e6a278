package org

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
)

// Invitation turns into a membership at the first sign-in with a verified e-mail
// address equal to Email.
type Invitation struct {
	OrganizationID string `gorm:"primaryKey"`
	Email          string `gorm:"primaryKey"`
	Role           authz.Role
	CreatedAt      time.Time
}

// Invite records (or replaces) an invitation as the system: this is the bootstrap path
// of `gantry org invite`, run by whoever operates the deployment.
func (s *Service) Invite(ctx context.Context, orgID, email string, role authz.Role) error {
	email = strings.ToLower(strings.TrimSpace(email))
	if !role.Valid() {
		return fmt.Errorf("unknown role %q (one of viewer, operator, admin, owner, auditor)", role)
	}
	if !strings.Contains(email, "@") {
		return fmt.Errorf("%q is not an e-mail address", email)
	}
	return saveInvitation(ctx, s.db, s.audit, authz.System(orgID), Invitation{OrganizationID: orgID, Email: email, Role: role})
}

// saveInvitation records (or replaces) inv and audits it as actor, in one transaction.
func saveInvitation(ctx context.Context, gdb *gorm.DB, log *audit.Log, actor authz.Subject, inv Invitation) error {
	return db.Tx(ctx, gdb, func(ctx context.Context) error {
		err := db.Conn(ctx, gdb).Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "organization_id"}, {Name: "email"}},
			DoUpdates: clause.AssignmentColumns([]string{"role"}),
		}).Create(&inv).Error
		if err != nil {
			return fmt.Errorf("saving invitation: %w", db.Translate(err))
		}
		return log.RecordAs(ctx, actor, audit.Entry{Action: "invitation.created", TargetType: "invitation", TargetID: inv.Email,
			Data: map[string]any{"role": inv.Role}})
	})
}

// AcceptInvitations turns the invitations for user's e-mail address into memberships.
// Only call it when the address counts as verified (signin.Asserted.Verified): otherwise
// anyone could claim an invited address. How it was verified is audited with each
// acceptance (a trusted domain's first admission of someone is thus on record).
func (s *Service) AcceptInvitations(ctx context.Context, user User) error {
	email := strings.ToLower(strings.TrimSpace(user.Email))
	if email == "" {
		return nil
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		var invs []Invitation
		conn := db.Conn(ctx, s.db)
		if err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("email = ?", email).Find(&invs).Error; err != nil {
			return fmt.Errorf("reading invitations: %w", err)
		}
		for _, inv := range invs {
			// An invitation makes a member; it never changes one. A role changes on the
			// members page, where lowering it voids approvals and the last owner stays.
			res := conn.Clauses(clause.OnConflict{DoNothing: true}).Create(&Membership{OrganizationID: inv.OrganizationID, UserID: user.ID, Role: inv.Role})
			if res.Error != nil {
				return fmt.Errorf("creating membership: %w", db.Translate(res.Error))
			}
			if err := conn.Where("organization_id = ? AND email = ?", inv.OrganizationID, inv.Email).Delete(&Invitation{}).Error; err != nil {
				return fmt.Errorf("removing accepted invitation: %w", err)
			}
			actor := authz.Subject{UserID: user.ID, Name: user.DisplayName(), OrganizationID: inv.OrganizationID, Role: inv.Role}
			if err := s.audit.RecordAs(ctx, actor, audit.Entry{Action: "invitation.accepted", TargetType: "invitation", TargetID: inv.Email,
				Data: acceptedData(inv, user, res.RowsAffected == 0)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// acceptedData is an accepted invitation's audit data: the role, and how the address
// was verified at this sign-in (the issuer and trusted domain when a domain did).
func acceptedData(inv Invitation, user User, already bool) map[string]any {
	data := map[string]any{"role": inv.Role, "already_a_member": already}
	if a := user.LastSignIn; a != nil {
		data["verified_by"] = a.VerifiedBy
		if d := a.TrustedDomain(); d != "" {
			data["trusted_domain"], data["issuer"] = d, a.Issuer
		}
	}
	return data
}
