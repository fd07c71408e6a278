package pages

import (
	"context"

	"gantry/models/authz"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/org"
)

// EnvironmentService administers environments (environment.Service).
type EnvironmentService interface {
	List(ctx context.Context) ([]environment.Environment, error)
	Get(ctx context.Context, id string) (environment.Environment, error)
	Grants(ctx context.Context, id string) ([]string, error)
	Create(ctx context.Context, in environment.Input) (environment.Environment, error)
	Update(ctx context.Context, id string, in environment.Input) (environment.Environment, error)
}

// MemberLister lists the organization's members (org.Service): the grants' and
// owners' choices.
type MemberLister interface {
	Members(ctx context.Context) ([]org.MembershipView, error)
}

// EnvironmentCredentials keeps environments' static cloud credentials
// (environment.Credentials): the write credential applies use and the read credential
// plans and verifications use. They say whether and since when each is set, never what
// it is.
type EnvironmentCredentials interface {
	StaticCredentialStatus(ctx context.Context, envID string) (environment.Standing, error)
	StaticCredentialsOf(ctx context.Context) (map[string]environment.Standing, error)
	Check(ctx context.Context, envID string, chs environment.CredentialChanges) error
	Apply(ctx context.Context, envID string, chs environment.CredentialChanges) error
}

// Environments builds the environment administration pages and the API's answers, and
// saves environments with their static credentials.
type Environments struct {
	Service EnvironmentService
	Members MemberLister
	// Credentials is optional: without it environments have no static credentials.
	Credentials EnvironmentCredentials
}

// EnvironmentLine is an environment with what static credentials it holds, and so its
// integration: where its runs provision and as whom, federated or static.
type EnvironmentLine struct {
	environment.Environment
	Standing    environment.Standing
	Integration environment.Integration
}

func lineOf(env environment.Environment, st environment.Standing) EnvironmentLine {
	return EnvironmentLine{Environment: env, Standing: st, Integration: environment.IntegrationOf(env, st)}
}

// List reads the organization's environments with their static credentials' standing.
func (s Environments) List(ctx context.Context) ([]EnvironmentLine, error) {
	envs, err := s.Service.List(ctx)
	if err != nil {
		return nil, err
	}
	static := map[string]environment.Standing{}
	if s.Credentials != nil {
		if static, err = s.Credentials.StaticCredentialsOf(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]EnvironmentLine, len(envs))
	for i, e := range envs {
		out[i] = lineOf(e, static[e.ID])
	}
	return out, nil
}

// Get reads environment id with its static credentials' standing.
func (s Environments) Get(ctx context.Context, id string) (EnvironmentLine, error) {
	env, err := s.Service.Get(ctx, id)
	if err != nil {
		return EnvironmentLine{}, err
	}
	return s.line(ctx, env)
}

// line is env with its static credentials' standing (none without a store).
func (s Environments) line(ctx context.Context, env environment.Environment) (EnvironmentLine, error) {
	if s.Credentials == nil {
		return lineOf(env, environment.Standing{}), nil
	}
	st, err := s.Credentials.StaticCredentialStatus(ctx, env.ID)
	return lineOf(env, st), err
}

// EnvironmentForm is the create or edit form of an environment.
type EnvironmentForm struct {
	// Environment is the one edited, as stored (nil: a new one), also on a refused save.
	Environment *EnvironmentLine
	// Grants are the members granted the environment, as stored or as submitted.
	Grants []string
	// Members are the organization's members, the grants' and owners' choices.
	Members []org.MembershipView
	// CredentialsManaged: the form has a static credential section (an environment
	// being edited, with a credential store); Standing says which are set, and since when.
	CredentialsManaged bool
	Standing           environment.Standing
	// Errors are the problems of a refused save beside their fields.
	Errors map[string]string
}

// New draws the form of a new environment. Only who manages environments draws one:
// a viewer gets a 403 page, not a form whose submission would be refused.
func (s Environments) New(ctx context.Context) (EnvironmentForm, error) {
	if _, err := authz.Require(ctx, authz.PermEnvironmentsManage); err != nil {
		return EnvironmentForm{}, err
	}
	return s.form(ctx, "", nil, nil)
}

// Edit draws environment id's edit form.
func (s Environments) Edit(ctx context.Context, id string) (EnvironmentForm, error) {
	env, err := s.Service.Get(ctx, id)
	if err != nil {
		return EnvironmentForm{}, err
	}
	grants, err := s.Service.Grants(ctx, env.ID)
	if err != nil {
		return EnvironmentForm{}, err
	}
	f, err := s.form(ctx, env.ID, grants, nil)
	if err != nil {
		return EnvironmentForm{}, err
	}
	l := lineOf(env, f.Standing)
	f.Environment = &l
	return f, nil
}

// form is the form of environment id ("": a new one) with grants ticked and problems
// beside its fields.
func (s Environments) form(ctx context.Context, id string, grants []string, problems map[string]string) (EnvironmentForm, error) {
	members, err := s.Members.Members(ctx)
	if err != nil {
		return EnvironmentForm{}, err
	}
	f := EnvironmentForm{Grants: grants, Members: members, CredentialsManaged: s.Credentials != nil && id != "", Errors: problems}
	if f.CredentialsManaged {
		if f.Standing, err = s.Credentials.StaticCredentialStatus(ctx, id); err != nil {
			return EnvironmentForm{}, err
		}
	}
	return f, nil
}

// Save creates an environment (id "") or updates environment id from in, with the
// changes to its static credentials (ignored without a credential store). The credentials are checked before anything is
// saved, so a refused save saved nothing; a refusal with field messages answers the form
// to draw again when form is set (a page's form; the API wants the messages alone).
func (s Environments) Save(ctx context.Context, id string, in environment.Input, creds environment.CredentialChanges, form bool) (EnvironmentLine, *EnvironmentForm, error) {
	env, err := s.save(ctx, id, in, creds)
	if v, ok := errs.AsValidation(err); ok && form {
		f, ferr := s.refused(ctx, id, in.Grants, v.Fields)
		if ferr != nil {
			return EnvironmentLine{}, nil, ferr
		}
		return EnvironmentLine{}, &f, nil
	}
	if err != nil {
		return EnvironmentLine{}, nil, err
	}
	if s.Credentials != nil {
		if err := s.Credentials.Apply(ctx, env.ID, creds); err != nil {
			return EnvironmentLine{}, nil, err
		}
	}
	l, err := s.line(ctx, env)
	return l, nil, err
}

// refused is the form of a refused save: what was submitted with the messages, and the
// environment as stored when editing (what a field the submission left out still is).
func (s Environments) refused(ctx context.Context, id string, grants []string, problems map[string]string) (EnvironmentForm, error) {
	f, err := s.form(ctx, id, grants, problems)
	if err != nil || id == "" {
		return f, err
	}
	env, err := s.Service.Get(ctx, id)
	if err != nil {
		return EnvironmentForm{}, err
	}
	l := lineOf(env, f.Standing)
	f.Environment = &l
	return f, nil
}

// save checks creds (on their own for a new environment, which holds none to compare
// with; against what environment id holds otherwise), then creates or updates.
func (s Environments) save(ctx context.Context, id string, in environment.Input, creds environment.CredentialChanges) (environment.Environment, error) {
	if s.Credentials != nil {
		check := creds.Validate()
		if id != "" {
			check = s.Credentials.Check(ctx, id, creds)
		}
		if check != nil {
			return environment.Environment{}, check
		}
	}
	if id == "" {
		return s.Service.Create(ctx, in)
	}
	return s.Service.Update(ctx, id, in)
}
