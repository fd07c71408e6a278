package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"gantry/models/artifact"
	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/workspace"
)

// Catalog is what requesting a run needs from the template catalog.
type Catalog interface {
	// Validate checks raw inputs for template name: errs.ErrNotFound for an unknown
	// or refused template, *errs.Validation (fields "inputs.<name>") for bad inputs.
	Validate(name string, raw map[string]string) (Validated, error)
	// Modules fetches the archives of the allowlisted registry and https modules
	// template name calls, checked against their pinned sha256 (Validated.Modules); a
	// module that cannot be had is a *errs.Validation on "template". It may use the
	// network: never call it in a transaction.
	Modules(ctx context.Context, name string) (map[string][]byte, error)
	// Generate builds the config bundle for a workspace: v.Sensitive are declared as
	// sensitive root variables, never written into it; v.Modules become local modules.
	Generate(v Validated, workspaceID, stateAddress string) (bundle.Bundle, error)
	// Facts says what the plan review needs to know about template name's resource
	// types (errs.ErrNotFound when the catalog no longer offers it).
	Facts(name string) (TemplateFacts, error)
	// Inputs are template name's inputs as a config bundle it generated holds them,
	// the sensitive ones from sealed (the run's sealed values, which a bundle only
	// declares), with what its manifest says of each (a promotion compares them).
	Inputs(name string, config []byte, sealed map[string]any) ([]InputValue, error)
	// Secrets are the values of template name's sensitive inputs that a config bundle
	// generated from it holds as literals (bundles from before they were sealed): what
	// a run's live log masks besides the sealed values (every literal argument, when the
	// catalog no longer offers the template).
	Secrets(name string, config []byte) []string
}

// Request is what a person submits to start a run.
type Request struct {
	EnvironmentID string
	Workspace     string
	Template      string
	Inputs        map[string]string
	Kind          Kind
	// NewWorkspace: the requester confirmed a new workspace whose name is close to an
	// existing one ("did you mean").
	NewWorkspace bool
	// Note is why the run is asked for and the ticket it answers (optional).
	Note Note
}

var workspaceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// inTx runs fn in one transaction (joining the one in ctx, if any).
func (s *core) inTx(ctx context.Context, fn func(ctx context.Context) error) error {
	return db.Tx(ctx, s.store.db, fn)
}

