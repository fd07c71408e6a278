package run

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/listing"
)

// The runs list: every run a member may see, searched, filtered, sorted and paged by
// keyset at thousands of runs.

// ListQuery narrows the runs list.
type ListQuery struct {
	// Text is found in the workspace's name, the template, the requester's name or the
	// run's id; "name #N" is run N of the workspaces of that name.
	Text          string
	State         State
	EnvironmentID string
	Template      string
	Kind          Kind
	// Mine keeps the runs the subject requested.
	Mine bool
	Page listing.Page
}

// Sort keys of the runs list.
const (
	SortRequested = "requested"
	SortTemplate  = "template"
	SortRequester = "requester"
)

// Orders are the runs list's orders; the first, newest first, is the default and
// walks runs_org_created_idx.
var Orders = []listing.Order[Run]{
	{Key: SortRequested, Columns: []listing.Column[Run]{
		{SQL: "created_at", Kind: listing.Time, Value: func(r Run) string { return listing.TimeValue(r.CreatedAt) }},
		{SQL: "id", Value: func(r Run) string { return r.ID }}}},
	{Key: SortTemplate, Columns: []listing.Column[Run]{
		{SQL: "template_name", Value: func(r Run) string { return r.TemplateName }},
		{SQL: "created_at", Kind: listing.Time, Value: func(r Run) string { return listing.TimeValue(r.CreatedAt) }},
		{SQL: "id", Value: func(r Run) string { return r.ID }}}},
	{Key: SortRequester, Columns: []listing.Column[Run]{
		{SQL: "requested_by_name", Value: func(r Run) string { return r.RequestedByName }},
		{SQL: "created_at", Kind: listing.Time, Value: func(r Run) string { return listing.TimeValue(r.CreatedAt) }},
		{SQL: "id", Value: func(r Run) string { return r.ID }}}},
}

// SortKeys are the keys of Orders.
func SortKeys() []string {
	keys := make([]string, len(Orders))
	for i, o := range Orders {
		keys[i] = o.Key
	}
	return keys
}

// MaxSearchedWorkspaces bounds the workspaces a search text is looked for in: a text
// found in more names than this searches the first of them by name, and the list says
// so (SearchResult.Narrow).
const MaxSearchedWorkspaces = 1000

// SearchResult is one page of the runs list, how many runs match in all, and whether
// the text matched more workspaces than were searched.
type SearchResult struct {
	listing.Result[Run]
	Total  int64
	Narrow bool
}

// labelText is a search for one run by its label: "billing-prod #3".
var labelText = regexp.MustCompile(`^(\S+)\s*#(\d{1,9})$`)

// Search returns one page of the runs the subject may see that match q.
func (s *Reads) Search(ctx context.Context, q ListQuery) (SearchResult, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return SearchResult{}, err
	}
	hidden, err := s.k.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return SearchResult{}, err
	}
	var out SearchResult
	// The text's workspaces come from the workspaces' own store (runs keep no names).
	var wsIDs []string
	number := 0
	if m := labelText.FindStringSubmatch(q.Text); m != nil {
		number, _ = strconv.Atoi(m[2])
		if wsIDs, err = s.k.workspaces.Matching(ctx, subject.OrganizationID, m[1], true, hidden, MaxSearchedWorkspaces+1); err != nil {
			return SearchResult{}, err
		}
	} else if q.Text != "" {
		if wsIDs, err = s.k.workspaces.Matching(ctx, subject.OrganizationID, q.Text, false, hidden, MaxSearchedWorkspaces+1); err != nil {
			return SearchResult{}, err
		}
	}
	if len(wsIDs) > MaxSearchedWorkspaces {
		wsIDs, out.Narrow = wsIDs[:MaxSearchedWorkspaces], true
	}
	filtered := func() *gorm.DB {
		tx := db.Conn(ctx, s.k.store.db).Model(&Run{}).Where("organization_id = ?", subject.OrganizationID)
		if len(hidden) > 0 {
			tx = tx.Where("environment_id NOT IN ?", hidden)
		}
		switch {
		case number > 0:
			tx = tx.Where("number = ? AND workspace_id IN ?", number, append(wsIDs, ""))
		case q.Text != "":
			text := db.Conn(ctx, s.k.store.db).Where(listing.Contains("template_name"), q.Text).
				Or(listing.Contains("requested_by_name"), q.Text).Or("id = ?", q.Text)
			if len(wsIDs) > 0 {
				text = text.Or("workspace_id IN ?", wsIDs)
			}
			tx = tx.Where(text)
		}
		if q.State != "" {
			tx = tx.Where("state = ?", q.State)
		}
		if q.EnvironmentID != "" {
			tx = tx.Where("environment_id = ?", q.EnvironmentID)
		}
		if q.Template != "" {
			tx = tx.Where("template_name = ?", q.Template)
		}
		if q.Kind != "" {
			tx = tx.Where("kind = ?", q.Kind)
		}
		if q.Mine {
			tx = tx.Where("requested_by = ?", subject.UserID)
		}
		return tx
	}
	if err := filtered().Count(&out.Total).Error; err != nil {
		return SearchResult{}, fmt.Errorf("counting runs: %w", err)
	}
	if out.Result, err = listing.Fetch(filtered(), Orders, q.Page); err != nil {
		return SearchResult{}, fmt.Errorf("listing runs: %w", err)
	}
	return out, nil
}

// LastRun is what the workspaces list shows of a workspace's newest run.
type LastRun struct {
	ID          string
	WorkspaceID string
	Number      int
	Kind        Kind
	State       State
	Simulated   bool
	CreatedAt   time.Time
}

// Label is the run's label in its workspace: "#3".
func (l LastRun) Label() string { return Run{Number: l.Number}.Label() }

// Latest returns the newest run of each of workspaceIDs that has one and the subject
// may see, by workspace id: the workspaces list's "last run" (the columns it shows
// only: a page of 50 reads no inputs, plans or evidence).
func (s *Reads) Latest(ctx context.Context, workspaceIDs []string) (map[string]LastRun, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	out := map[string]LastRun{}
	if len(workspaceIDs) == 0 {
		return out, nil
	}
	hidden, err := s.k.environments.HiddenFrom(ctx, subject)
	if err != nil {
		return nil, err
	}
	var runs []LastRun
	err = db.Conn(ctx, s.k.store.db).Raw(`SELECT DISTINCT ON (workspace_id) id, workspace_id, number, kind, state, simulated, created_at FROM runs
		WHERE organization_id = ? AND workspace_id IN ? AND environment_id NOT IN ?
		ORDER BY workspace_id, number DESC`, subject.OrganizationID, workspaceIDs, append(hidden, "")).Scan(&runs).Error
	if err != nil {
		return nil, fmt.Errorf("reading the workspaces' last runs: %w", err)
	}
	for _, r := range runs {
		out[r.WorkspaceID] = r
	}
	return out, nil
}
