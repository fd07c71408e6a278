package policy

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/listing"
)

// The policies page's list of uploaded versions, searched, filtered and paged.

// Version is one uploaded version as the policies list shows it (no source), and
// whether it is its name's newest (the only one that can be in force).
type Version struct {
	Name           string
	Version        int
	Title          string
	Enforcement    string
	Digest         string
	Active         bool
	UploadedByName string
	CreatedAt      time.Time
	Latest         bool
}

// Status of a version, as the policies list filters by it.
const (
	StatusActive     = "active"     // the newest version, active
	StatusInactive   = "inactive"   // the newest version, deactivated
	StatusSuperseded = "superseded" // an older version
)

// VersionQuery narrows the list of uploaded versions.
type VersionQuery struct {
	Text        string // in the name or the title
	Enforcement string
	Status      string
	Page        listing.Page
}

// Sort keys of the versions list.
const (
	SortName     = "name"
	SortUploaded = "uploaded"
)

// VersionOrders are the versions list's orders: by name with the newest version first
// (the version negated, so every column runs one way), or by upload time.
var VersionOrders = []listing.Order[Version]{
	{Key: SortName, Columns: []listing.Column[Version]{
		{SQL: "name", Value: func(v Version) string { return v.Name }},
		{SQL: "(-version)", Kind: listing.Int, Value: func(v Version) string { return strconv.Itoa(-v.Version) }}}},
	{Key: SortUploaded, Columns: []listing.Column[Version]{
		{SQL: "created_at", Kind: listing.Time, Value: func(v Version) string { return listing.TimeValue(v.CreatedAt) }},
		{SQL: "name", Value: func(v Version) string { return v.Name }},
		{SQL: "version", Kind: listing.Int, Value: func(v Version) string { return strconv.Itoa(v.Version) }}}},
}

// latestSQL is whether a row of org_policies (p) is its name's newest version.
const latestSQL = `p.version = (SELECT max(n.version) FROM org_policies n WHERE n.organization_id = p.organization_id AND n.name = p.name)`

// Versions returns one page of the organization's uploaded policy versions that match
// q, and how many match in all.
func (s *Store) Versions(ctx context.Context, q VersionQuery) (listing.Result[Version], int64, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return listing.Result[Version]{}, 0, err
	}
	filtered := func() *gorm.DB {
		tx := db.Conn(ctx, s.db).Table("org_policies p").Where("p.organization_id = ?", subject.OrganizationID)
		if q.Text != "" {
			tx = tx.Where(db.Conn(ctx, s.db).Where(listing.Contains("p.name"), q.Text).Or(listing.Contains("p.title"), q.Text))
		}
		if q.Enforcement != "" {
			tx = tx.Where("p.enforcement = ?", q.Enforcement)
		}
		switch q.Status {
		case StatusActive:
			tx = tx.Where(latestSQL + " AND p.active")
		case StatusInactive:
			tx = tx.Where(latestSQL + " AND NOT p.active")
		case StatusSuperseded:
			tx = tx.Where("NOT (" + latestSQL + ")")
		}
		return tx
	}
	var total int64
	if err := filtered().Count(&total).Error; err != nil {
		return listing.Result[Version]{}, 0, fmt.Errorf("counting policy versions: %w", err)
	}
	page, err := listing.Fetch(filtered().Select("p.name, p.version, p.title, p.enforcement, p.digest, p.active, p.uploaded_by_name, p.created_at, "+latestSQL+" AS latest"),
		VersionOrders, q.Page)
	if err != nil {
		return listing.Result[Version]{}, 0, fmt.Errorf("listing policy versions: %w", err)
	}
	return page, total, nil
}
