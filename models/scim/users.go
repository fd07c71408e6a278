package scim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/db"
	"gantry/models/errs"
)

// Resource is a user or group as the directory last described it.
type Resource struct {
	ID         string
	ExternalID string
	Doc        map[string]any // the attributes, without id, schemas and meta
	Created    time.Time
	Updated    time.Time
}

type userRow struct {
	ID             string
	OrganizationID string
	UserName       string
	ExternalID     *string
	Active         bool
	DisplayName    string
	Doc            map[string]any `gorm:"serializer:json;type:jsonb"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (userRow) TableName() string { return "scim_users" }

func (u userRow) resource() Resource {
	return Resource{ID: u.ID, ExternalID: deref(u.ExternalID), Doc: u.Doc, Created: u.CreatedAt, Updated: u.UpdatedAt}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// maxList bounds what one list reads: a directory filters (userName eq) or pages.
const maxList = 10000

// fill reads the columns Gantry uses from doc, checking them.
func (u *userRow) fill(doc map[string]any) error {
	cleaned := map[string]any{}
	for k, v := range doc {
		switch strings.ToLower(k) {
		case "id", "meta", "schemas", "password": // never kept: Okta sends a password
		default:
			cleaned[k] = v
		}
	}
	name, _ := lookup(cleaned, "userName").(string)
	if name = strings.TrimSpace(name); name == "" || len(name) > 256 {
		return Invalid("userName is required, at most 256 characters")
	}
	u.UserName, u.Doc = name, cleaned
	u.ExternalID = nil
	if ext, ok := lookup(cleaned, "externalId").(string); ok && ext != "" {
		if len(ext) > 256 {
			return Invalid("externalId has at most 256 characters")
		}
		u.ExternalID = &ext
	}
	u.Active = true
	if v := lookup(cleaned, "active"); v != nil {
		b, err := Bool(v)
		if err != nil {
			return err
		}
		u.Active = b
	}
	set(cleaned, "active", u.Active)
	u.DisplayName, _ = lookup(cleaned, "displayName").(string)
	if len(u.DisplayName) > 256 {
		return Invalid("displayName has at most 256 characters")
	}
	return nil
}

// CreateUser provisions a user. It grants nothing; a user created inactive has their
// access ended at once.
func (s *Service) CreateUser(ctx context.Context, doc map[string]any) (Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return Resource{}, err
	}
	u := userRow{ID: db.NewID("scimu"), OrganizationID: c.OrganizationID}
	if err := u.fill(doc); err != nil {
		return Resource{}, err
	}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := s.conn(ctx).Create(&u).Error; err != nil {
			return fmt.Errorf("storing SCIM user: %w", db.Translate(err))
		}
		ended, err := s.applyRules(ctx, c, "the directory created "+u.UserName, false, deref(u.ExternalID))
		if err != nil {
			return err
		}
		if err := s.record(ctx, c, audit.Entry{Action: "scim.user_created", TargetType: "scim_user", TargetID: u.ID, Data: u.summary()}); err != nil {
			return err
		}
		if !u.Active {
			return s.deprovision(ctx, c, u, "created inactive", ended)
		}
		return nil
	})
	return u.resource(), conflict(err)
}

func (u userRow) summary() map[string]any {
	return map[string]any{"user_name": u.UserName, "external_id": deref(u.ExternalID), "active": u.Active}
}

// conflict turns a taken userName into ErrConflict.
func conflict(err error) error {
	if errors.Is(err, errs.ErrConflict) {
		return fmt.Errorf("userName: %w", ErrConflict)
	}
	return err
}

// User returns user id of the directory's organization.
func (s *Service) User(ctx context.Context, id string) (Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return Resource{}, err
	}
	var u userRow
	if err := s.conn(ctx).Where("organization_id = ? AND id = ?", c.OrganizationID, id).Take(&u).Error; err != nil {
		return Resource{}, fmt.Errorf("SCIM user %s: %w", id, db.Translate(err))
	}
	return u.resource(), nil
}

// Users lists the organization's users, oldest first (the caller filters and pages).
func (s *Service) Users(ctx context.Context) ([]Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return nil, err
	}
	var rows []userRow
	if err := s.conn(ctx).Where("organization_id = ?", c.OrganizationID).Order("created_at, id").Limit(maxList).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing SCIM users: %w", err)
	}
	out := make([]Resource, len(rows))
	for i, u := range rows {
		out[i] = u.resource()
	}
	return out, nil
}

// ReplaceUser replaces user id's attributes (PUT).
func (s *Service) ReplaceUser(ctx context.Context, id string, doc map[string]any) (Resource, error) {
	return s.updateUser(ctx, id, "scim.user_replaced", func(map[string]any) (map[string]any, error) { return doc, nil })
}

// PatchUser applies ops to user id (PATCH); active false ends the person's access.
func (s *Service) PatchUser(ctx context.Context, id string, ops []Op) (Resource, error) {
	return s.updateUser(ctx, id, "scim.user_patched", func(doc map[string]any) (map[string]any, error) {
		next := deepCopy(doc)
		return next, Apply(next, ops)
	})
}

// updateUser is every change of a user: locked read, change, checks, save, audit, and
// the end of the person's access when the directory turned them inactive, in one
// transaction: a refused change stores nothing.
func (s *Service) updateUser(ctx context.Context, id, how string, change func(map[string]any) (map[string]any, error)) (Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return Resource{}, err
	}
	var u userRow
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		err := s.conn(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND id = ?", c.OrganizationID, id).Take(&u).Error
		if err != nil {
			return fmt.Errorf("SCIM user %s: %w", id, db.Translate(err))
		}
		wasActive, wasLink := u.Active, deref(u.ExternalID)
		doc, err := change(u.Doc)
		if err != nil {
			return err
		}
		if err := u.fill(doc); err != nil {
			return err
		}
		err = s.conn(ctx).Model(&userRow{}).Where("id = ?", u.ID).Updates(map[string]any{"user_name": u.UserName, "external_id": u.ExternalID,
			"active": u.Active, "display_name": u.DisplayName, "doc": u.Doc, "updated_at": time.Now()}).Error
		if err != nil {
			return fmt.Errorf("saving SCIM user: %w", db.Translate(err))
		}
		// The people it linked before lose its groups; those it links now get them.
		ended, err := s.applyRules(ctx, c, "the directory changed "+u.UserName, false, wasLink, deref(u.ExternalID))
		if err != nil {
			return err
		}
		if err := s.record(ctx, c, audit.Entry{Action: how, TargetType: "scim_user", TargetID: u.ID, Data: u.summary()}); err != nil {
			return err
		}
		if wasActive && !u.Active {
			return s.deprovision(ctx, c, u, "deactivated", ended)
		}
		return nil
	})
	return u.resource(), conflict(err)
}

// DeleteUser removes user id (and their group memberships), ending the person's access.
func (s *Service) DeleteUser(ctx context.Context, id string) error {
	c, err := client(ctx)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		var u userRow
		err := s.conn(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND id = ?", c.OrganizationID, id).Take(&u).Error
		if err != nil {
			return fmt.Errorf("SCIM user %s: %w", id, db.Translate(err))
		}
		if err := s.conn(ctx).Delete(&userRow{}, "id = ?", u.ID).Error; err != nil {
			return fmt.Errorf("deleting SCIM user: %w", err)
		}
		ended, err := s.applyRules(ctx, c, "the directory deleted "+u.UserName, true, deref(u.ExternalID))
		if err != nil {
			return err
		}
		if err := s.record(ctx, c, audit.Entry{Action: "scim.user_deleted", TargetType: "scim_user", TargetID: u.ID, Data: u.summary()}); err != nil {
			return err
		}
		return s.deprovision(ctx, c, u, "deleted", ended)
	})
}

// deepCopy copies a JSON document, so a refused PATCH leaves the stored one untouched.
func deepCopy(doc map[string]any) map[string]any {
	raw, err := json.Marshal(doc)
	if err != nil {
		return maps.Clone(doc)
	}
	out := map[string]any{}
	if json.Unmarshal(raw, &out) != nil {
		return maps.Clone(doc)
	}
	return out
}