// Validate checks a request without writing anything: every problem is a field
// message. It returns the validated template inputs and the workspace the run would
// use (nil when it would be created).
func (s *Requests) Validate(ctx context.Context, req Request) (Validated, *workspace.Workspace, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Validated{}, nil, err
	}
	v := &errs.Validation{}
	switch {
	case !req.Kind.Valid():
		v.Add("kind", "Choose apply, dry run or destroy.")
	case req.Kind != KindPlanOnly && !MayChangeWorkspace(subject):
		v.Add("kind", "This API token may request dry runs only (scope plan): an apply or a destroy needs scope apply.")
	}
	env, envOK, err := s.requestEnvironment(ctx, subject, req.EnvironmentID, v)
	if err != nil {
		return Validated{}, nil, err
	}
	name := strings.TrimSpace(req.Workspace)
	if !workspaceName.MatchString(name) {
		v.Add("workspace", "Use lower-case letters, digits and hyphens (1 to 63), starting and ending with a letter or digit.")
	}
	checkNote(req.Note, v)
	var validated Validated
	if strings.TrimSpace(req.Template) == "" {
		v.Add("template", "Choose a template from the catalog.")
	} else {
		validated, err = s.k.catalog.Validate(req.Template, req.Inputs)
		if err == nil {
			// Fetched here, before any transaction (a request generates its bundle in
			// one): generation only reads the verified archives.
			validated.Modules, err = s.k.catalog.Modules(ctx, req.Template)
		}
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
	var a Actor
	if envOK {
		if a, err = s.k.actorFor(ctx, subject, env); err != nil {
			return Validated{}, nil, err
		}
		// A restricted environment without a grant does not exist for the person (DESIGN
		// §4): the message of an unknown id, naming nothing of it.
		if !environment.Visible(env, a.Role, a.Granted) {
			v.Add("environment", unknownEnvironment)
			envOK = false
		}
	}
	if envOK {
		chosen, offered := s.k.runners.pick(env.Executor)
		if !offered {
			v.Add("environment", fmt.Sprintf("Environment %s runs jobs on the %s executor, which this Gantry does not offer. Ask an admin.", env.Name, env.Executor))
		}
		validated.Runner = chosen
		validated.OrganizationID, validated.EnvironmentID = subject.OrganizationID, env.ID
		mayRequest(a, env, chosen, v)
		if workspaceName.MatchString(name) {
			if ws, err = s.k.workspaces.Find(ctx, subject.OrganizationID, env.ID, name); err != nil {
				return Validated{}, nil, err
			}
			if ws != nil && validated.Template != "" && ws.TemplateName != validated.Template {
				v.Add("workspace", fmt.Sprintf("Workspace %s in %s holds a %s; choose another name for a %s.", name, env.Name, ws.TemplateName, validated.Template))
			}
			// A typo must not quietly make a second workspace beside the one meant.
			if ws == nil && !req.NewWorkspace && req.Kind != KindDestroy {
				names, err := s.k.workspaces.Names(ctx, subject.OrganizationID, env.ID)
				if err != nil {
					return Validated{}, nil, err
				}
				if near := nearestName(name, names); near != "" {
					v.Add("new_workspace", fmt.Sprintf("There is no workspace %s in %s, but there is %s. Did you mean %s? To create %s, confirm it.",
						name, env.Name, near, near, name))
				}
			}
		}
	}
	if req.Kind == KindDestroy && ws == nil {
		v.Add("workspace", "There is nothing to destroy: the workspace does not exist.")
	}
	if ws != nil && req.Kind.Applies() {
		w, err := s.k.windows.OpenOn(ctx, subject.OrganizationID, ws.ID)
		if err != nil {
			return Validated{}, nil, err
		}
		if w != nil {
			v.Add("workspace", fmt.Sprintf("%s. Request it after the window ends; a dry run is possible meanwhile.", capitalize(openWindowReason(*w))))
		}
	}
	return validated, ws, v.Err()
}

// unknownEnvironment is the message for an environment id the person may not use
// because, for them, it does not exist.
const unknownEnvironment = "Choose one of this organization's environments."

// requestEnvironment reads the environment a request names; a field message (and ok
// false) unless it is one of the subject's organization's.
func (s *Requests) requestEnvironment(ctx context.Context, subject authz.Subject, id string, v *errs.Validation) (environment.Environment, bool, error) {
	if strings.TrimSpace(id) == "" {
		v.Add("environment", "Choose an environment.")
		return environment.Environment{}, false, nil
	}
	env, err := s.k.environments.Lookup(ctx, subject.OrganizationID, id)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		v.Add("environment", unknownEnvironment)
		return environment.Environment{}, false, nil
	case err != nil:
		return environment.Environment{}, false, err
	}
	return env, true, nil
}

// Request validates and queues a run: the workspace (created on first use), the
// generated config bundle (encrypted, with its digest), the QUEUED run, its audit
// event and its plan job commit together. Bad input is *errs.Validation and nothing
// is written.
func (s *Requests) Request(ctx context.Context, req Request) (Run, error) {
	return s.request(ctx, req, nil)
}

// RequestPromoted is Request for a promotion (models/promotion): a normal run through
// every gate of req's environment, recording run fromID, which it promotes, and its
// label with its workspace and environment ("orders-db #3 in staging"). The run
// promoted from must be one of the subject's organization's they may see, and
// applied; the promotion's own rules (the order, the fixed inputs) are its caller's.
func (s *Requests) RequestPromoted(ctx context.Context, req Request, fromID, label string) (Run, error) {
	subject, err := authz.Require(ctx, authz.PermProvisioningPlan)
	if err != nil {
		return Run{}, err
	}
	from, err := s.k.getVisible(ctx, subject, fromID)
	if err != nil {
		return Run{}, err
	}
	if from.State != Succeeded || from.Kind != KindApply {
		return Run{}, errs.Explain(errs.ErrConflict, fmt.Sprintf("Run %s did not apply a change, so there is nothing of it to promote.", label))
	}
	return s.request(ctx, req, &promotion{from: from, label: label})
}

