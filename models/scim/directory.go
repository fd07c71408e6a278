package scim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/org"
)

// Rules applies the organization's group rules to the people a directory user's
// externalId links (org.GroupRules), in the caller's transaction, as to deactivated
// people when gone (a deleted directory user); it returns the people whose rule
// membership ended.
type Rules interface {
	ForDirectoryUser(ctx context.Context, orgID, link, why string, gone bool) ([]string, error)
}

// Reader reads what the organizations' directories hold for the group rules
// (org.Directory). It needs nothing but the database, so the rules are built with it
// before the Service, which applies them.
type Reader struct{ db *gorm.DB }

// NewReader returns the directories' reader.
func NewReader(gdb *gorm.DB) Reader { return Reader{db: gdb} }

func (s Reader) conn(ctx context.Context) *gorm.DB { return db.Conn(ctx, s.db) }

// Standing returns the display names of orgID's groups that its active directory users
// linked by links (externalId) are in — only those users whose userName or one of whose
// emails is the person's verified address email (an externalId is an organization's to
// write, so it alone admits nobody) — and whether a linked directory user is inactive
// (which ends access whatever the address).
func (s Reader) Standing(ctx context.Context, orgID string, links []string, email string) ([]string, bool, error) {
	var users []userRow
	if err := s.conn(ctx).Where("organization_id = ? AND external_id IN ?", orgID, links).Order("id").Find(&users).Error; err != nil {
		return nil, false, fmt.Errorf("reading directory users: %w", err)
	}
	deactivated := false
	var ids []string
	for _, u := range users {
		switch {
		case !u.Active:
			deactivated = true
		case email != "" && u.hasAddress(email):
			ids = append(ids, u.ID)
		}
	}
	if len(ids) == 0 {
		return nil, deactivated, nil
	}
	var groups []string
	err := s.conn(ctx).Raw(`SELECT DISTINCT g.display_name FROM scim_group_members gm JOIN scim_groups g ON g.id = gm.group_id
	        WHERE gm.organization_id = ? AND gm.user_id IN ? ORDER BY 1`, orgID, ids).Scan(&groups).Error
	if err != nil {
		return nil, false, fmt.Errorf("reading directory groups: %w", err)
	}
	return groups, deactivated, nil
}

// hasAddress reports whether the directory names address (compared without case) as
// u's userName or one of u's emails.
func (u userRow) hasAddress(address string) bool {
	if strings.EqualFold(u.UserName, address) {
		return true
	}
	list, _ := lookup(u.Doc, "emails").([]any)
	for _, e := range list {
		if e, ok := e.(map[string]any); ok {
			if v, ok := lookup(e, "value").(string); ok && strings.EqualFold(strings.TrimSpace(v), address) {
				return true
			}
		}
	}
	return false
}

// GroupMembers returns orgID's active directory users in the group displayed as group.
func (s Reader) GroupMembers(ctx context.Context, orgID, group string) ([]org.DirectoryPerson, error) {
	var out []org.DirectoryPerson
	err := s.conn(ctx).Raw(`SELECT coalesce(u.external_id, '') AS link, u.user_name FROM scim_groups g
	        JOIN scim_group_members gm ON gm.group_id = g.id JOIN scim_users u ON u.id = gm.user_id
	        WHERE g.organization_id = ? AND g.display_name = ? AND u.active ORDER BY u.user_name`, orgID, group).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("reading directory group members: %w", err)
	}
	return out, nil
}

// Organizations returns the organizations whose directory holds a user whose externalId
// is one of links.
func (s Reader) Organizations(ctx context.Context, links []string) ([]string, error) {
	var out []string
	err := s.conn(ctx).Model(&userRow{}).Distinct("organization_id").Where("external_id IN ?", links).
		Order("organization_id").Pluck("organization_id", &out).Error
	if err != nil {
		return nil, fmt.Errorf("reading the directories that link a person: %w", err)
	}
	return out, nil
}

// applyRules applies the group rules to the people the directory users with externalIds
// links name (a changed user, or the members of a changed group), before the change's
// own audit event (gone: the user was deleted, and counts as deactivated); it returns
// the people whose rule membership ended.
func (s *Service) applyRules(ctx context.Context, c Client, why string, gone bool, links ...string) ([]string, error) {
	slices.Sort(links)
	ended := []string{}
	for _, l := range slices.Compact(links) {
		if l == "" {
			continue
		}
		ids, err := s.rules.ForDirectoryUser(ctx, c.OrganizationID, l, why, gone)
		if err != nil {
			return nil, err
		}
		ended = append(ended, ids...)
	}
	return ended, nil
}

// memberLinks returns the externalIds of the directory users ids of c's organization.
func (s *Service) memberLinks(ctx context.Context, c Client, ids []string) ([]string, error) {
	var links []string
	err := s.conn(ctx).Model(&userRow{}).Where("organization_id = ? AND id IN ? AND external_id IS NOT NULL", c.OrganizationID, append(ids, "")).
		Pluck("external_id", &links).Error
	if err != nil {
		return nil, fmt.Errorf("reading group members: %w", err)
	}
	return links, nil
}
