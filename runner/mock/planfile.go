package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"gantry/models/bundle"
	"gantry/runner"
)

// planFileFormat names the mock's saved-plan format; tofu's own is a zip the mock
// cannot produce.
const planFileFormat = "gantry-mock-plan/1"

// planFile is the mock's saved plan. It binds what apply may do to the workspace,
// the exact config bundle and the state it was planned against, as tofu's saved
// plan does (tofu refuses a plan whose state moved on: "Saved plan is stale").
type planFile struct {
	Simulated    bool            `json:"simulated"`
	Format       string          `json:"format"`
	Kind         runner.Kind     `json:"kind"`
	WorkspaceID  string          `json:"workspace_id"`
	ConfigDigest string          `json:"config_digest"`
	PriorSerial  uint64          `json:"prior_serial"`
	PriorLineage string          `json:"prior_lineage"`
	Changes      json.RawMessage `json:"changes"`
	// Variables are the root variables' values as they were set (TF_VAR_ texts),
	// sensitive ones in clear, as tofu's saved plan holds them: the apply takes them
	// from here. The plan file is an artifact, encrypted at rest and never shown.
	Variables map[string]string `json:"variables,omitempty"`
}

// planFileChange is one planned change: the planned "after" value (known part)
// and which leaves are unknown until apply.
type planFileChange struct {
	Address      string          `json:"address"`
	Actions      []string        `json:"actions"`
	ActionReason string          `json:"action_reason,omitempty"`
	After        json.RawMessage `json:"after"`
	AfterUnknown json.RawMessage `json:"after_unknown"`
}

func (p *plan) planFile(workspaceID string, configTar []byte) ([]byte, error) {
	changes, err := p.planFileChanges()
	if err != nil {
		return nil, err
	}
	pf := planFile{
		Simulated: true, Format: planFileFormat, Kind: p.kind, WorkspaceID: workspaceID,
		ConfigDigest: bundle.Digest(configTar), PriorSerial: p.prior.serial, PriorLineage: p.prior.lineage,
		Changes: changes, Variables: p.cfg.given,
	}
	out, err := json.Marshal(pf)
	if err != nil {
		return nil, fmt.Errorf("encoding the plan file: %w", err)
	}
	return out, nil
}

func (p *plan) planFileChanges() (json.RawMessage, error) {
	changes := make([]planFileChange, 0, len(p.changes))
	for _, c := range p.changes {
		pc := planFileChange{Address: c.addr.String(), Actions: c.actions, ActionReason: c.reason}
		pc.After, pc.AfterUnknown = afterJSON(c.after)
		changes = append(changes, pc)
	}
	out, err := json.Marshal(changes)
	if err != nil {
		return nil, fmt.Errorf("encoding the plan file: %w", err)
	}
	return out, nil
}

func readPlanFile(data []byte) (*planFile, error) {
	var pf planFile
	if err := json.Unmarshal(data, &pf); err != nil {
		return nil, fmt.Errorf("the plan file is not a mock runner plan: %w", err)
	}
	if pf.Format != planFileFormat || !pf.Simulated {
		return nil, fmt.Errorf("the plan file is not a mock runner plan (format %q); the mock runner only applies plans it made", pf.Format)
	}
	return &pf, nil
}

// checkApplicable refuses a plan made for another workspace, another config
// bundle, or a state that has moved on since.
func (pf *planFile) checkApplicable(req runner.ApplyRequest, prior *priorState) error {
	if pf.WorkspaceID != req.WorkspaceID {
		return fmt.Errorf("the plan file was made for workspace %s, not %s", pf.WorkspaceID, req.WorkspaceID)
	}
	if pf.ConfigDigest != bundle.Digest(req.Config) {
		return errors.New("the plan file was made from a different config bundle than the one given to apply")
	}
	// Like tofu: a plan made on an empty state has no lineage and is compared by serial only.
	if pf.PriorLineage != "" && prior.lineage != pf.PriorLineage {
		return fmt.Errorf("saved plan does not match the given state: the plan file was created from a different state lineage (%s, the state is %s)", pf.PriorLineage, prior.lineage)
	}
	if prior.serial != pf.PriorSerial {
		return fmt.Errorf("saved plan is stale: the state was changed by another operation after the plan was created (planned against serial %d, the state is at serial %d)", pf.PriorSerial, prior.serial)
	}
	return nil
}

// checkSameChanges refuses to apply when planning again gives other changes
// than the plan file holds: what was reviewed is exactly what is applied.
func (pf *planFile) checkSameChanges(p *plan) error {
	again, err := p.planFileChanges()
	if err != nil {
		return err
	}
	var a, b bytes.Buffer
	if json.Compact(&a, pf.Changes) != nil || json.Compact(&b, again) != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		return errors.New("the plan file's changes do not match the configuration and state it is applied to; plan again")
	}
	return nil
}