// promotion is where a promoted run comes from: the applied run, and its label with
// its workspace and environment ("orders-db #3 in staging").
type promotion struct {
	from  Run
	label string
}

// request is Request, recording the run promoted from (nil for a plain request).
func (s *Requests) request(ctx context.Context, req Request, promotedFrom *promotion) (Run, error) {
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
	err = s.k.inTx(ctx, func(ctx context.Context) error {
		ws, err := s.k.workspaces.Ensure(ctx, subject.OrganizationID, req.EnvironmentID, strings.TrimSpace(req.Workspace), validated.Template)
		if err != nil {
			return err
		}
		cfg, err := s.k.catalog.Generate(validated, ws.ID, s.k.stateAddress(validated.Runner.Name, ws.ID))
		if err != nil {
			return fmt.Errorf("generating configuration: %w", err)
		}
		tarball, _, err := cfg.Tar()
		if err != nil {
			return err
		}
		cfgArt, err := s.k.artifacts.Put(ctx, subject.OrganizationID, ws.ID, artifact.ConfigBundle, tarball)
		if err != nil {
			return err
		}
		out, err = s.k.queue(ctx, subject, queued{workspaceID: ws.ID, environmentID: req.EnvironmentID, kind: req.Kind,
			template: validated.Template, version: validated.Version, moduleDigest: validated.ModuleDigest, inputs: display,
			runner: validated.Runner, configArtifactID: cfgArt.ID, configDigest: cfgArt.SHA256, promotedFrom: promotedFrom,
			sensitive: validated.Sensitive, note: trimNote(req.Note)})
		return err
	})
	return out, err
}

// queued is a run about to be queued.
type queued struct {
	workspaceID, environmentID      string
	kind                            Kind
	template, version, moduleDigest string
	inputs                          json.RawMessage
	runner                          RunnerInfo
	configArtifactID, configDigest  string
	source                          *Run // planned again from (or rolled back to what it wrote)
	rollback                        *StateVersionInfo
	promotedFrom                    *promotion
	// writer is the run that wrote the workspace's state (at serial writerSerial), whose
	// configuration a drift check, a codification or a correction (correct) reuses.
	writer       *Run
	writerSerial int
	correct      bool
	// window is the break-glass window a codification codifies or a drift check checks;
	// madeBy who made the window's change by hand (never a codification's decider).
	window *string
	madeBy string
	// sensitive are the values of the sensitive inputs of a bundle generated for this
	// run, sealed with it; a run reusing another's bundle carries that one's instead
	// (configSource).
	sensitive map[string]any
	// note is why the requester asked for the run (the request's Note).
	note Note
}

