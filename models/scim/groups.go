package scim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/db"
)

type groupRow struct {
	ID             string
	OrganizationID string
	DisplayName    string
	ExternalID     *string
	Doc            map[string]any `gorm:"serializer:json;type:jsonb"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

func (groupRow) TableName() string { return "scim_groups" }

// fill reads the group's name and members from doc; members are kept in
// scim_group_members, not in the document, so a deleted user leaves every group.
func (g *groupRow) fill(doc map[string]any) ([]string, error) {
	cleaned := map[string]any{}
	var members []string
	for k, v := range doc {
		switch strings.ToLower(k) {
		case "id", "meta", "schemas":
		case "members":
			for _, m := range asList(v) {
				el, _ := m.(map[string]any)
				id, _ := lookup(el, "value").(string)
				if id == "" {
					return nil, Invalid("each member needs a value: the id of a user")
				}
				if !slices.Contains(members, id) {
					members = append(members, id)
				}
			}
		default:
			cleaned[k] = v
		}
	}
	name, _ := lookup(cleaned, "displayName").(string)
	if name = strings.TrimSpace(name); name == "" || len(name) > 256 {
		return nil, Invalid("displayName is required, at most 256 characters")
	}
	g.DisplayName, g.Doc, g.ExternalID = name, cleaned, nil
	if ext, ok := lookup(cleaned, "externalId").(string); ok && ext != "" {
		g.ExternalID = &ext
	}
	return members, nil
}

// setMembers replaces group g's members, each a user of the same organization.
func (s *Service) setMembers(ctx context.Context, g groupRow, members []string) error {
	var known int64
	if err := s.conn(ctx).Model(&userRow{}).Where("organization_id = ? AND id IN ?", g.OrganizationID, append(members, "")).Count(&known).Error; err != nil {
		return fmt.Errorf("checking members: %w", err)
	}
	if int(known) != len(members) {
		return Invalid("a member is no user of this organization")
	}
	if err := s.conn(ctx).Exec("DELETE FROM scim_group_members WHERE group_id = ?", g.ID).Error; err != nil {
		return fmt.Errorf("replacing members: %w", err)
	}
	for _, m := range members {
		err := s.conn(ctx).Exec("INSERT INTO scim_group_members (organization_id, group_id, user_id) VALUES (?, ?, ?)", g.OrganizationID, g.ID, m).Error
		if err != nil {
			return fmt.Errorf("adding member: %w", db.Translate(err))
		}
	}
	return nil
}

// resource is g with its members, as the directory reads it.
func (s *Service) groupResource(ctx context.Context, g groupRow) (Resource, error) {
	var members []struct{ ID, UserName string }
	err := s.conn(ctx).Raw(`SELECT u.id, u.user_name FROM scim_group_members m JOIN scim_users u ON u.id = m.user_id
	        WHERE m.group_id = ? ORDER BY u.user_name, u.id`, g.ID).Scan(&members).Error
	if err != nil {
		return Resource{}, fmt.Errorf("reading members: %w", err)
	}
	doc := deepCopy(g.Doc)
	list := make([]any, len(members))
	for i, m := range members {
		list[i] = map[string]any{"value": m.ID, "display": m.UserName}
	}
	doc["members"] = list
	return Resource{ID: g.ID, ExternalID: deref(g.ExternalID), Doc: doc, Created: g.CreatedAt, Updated: g.UpdatedAt}, nil
}

// CreateGroup provisions a group with its members.
func (s *Service) CreateGroup(ctx context.Context, doc map[string]any) (Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return Resource{}, err
	}
	g := groupRow{ID: db.NewID("scimg"), OrganizationID: c.OrganizationID}
	members, err := g.fill(doc)
	if err != nil {
		return Resource{}, err
	}
	var out Resource
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := s.conn(ctx).Create(&g).Error; err != nil {
			return fmt.Errorf("storing SCIM group: %w", db.Translate(err))
		}
		if err := s.setMembers(ctx, g, members); err != nil {
			return err
		}
		if err := s.groupChanged(ctx, c, g.DisplayName, members); err != nil {
			return err
		}
		if err := s.record(ctx, c, audit.Entry{Action: "scim.group_created", TargetType: "scim_group", TargetID: g.ID,
			Data: map[string]any{"display_name": g.DisplayName, "members": nonNil(members)}}); err != nil {
			return err
		}
		out, err = s.groupResource(ctx, g)
		return err
	})
	return out, err
}

// Group returns group id of the directory's organization.
func (s *Service) Group(ctx context.Context, id string) (Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return Resource{}, err
	}
	var g groupRow
	if err := s.conn(ctx).Where("organization_id = ? AND id = ?", c.OrganizationID, id).Take(&g).Error; err != nil {
		return Resource{}, fmt.Errorf("SCIM group %s: %w", id, db.Translate(err))
	}
	return s.groupResource(ctx, g)
}

// Groups lists the organization's groups with their members, oldest first.
func (s *Service) Groups(ctx context.Context) ([]Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return nil, err
	}
	var rows []groupRow
	if err := s.conn(ctx).Where("organization_id = ?", c.OrganizationID).Order("created_at, id").Limit(maxList).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing SCIM groups: %w", err)
	}
	out := make([]Resource, 0, len(rows))
	for _, g := range rows {
		r, err := s.groupResource(ctx, g)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ReplaceGroup replaces group id's attributes and members (PUT).
func (s *Service) ReplaceGroup(ctx context.Context, id string, doc map[string]any) (Resource, error) {
	return s.updateGroup(ctx, id, "scim.group_replaced", func(map[string]any) (map[string]any, error) { return doc, nil })
}

// PatchGroup applies ops to group id: members added and removed, the name changed.
func (s *Service) PatchGroup(ctx context.Context, id string, ops []Op) (Resource, error) {
	return s.updateGroup(ctx, id, "scim.group_patched", func(doc map[string]any) (map[string]any, error) { return doc, Apply(doc, ops) })
}

func (s *Service) updateGroup(ctx context.Context, id, how string, change func(map[string]any) (map[string]any, error)) (Resource, error) {
	c, err := client(ctx)
	if err != nil {
		return Resource{}, err
	}
	var out Resource
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		g, before, err := s.lockedGroup(ctx, c, id)
		if err != nil {
			return err
		}
		// Read before change: a PATCH edits the document it is handed.
		wereIn := memberIDs(before)
		doc, err := change(before.Doc)
		if err != nil {
			return err
		}
		members, err := g.fill(doc)
		if err != nil {
			return err
		}
		err = s.conn(ctx).Model(&groupRow{}).Where("id = ?", g.ID).Updates(map[string]any{"display_name": g.DisplayName,
			"external_id": g.ExternalID, "doc": g.Doc, "updated_at": time.Now()}).Error
		if err != nil {
			return fmt.Errorf("saving SCIM group: %w", db.Translate(err))
		}
		if err := s.setMembers(ctx, g, members); err != nil {
			return err
		}
		// Who was in it and who is: a member removed, or a group renamed, changes both.
		if err := s.groupChanged(ctx, c, g.DisplayName, append(wereIn, members...)); err != nil {
			return err
		}
		if err := s.record(ctx, c, audit.Entry{Action: how, TargetType: "scim_group", TargetID: g.ID,
			Data: map[string]any{"display_name": g.DisplayName, "members": nonNil(members)}}); err != nil {
			return err
		}
		out, err = s.groupResource(ctx, g)
		return err
	})
	return out, err
}

// lockedGroup locks group id of c's organization and returns it with its members.
func (s *Service) lockedGroup(ctx context.Context, c Client, id string) (groupRow, Resource, error) {
	var g groupRow
	err := s.conn(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND id = ?", c.OrganizationID, id).Take(&g).Error
	if err != nil {
		return groupRow{}, Resource{}, fmt.Errorf("SCIM group %s: %w", id, db.Translate(err))
	}
	r, err := s.groupResource(ctx, g)
	return g, r, err
}

// DeleteGroup removes group id and its members.
func (s *Service) DeleteGroup(ctx context.Context, id string) error {
	c, err := client(ctx)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		g, before, err := s.lockedGroup(ctx, c, id)
		if err != nil {
			return err
		}
		if err := s.conn(ctx).Where("id = ?", g.ID).Delete(&groupRow{}).Error; err != nil {
			return fmt.Errorf("deleting SCIM group: %w", err)
		}
		if err := s.groupChanged(ctx, c, g.DisplayName, memberIDs(before)); err != nil {
			return err
		}
		return s.record(ctx, c, audit.Entry{Action: "scim.group_deleted", TargetType: "scim_group", TargetID: id})
	})
}

// groupChanged applies the group rules to the people directory users ids link, after a
// change of the group displayed as name.
func (s *Service) groupChanged(ctx context.Context, c Client, name string, ids []string) error {
	links, err := s.memberLinks(ctx, c, ids)
	if err != nil {
		return err
	}
	_, err = s.applyRules(ctx, c, "the directory changed group "+name, false, links...)
	return err
}

// memberIDs are the ids of a group resource's members.
func memberIDs(r Resource) []string {
	var ids []string
	list, _ := r.Doc["members"].([]any)
	for _, m := range list {
		if m, ok := m.(map[string]any); ok {
			if id, ok := m["value"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}
