package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/runport"
)

// WorkspaceState is what a workspace's page shows of its state: its versions, newest
// first, and the resources and outputs of the newest one.
type WorkspaceState struct {
	Versions  []Version
	Resources []Resource
	Outputs   []Output
}

// Resource is one managed resource instance in a state.
type Resource struct {
	Address string // module.bucket.sandbox_bucket.this, with [key] for counted ones
	Type    string
	ID      string // the provider's id attribute
}

// Output is one root output of a state; a sensitive one carries no value.
type Output struct {
	Name      string
	Value     string
	Sensitive bool
}

// OfWorkspace reads workspace workspaceID's state for its page: the newest limit
// versions and what the newest holds. The workspace must have been read through the
// workspace service (which hides another organization's and a restricted
// environment's); this scopes to the subject's organization again.
func (s *Store) OfWorkspace(ctx context.Context, workspaceID string, limit int) (WorkspaceState, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return WorkspaceState{}, err
	}
	var out WorkspaceState
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND workspace_id = ?", subject.OrganizationID, workspaceID).
		Order("serial DESC").Limit(limit).Find(&out.Versions).Error; err != nil {
		return WorkspaceState{}, fmt.Errorf("listing state versions: %w", err)
	}
	if len(out.Versions) == 0 {
		return out, nil
	}
	data, _, err := s.artifacts.Get(ctx, subject.OrganizationID, out.Versions[0].ArtifactID)
	if err != nil {
		return WorkspaceState{}, err
	}
	if out.Resources, out.Outputs, err = readState(data); err != nil {
		return WorkspaceState{}, fmt.Errorf("reading state version %d: %w", out.Versions[0].Serial, err)
	}
	return out, nil
}

// readState lists the managed resources and root outputs of a state file (format 4).
func readState(data []byte) ([]Resource, []Output, error) {
	var st struct {
		Outputs map[string]struct {
			Value     json.RawMessage `json:"value"`
			Sensitive bool            `json:"sensitive"`
		} `json:"outputs"`
		Resources []struct {
			Module    string `json:"module"`
			Mode      string `json:"mode"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				IndexKey   json.RawMessage `json:"index_key"`
				Attributes struct {
					ID any `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, nil, err
	}
	var resources []Resource
	for _, r := range st.Resources {
		if r.Mode != "managed" {
			continue
		}
		base := r.Type + "." + r.Name
		if r.Module != "" {
			base = r.Module + "." + base
		}
		for _, in := range r.Instances {
			address := base
			if len(in.IndexKey) > 0 {
				address += "[" + string(in.IndexKey) + "]"
			}
			res := Resource{Address: address, Type: r.Type}
			if in.Attributes.ID != nil {
				res.ID = fmt.Sprint(in.Attributes.ID)
			}
			resources = append(resources, res)
		}
	}
	outputs := make([]Output, 0, len(st.Outputs))
	for name, o := range st.Outputs {
		out := Output{Name: name, Sensitive: o.Sensitive}
		if !o.Sensitive {
			out.Value = strings.Trim(string(o.Value), `"`)
		}
		outputs = append(outputs, out)
	}
	sort.Slice(outputs, func(i, j int) bool { return outputs[i].Name < outputs[j].Name })
	return resources, outputs, nil
}

// VersionInfo is state version id of orgID as the run lifecycle asks for it (a
// rollback), errs.ErrNotFound when orgID has no such version.
func (s *Store) VersionInfo(ctx context.Context, orgID, id string) (runport.StateVersionInfo, error) {
	var v Version
	if err := db.Conn(ctx, s.db).Where("organization_id = ? AND id = ?", orgID, id).Take(&v).Error; err != nil {
		return runport.StateVersionInfo{}, fmt.Errorf("state version %s: %w", id, db.Translate(err))
	}
	out := runport.StateVersionInfo{ID: v.ID, WorkspaceID: v.WorkspaceID, Serial: int(v.Serial), CreatedAt: v.CreatedAt}
	if v.RunID != nil {
		out.RunID = *v.RunID
	}
	return out, nil
}

// ResourcesOf lists the managed resources state version id of orgID holds.
func (s *Store) ResourcesOf(ctx context.Context, orgID, id string) ([]runport.StateResource, error) {
	data, err := s.Content(ctx, orgID, id)
	if err != nil {
		return nil, err
	}
	resources, _, err := readState(data)
	if err != nil {
		return nil, fmt.Errorf("reading state version %s: %w", id, err)
	}
	out := make([]runport.StateResource, len(resources))
	for i, r := range resources {
		out[i] = runport.StateResource{Address: r.Address, Type: r.Type, ID: r.ID}
	}
	return out, nil
}

// Holds says whether workspaceID's newest state version holds any managed resource:
// false when it was never applied or was destroyed (what archiving a workspace asks).
func (s *Store) Holds(ctx context.Context, orgID, workspaceID string) (bool, error) {
	v, err := s.Latest(ctx, orgID, workspaceID)
	if errors.Is(err, ErrNoState) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	resources, err := s.ResourcesOf(ctx, orgID, v.ID)
	if err != nil {
		return false, err
	}
	return len(resources) > 0, nil
}
