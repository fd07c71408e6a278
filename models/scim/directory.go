package scim

import (
	"context"
	"fmt"
	"slices"

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
// with an externalId among links are in, and whether such a user is inactive.
func (s Reader) Standing(ctx context.Context, orgID string, links []string) ([]string, bool, error) {
	var groups []string
	err := s.conn(ctx).Raw(`SELECT DISTINCT g.display_name FROM scim_users u
	        JOIN scim_group_members gm ON gm.user_id = u.id JOIN scim_groups g ON g.id = gm.group_id
	        WHERE u.organization_id = ? AND u.external_id IN ? AND u.active ORDER BY 1`, orgID, links).Scan(&groups).Error
	if err != nil {
		return nil, false, fmt.Errorf("reading directory groups: %w", err)
	}
	var inactive int64
	if err := s.conn(ctx).Model(&userRow{}).Where("organization_id = ? AND external_id IN ? AND NOT active", orgID, links).
		Count(&inactive).Error; err != nil {
		return nil, false, fmt.Errorf("reading directory users: %w", err)
	}
	return groups, inactive > 0, nil
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
