package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/db"
	"gantry/models/errs"
	"gantry/models/workspace"
)

// Validated is a request's template inputs after the catalog checked them.
type Validated struct {
	Template     string
	Version      string
	ModuleDigest string
	Inputs       map[string]any // typed values, as the generated config gets them
	Display      map[string]any // the same with sensitive values masked: what is stored and shown
	// Runner is the executor the environment's jobs run on (set by Service.Validate).
	Runner RunnerInfo
}

// Catalog is what requesting a run needs from the template catalog.
type Catalog interface {
	// Validate checks raw inputs for template name: errs.ErrNotFound for an unknown
	// or refused template, *errs.Validation (fields "inputs.<name>") for bad inputs.
	Validate(name string, raw map[string]string) (Validated, error)
	// Generate builds the config bundle for a workspace.
	Generate(v Validated, workspaceID, stateAddress string) (bundle.Bundle, error)
	// Facts says what the plan review needs to know about template name's resource
	// types (errs.ErrNotFound when the catalog no longer offers it).
	Facts(name string) (TemplateFacts, error)
}

// TemplateFacts are a template's resource-type facts from its manifest.
type TemplateFacts struct {
	Version      string
	Source       string // "catalog": every template comes from the pinned catalog
	Irreversible []string
	OrgScoped    []string
	OrgPolicy    []string // the org-scoped types that are organization policies
	Prices       map[string]float64
}

// Request is what a person submits to start a run.
type Request struct {
	EnvironmentID string
	Workspace     string
	Template      string
	Inputs        map[string]string
	Kind          Kind
}

var workspaceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks a request without writing anything: every problem is a field
// message. It returns the validated template inputs and the workspace the run would
// use (nil when it would be created).
func (s *Service) Validate(ctx context.Context, req Request) (Validated, *workspace.Workspace, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Validated{}, nil, err
	}
	v := &errs.Validation{}
	if !req.Kind.Valid() {
		v.Add("kind", "Choose apply, dry run or destroy.")
	}
	envName, executor, err := s.checkEnvironment(ctx, subject, req.EnvironmentID, v)
	if err != nil {
		return Validated{}, nil, err
	}
	chosen, runnerOK := s.runners.pick(executor)
	if _, bad := v.Fields["environment"]; !bad && !runnerOK {
		v.Add("environment", fmt.Sprintf("Environment %s runs jobs on the %s executor, which this Gantry does not offer. Ask an admin.", envName, executor))
	}
	name := strings.TrimSpace(req.Workspace)
	if !workspaceName.MatchString(name) {
		v.Add("workspace", "Use lower-case letters, digits and hyphens (1 to 63), starting and ending with a letter or digit.")
	}
	var validated Validated
	if strings.TrimSpace(req.Template) == "" {
		v.Add("template", "Choose a template from the catalog.")
	} else {
		validated, err = s.catalog.Validate(req.Template, req.Inputs)
		var fields *errs.Validation
		switch {
		case errors.Is(err, errs.ErrNotFound):
			v.Add("template", fmt.Sprintf("There is no usable template named %q in the catalog.", req.Template))
		case errors.As(err, &fields):
			for f, msg := range fields.Fields {
				v.Add(f, msg)
			}
		case err != nil:
			return Validated{}, nil, err
		}
	}
	var ws *workspace.Workspace
	if _, bad := v.Fields["environment"]; !bad && workspaceName.MatchString(name) {
		var found workspace.Workspace
		err := db.Conn(ctx, s.db).Where("organization_id = ? AND environment_id = ? AND name = ?", subject.OrganizationID, req.EnvironmentID, name).Take(&found).Error
		switch {
		case err == nil:
			ws = &found
			if validated.Template != "" && found.TemplateName != validated.Template {
				v.Add("workspace", fmt.Sprintf("Workspace %s in %s holds a %s; choose another name for a %s.", name, envName, found.TemplateName, validated.Template))
			}
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return Validated{}, nil, fmt.Errorf("reading workspace: %w", err)
		}
	}
	validated.Runner = chosen
	if req.Kind == KindDestroy && ws == nil {
		v.Add("workspace", "There is nothing to destroy: the workspace does not exist.")
	}
	return validated, ws, v.Err()
}

// checkEnvironment adds a field message unless the environment belongs to the
// subject's organization and the subject may use it (a restricted environment needs an
// explicit grant; admins and owners manage grants and are not restricted).
func (s *Service) checkEnvironment(ctx context.Context, subject authz.Subject, id string, v *errs.Validation) (name, executor string, err error) {
	if strings.TrimSpace(id) == "" {
		v.Add("environment", "Choose an environment.")
		return "", "", nil
	}
	var env struct {
		Name       string
		Restricted bool
		Executor   string
	}
	err = db.Conn(ctx, s.db).Table("environments").Select("name, restricted, executor").
		Where("organization_id = ? AND id = ?", subject.OrganizationID, id).Take(&env).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		v.Add("environment", "Choose one of this organization's environments.")
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading environment: %w", err)
	}
	if env.Restricted && !subject.Role.AtLeast(authz.RoleAdmin) {
		granted, err := s.hasGrant(ctx, id, subject.UserID)
		if err != nil {
			return "", "", err
		}
		if !granted {
			v.Add("environment", fmt.Sprintf("Environment %s is restricted and you have no grant for it. Ask an admin.", env.Name))
		}
	}
	return env.Name, env.Executor, nil
}

