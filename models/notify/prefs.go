package notify

import (
	"context"
	"fmt"

	"gorm.io/gorm/clause"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Channel is a way a notice reaches one person.
type Channel string

// ChannelEmail is mail over SMTP (the organization's webhooks are not personal).
const ChannelEmail Channel = "email"

// Channels lists the personal channels, in the order pages show them.
var Channels = []Channel{ChannelEmail}

// preference is one row of notification_preferences.
type preference struct {
	OrganizationID string
	UserID         string
	Event          Event
	Channel        Channel
	Enabled        bool
}

func (preference) TableName() string { return "notification_preferences" }

// Preferences are one member's choices: for each event and channel, whether it reaches
// them. Every notice is on until turned off.
type Preferences map[Event]map[Channel]bool

// On reports whether event e reaches the member on channel c.
func (p Preferences) On(e Event, c Channel) bool {
	on, ok := p[e][c]
	return !ok || on
}

// MyPreferences are the subject's choices in their organization.
func (s *Service) MyPreferences(ctx context.Context) (Preferences, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	var rows []preference
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND user_id = ?", subject.OrganizationID, subject.UserID).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading preferences: %w", err)
	}
	out := Preferences{}
	for _, r := range rows {
		if out[r.Event] == nil {
			out[r.Event] = map[Channel]bool{}
		}
		out[r.Event][r.Channel] = r.Enabled
	}
	return out, nil
}

// SetMyPreferences records the subject's choice for every event and channel: those in
// on are on, every other is off. Unknown names are a field error; nothing is saved then.
func (s *Service) SetMyPreferences(ctx context.Context, on map[Event][]Channel) error {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return err
	}
	v := &errs.Validation{}
	for e, chans := range on {
		if !e.Valid() {
			v.Add("events", fmt.Sprintf("%q is not an event Gantry sends.", e))
		}
		for _, c := range chans {
			if c != ChannelEmail {
				v.Add("events", fmt.Sprintf("%q is not a channel.", c))
			}
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	rows := make([]preference, 0, len(Events)*len(Channels))
	for _, e := range Events {
		for _, c := range Channels {
			enabled := false
			for _, x := range on[e] {
				enabled = enabled || x == c
			}
			rows = append(rows, preference{OrganizationID: subject.OrganizationID, UserID: subject.UserID, Event: e, Channel: c, Enabled: enabled})
		}
	}
	err = db.Conn(ctx, s.db).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "organization_id"}, {Name: "user_id"}, {Name: "event"}, {Name: "channel"}},
		DoUpdates: clause.AssignmentColumns([]string{"enabled"}),
	}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("saving preferences: %w", err)
	}
	return nil
}

// optedOut are the members of orgID who turned event e off on channel c.
func (s *Service) optedOut(ctx context.Context, orgID string, e Event, c Channel) (map[string]bool, error) {
	var ids []string
	err := db.Conn(ctx, s.db).Model(&preference{}).Where("organization_id = ? AND event = ? AND channel = ? AND NOT enabled", orgID, e, c).
		Pluck("user_id", &ids).Error
	if err != nil {
		return nil, fmt.Errorf("reading preferences: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