// queue writes a QUEUED run with its number, its audit event and its plan job, in the
// transaction carried by ctx.
func (s *core) queue(ctx context.Context, subject authz.Subject, q queued) (Run, error) {
	number, err := s.workspaces.TakeRunNumber(ctx, q.workspaceID)
	if err != nil {
		return Run{}, err
	}
	r := Run{
		ID: db.NewID("run"), OrganizationID: subject.OrganizationID, WorkspaceID: q.workspaceID, EnvironmentID: q.environmentID,
		Number: number, Kind: q.kind, State: Queued, StateReason: "request validated, configuration generated",
		TemplateName: q.template, TemplateVersion: q.version, ModuleDigest: q.moduleDigest,
		Inputs: q.inputs, RequestedBy: subject.UserID, RequestedByName: subject.Name,
		Runner: q.runner.Name, Simulated: q.runner.Simulated, ConfigArtifactID: q.configArtifactID, ConfigDigest: q.configDigest,
		PriorRequesters: []string{}, RequestReason: q.note.Reason, RequestTicket: q.note.Ticket,
	}
	data := map[string]any{"kind": r.Kind, "workspace_id": r.WorkspaceID, "number": r.Number, "template": r.TemplateName,
		"template_version": r.TemplateVersion, "module_digest": r.ModuleDigest, "config_digest": r.ConfigDigest,
		"inputs": json.RawMessage(r.Inputs), "simulated": r.Simulated}
	if q.source != nil {
		r.SourceRunID = &q.source.ID
		r.PriorRequesters = append([]string{}, q.source.PriorRequesters...)
		if !slices.Contains(r.PriorRequesters, q.source.RequestedBy) {
			r.PriorRequesters = append(r.PriorRequesters, q.source.RequestedBy)
		}
		r.StateReason = "planned again from run " + q.source.Label() + " (" + strings.ToLower(string(q.source.State)) + "), same template version and inputs"
		data["planned_again_from"] = q.source.ID
	}
	if q.promotedFrom != nil {
		r.PromotedFromRunID = &q.promotedFrom.from.ID
		r.StateReason = "promoted from " + q.promotedFrom.label + ": same template version, configuration generated for this environment"
		data["promoted_from"] = q.promotedFrom.from.ID
	}
	if w := q.writer; w != nil {
		r.SourceRunID, r.BreakglassWindowID = &w.ID, q.window
		data["state_written_by"], data["state_serial"] = w.ID, q.writerSerial
		if q.window != nil {
			data["breakglass_window_id"] = *q.window
		}
		switch q.kind {
		case KindDrift:
			r.StateReason = fmt.Sprintf("drift check: are the live resources still what state version %d (written by run %s) says?", q.writerSerial, w.Label())
		case KindCodify:
			r.StateReason = fmt.Sprintf("codifying break-glass window %s: accepting the live resources, as changed by hand, into state (the configuration of run %s)", *q.window, w.Label())
			r.PriorRequesters = []string{q.madeBy}
		default:
			r.StateReason = fmt.Sprintf("correcting drift: bringing the live resources back to state version %d (the configuration of run %s), through every gate", q.writerSerial, w.Label())
		}
	}
	if q.rollback != nil {
		// A rollback is the person's own new intent: who requested the source run may
		// decide it, as anyone but its requester may.
		r.RollbackVersionID, r.RollbackSerial, r.PriorRequesters = &q.rollback.ID, q.rollback.Serial, []string{}
		r.StateReason = fmt.Sprintf("rolling back to state version %d: re-applying the inputs and template version (%s) of run %s", q.rollback.Serial, q.version, q.source.Label())
		delete(data, "planned_again_from")
		data["rollback_to"] = map[string]any{"state_version_id": q.rollback.ID, "serial": q.rollback.Serial, "source_run_id": q.source.ID}
	}
	if err := s.store.create(ctx, r); err != nil {
		return Run{}, err
	}
	sensitive := q.sensitive
	if from := q.configSource(); from != nil {
		if sensitive, err = s.sensitiveValues(ctx, *from); err != nil {
			return Run{}, err
		}
	}
	if err := s.sealVariables(ctx, r, sensitive); err != nil {
		return Run{}, err
	}
	if len(sensitive) > 0 {
		// Which inputs were sealed, never their values.
		data["sealed_inputs"] = slices.Sorted(maps.Keys(sensitive))
	}
	// As the subject given: a person, or the system queuing a drift check.
	if err := s.audit.RecordAs(ctx, subject, audit.Entry{Action: "run.queued", TargetType: "run", TargetID: r.ID, Data: data,
		EnvironmentID: r.EnvironmentID, WorkspaceID: r.WorkspaceID}); err != nil {
		return Run{}, err
	}
	if err := s.enqueuer.Enqueue(ctx, jobsFor(r)...); err != nil {
		return Run{}, fmt.Errorf("enqueuing plan: %w", err)
	}
	if err := s.store.notify(ctx, r); err != nil {
		return Run{}, err
	}
	return r, nil
}
