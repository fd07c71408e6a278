// Package workspace holds workspaces: one OpenTofu state and its runs, inside one
// environment of one organization. Runs, state versions and locks hang off a workspace
// (they arrive with the run lifecycle).
package workspace

import "time"

// Workspace is one row of workspaces. The composite foreign key
// (organization_id, environment_id) keeps it inside its environment's organization.
type Workspace struct {
	ID             string
	OrganizationID string
	EnvironmentID  string
	Name           string
	TemplateName   string
	NextRunNumber  int
	// ActiveRunID is the apply slot: the one run applying or verifying, if any.
	ActiveRunID *string
	// LastRunAt is when its newest run was requested (the list's "last activity").
	LastRunAt time.Time `gorm:"default:now()"`
	// ArchivedAt is when the workspace was archived (archive.go): hidden from the lists,
	// kept with its runs, state history and audit. Nil: it is listed.
	ArchivedAt     *time.Time
	ArchivedBy     *string
	ArchivedByName string `gorm:"default:''"`
	CreatedAt      time.Time
	UpdatedAt      time.Time
}