// Request validates and queues a run: the workspace (created on first use), the
// generated config bundle (encrypted, with its digest), the QUEUED run, its audit
// event and its plan job commit together. Bad input is *errs.Validation and nothing
// is written.
func (s *Service) Request(ctx context.Context, req Request) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Run{}, err
	}
	validated, _, err := s.Validate(ctx, req)
	if err != nil {
		return Run{}, err
	}
	display, err := json.Marshal(validated.Display)
	if err != nil {
		return Run{}, fmt.Errorf("encoding inputs: %w", err)
	}
	var out Run
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		ws, err := s.workspaceFor(ctx, subject, req.EnvironmentID, strings.TrimSpace(req.Workspace), validated.Template)
		if err != nil {
			return err
		}
		cfg, err := s.catalog.Generate(validated, ws.ID, s.stateAddress(validated.Runner.Name, ws.ID))
		if err != nil {
			return fmt.Errorf("generating configuration: %w", err)
		}
		tarball, _, err := cfg.Tar()
		if err != nil {
			return err
		}
		cfgArt, err := s.artifacts.Put(ctx, subject.OrganizationID, ws.ID, artifact.ConfigBundle, tarball)
		if err != nil {
			return err
		}
		r := Run{
			ID: db.NewID("run"), OrganizationID: subject.OrganizationID, WorkspaceID: ws.ID, EnvironmentID: req.EnvironmentID,
			Number: ws.NextRunNumber, Kind: req.Kind, State: Queued, StateReason: "request validated, configuration generated",
			TemplateName: validated.Template, TemplateVersion: validated.Version, ModuleDigest: validated.ModuleDigest,
			Inputs: display, RequestedBy: subject.UserID, RequestedByName: subject.Name,
			Runner: validated.Runner.Name, Simulated: validated.Runner.Simulated, ConfigArtifactID: cfgArt.ID, ConfigDigest: cfgArt.SHA256,
		}
		conn := db.Conn(ctx, s.db)
		if err := conn.Create(&r).Error; err != nil {
			return fmt.Errorf("creating run: %w", db.Translate(err))
		}
		if err := conn.Model(&workspace.Workspace{}).Where("id = ?", ws.ID).Update("next_run_number", gorm.Expr("next_run_number + 1")).Error; err != nil {
			return fmt.Errorf("numbering run: %w", err)
		}
		if err := s.audit.Record(ctx, audit.Entry{Action: "run.queued", TargetType: "run", TargetID: r.ID, Data: map[string]any{
			"kind": r.Kind, "workspace_id": ws.ID, "number": r.Number, "template": r.TemplateName, "template_version": r.TemplateVersion,
			"module_digest": r.ModuleDigest, "config_digest": r.ConfigDigest, "inputs": json.RawMessage(display), "simulated": r.Simulated,
		}}); err != nil {
			return err
		}
		if err := s.enqueuer.Enqueue(ctx, jobsFor(r)...); err != nil {
			return fmt.Errorf("enqueuing plan: %w", err)
		}
		if err := notifyChange(ctx, conn, r); err != nil {
			return err
		}
		out = r
		return nil
	})
	return out, err
}

// workspaceFor finds or creates the named workspace under a row lock, so two requests
// for the same new workspace get one workspace and consecutive run numbers.
func (s *Service) workspaceFor(ctx context.Context, subject authz.Subject, envID, name, template string) (workspace.Workspace, error) {
	conn := db.Conn(ctx, s.db)
	ws := workspace.Workspace{ID: db.NewID("ws"), OrganizationID: subject.OrganizationID, EnvironmentID: envID, Name: name, TemplateName: template, NextRunNumber: 1}
	res := conn.Clauses(clause.OnConflict{DoNothing: true}).Create(&ws)
	if res.Error != nil {
		return workspace.Workspace{}, fmt.Errorf("creating workspace: %w", db.Translate(res.Error))
	}
	if res.RowsAffected == 1 {
		if err := s.audit.Record(ctx, audit.Entry{Action: "workspace.created", TargetType: "workspace", TargetID: ws.ID,
			Data: map[string]any{"name": name, "environment_id": envID, "template": template}}); err != nil {
			return workspace.Workspace{}, err
		}
	}
	var locked workspace.Workspace
	err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND environment_id = ? AND name = ?", subject.OrganizationID, envID, name).Take(&locked).Error
	if err != nil {
		return workspace.Workspace{}, fmt.Errorf("locking workspace: %w", err)
	}
	if locked.TemplateName != template {
		v := &errs.Validation{}
		v.Add("workspace", fmt.Sprintf("Workspace %s holds a %s; choose another name for a %s.", name, locked.TemplateName, template))
		return workspace.Workspace{}, v
	}
	return locked, nil
}
