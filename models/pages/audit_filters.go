package pages

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gantry/models/audit"
	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/models/org"
	"gantry/models/run"
	"gantry/models/workspace"
)

// The audit history's filters as people write them: a workspace by its name ("orders-db",
// or "orders-db (staging)" where the name repeats across environments), a run by its
// label ("orders-db #3", or "#3" with the workspace chosen), an actor by name and
// e-mail. Ids keep working, so links made with them still do.

// AuditWorkspaces finds the workspaces the workspace filter names (workspace.Service).
type AuditWorkspaces interface {
	Get(ctx context.Context, id string) (workspace.View, error)
	Named(ctx context.Context, name string) ([]workspace.View, error)
}

// AuditRuns finds the run the run filter names by its label (run.Reads).
type AuditRuns interface {
	Search(ctx context.Context, q run.ListQuery) (run.SearchResult, error)
}

// AuditMembers lists the organization's members: the actor filter's choices
// (org.Service).
type AuditMembers interface {
	Members(ctx context.Context) ([]org.MembershipView, error)
}

// AuditActor is one choice of the actor filter: a member's id and "Name · e-mail".
type AuditActor struct{ ID, Label string }

// AuditShown is what the workspace and run filters show: "orders-db (staging)" and
// "orders-db (staging) #3" once resolved, else what was written.
type AuditShown struct{ Workspace, Run string }

var (
	// workspaceRef is a workspace's name, with its environment in brackets or not.
	workspaceRef = regexp.MustCompile(`^([a-z0-9-]+)(?:\s*\(([a-z0-9-]+)\))?$`)
	// runRef is a run's label: its workspace (or nothing: the workspace filter's) and
	// its number.
	runRef = regexp.MustCompile(`^(.*?)\s*#(\d{1,9})$`)
)

// refOf is how the filters write workspace w: "orders-db (staging)".
func refOf(w workspace.View) string { return w.Name + " (" + w.EnvironmentName + ")" }

// actors are the actor filter's choices, by name: every member (with the e-mail people
// also know them by), the system, and the
// actor q names if they are neither (a former member: their id).
func (s Audit) actors(ctx context.Context, actorID string) ([]AuditActor, error) {
	members, err := s.Members.Members(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]AuditActor, 0, len(members)+2)
	for _, m := range members {
		label := m.UserEmail
		if m.UserName != "" && m.UserName != m.UserEmail {
			label = m.UserName + " · " + m.UserEmail
		}
		out = append(out, AuditActor{ID: m.UserID, Label: label})
	}
	slices.SortFunc(out, func(a, b AuditActor) int { return strings.Compare(strings.ToLower(a.Label), strings.ToLower(b.Label)) })
	out = append(out, AuditActor{ID: "system", Label: "Gantry (system)"})
	if actorID != "" && !slices.ContainsFunc(out, func(a AuditActor) bool { return a.ID == actorID }) {
		out = append(out, AuditActor{ID: actorID, Label: actorID + " (not a member now)"})
	}
	return out, nil
}

// resolve reads q's workspace and run filters as written and returns q with their ids,
// what the fields show, and what names nothing (or more than one thing) the reader
// may see, by field.
func (s Audit) resolve(ctx context.Context, q audit.Query, envs map[string]string) (audit.Query, AuditShown, map[string]string, error) {
	shown, problems := AuditShown{Workspace: q.WorkspaceID, Run: q.RunID}, map[string]string{}
	var chosen *workspace.View
	if q.WorkspaceID != "" {
		w, problem, err := s.findWorkspace(ctx, strings.TrimSpace(q.WorkspaceID), q.EnvironmentID, envs)
		switch {
		case err != nil:
			return q, shown, nil, err
		case problem != "":
			problems["workspace"] = problem
		case w != nil:
			chosen, q.WorkspaceID, shown.Workspace = w, w.ID, refOf(*w)
		}
	}
	if q.RunID != "" && !strings.HasPrefix(q.RunID, "run-") {
		r, label, problem, err := s.findRun(ctx, strings.TrimSpace(q.RunID), q.EnvironmentID, chosen, envs)
		switch {
		case err != nil:
			return q, shown, nil, err
		case problem != "":
			problems["run"] = problem
		default:
			q.RunID, shown.Run = r, label
		}
	}
	return q, shown, problems, nil
}

// findWorkspace is the workspace ref names in environment envID ("": any): an id
// (nil and no problem when the reader may not see it: the filter keeps the id), a
// name, or a name with its environment.
func (s Audit) findWorkspace(ctx context.Context, ref, envID string, envs map[string]string) (*workspace.View, string, error) {
	if strings.HasPrefix(ref, "ws-") {
		w, err := s.Workspaces.Get(ctx, ref)
		if errors.Is(err, errs.ErrNotFound) {
			return nil, "", nil
		}
		return &w, "", err
	}
	m := workspaceRef.FindStringSubmatch(strings.ToLower(ref))
	if m == nil {
		return nil, "must be a workspace's name, such as orders-db, or orders-db (staging) where the name is in several environments", nil
	}
	named, err := s.Workspaces.Named(ctx, m[1])
	if err != nil {
		return nil, "", err
	}
	named = slices.DeleteFunc(named, func(w workspace.View) bool {
		return m[2] != "" && w.EnvironmentName != m[2] || envID != "" && w.EnvironmentID != envID
	})
	switch len(named) {
	case 1:
		return &named[0], "", nil
	case 0:
		where := ""
		if m[2] != "" {
			where = " in " + m[2]
		} else if envID != "" {
			where = " in " + cmp.Or(envs[envID], envID)
		}
		return nil, fmt.Sprintf("no workspace you may see is named %s%s", m[1], where), nil
	}
	var in []string
	for _, w := range named {
		in = append(in, refOf(w))
	}
	return nil, fmt.Sprintf("%s is in several environments: write %s, or choose the environment", m[1], strings.Join(in, " or ")), nil
}

// findRun is the run a label names ("orders-db #3", "orders-db (staging) #3", or "#3"
// of workspace chosen): its id and its label as shown, or the problem.
func (s Audit) findRun(ctx context.Context, ref, envID string, chosen *workspace.View, envs map[string]string) (id, label, problem string, err error) {
	m := runRef.FindStringSubmatch(ref)
	if m == nil {
		return "", "", "must be a run's label, such as orders-db #3, or its id (run-…)", nil
	}
	w := chosen
	if m[1] != "" {
		if w, problem, err = s.findWorkspace(ctx, m[1], envID, envs); err != nil || problem != "" {
			return "", "", problem, err
		}
	}
	if w == nil {
		return "", "", "name its workspace too, such as orders-db #3, or choose the workspace", nil
	}
	n, _ := strconv.Atoi(m[2])
	found, err := s.Runs.Search(ctx, run.ListQuery{Text: w.Name + " #" + m[2], EnvironmentID: w.EnvironmentID, Page: listing.Page{Limit: listing.MaxLimit}})
	if err != nil {
		return "", "", "", err
	}
	for _, r := range found.Rows {
		if r.WorkspaceID == w.ID && r.Number == n {
			return r.ID, refOf(*w) + " #" + m[2], "", nil
		}
	}
	return "", "", fmt.Sprintf("%s has no run #%d you may see", refOf(*w), n), nil
}
