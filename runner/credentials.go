package runner

import (
	"context"
	"fmt"
	"time"

	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/models/run"
	"gantry/models/state"
	"gantry/runner/targets"
)

// CredentialSource mints the credentials of one job phase and ends them afterwards.
type CredentialSource interface {
	// ForPhase mints the credentials of the phase lease l holds on run r.
	ForPhase(ctx context.Context, r run.Run, l run.Lease, ttl time.Duration) (Credentials, error)
	// Revoke ends exactly the credentials ForPhase returned.
	Revoke(ctx context.Context, c Credentials) error
}

// StaticCredentials looks up the static cloud credentials an environment may hold
// instead of using workload identity (environment.Credentials implements it): a write
// credential for applies and a read credential for plans and verifications. The runner
// acts as the system here: there is no subject in ctx.
type StaticCredentials interface {
	// StaticCredential is the write credential: only an apply may get it.
	StaticCredential(ctx context.Context, orgID, envID string) (secret string, ok bool, err error)
	// StaticReadCredential is the read credential: what plans and verifications get.
	StaticReadCredential(ctx context.Context, orgID, envID string) (secret string, ok bool, err error)
}

// Targets looks up where an environment's runs provision (environment.Directory
// implements it). The runner acts as the system here: there is no subject in ctx.
type Targets interface {
	Target(ctx context.Context, orgID, envID string) (environment.Target, error)
}

// jobCredentials issues state backend credentials and a cloud credential per phase
// (cloudToken decides which). A workload token is minted when the phase starts, so an
// apply's token exists only after its approval and cannot expire during a long wait for
// one. The state credential is per phase whatever the cloud credential is.
type jobCredentials struct {
	state    *state.Store
	identity *identity.Issuer
	static   StaticCredentials // optional
	targets  Targets           // optional: without it every environment is the sandbox's
}

// NewJobCredentials returns the credential source of live runners: state backend
// credentials from states, workload tokens from identity for the audience of each
// environment's target from targets (nil: the sandbox), and an environment's static
// credentials from static (nil: none are used).
func NewJobCredentials(states *state.Store, identity *identity.Issuer, static StaticCredentials, targets Targets) CredentialSource {
	return jobCredentials{state: states, identity: identity, static: static, targets: targets}
}

var phases = map[run.JobKind]struct {
	state    state.Phase
	identity identity.Phase
}{
	run.JobPlan:   {state.PhasePlan, identity.PhasePlan},
	run.JobApply:  {state.PhaseApply, identity.PhaseApply},
	run.JobVerify: {state.PhaseVerify, identity.PhaseVerify},
}

func (j jobCredentials) ForPhase(ctx context.Context, r run.Run, l run.Lease, ttl time.Duration) (Credentials, error) {
	p, ok := phases[l.Phase]
	if !ok {
		return Credentials{}, fmt.Errorf("no credentials for phase %q", l.Phase)
	}
	wiring, audience, err := j.wiring(ctx, r, p.identity)
	if err != nil {
		return Credentials{}, err
	}
	user, pass, err := j.state.IssueCredentials(ctx, r.OrganizationID, r.WorkspaceID, r.ID, p.state, ttl)
	if err != nil {
		return Credentials{}, err
	}
	claims := workloadClaims(r, p.identity, l)
	claims.Audience = audience
	token, err := j.cloudToken(ctx, r, claims)
	if err != nil {
		// The state credential was issued: end it now rather than let it live out its ttl.
		_ = j.state.RevokeCredential(context.WithoutCancel(ctx), user)
		return Credentials{}, err
	}
	if _, minted := j.identity.MintedExpiry(token); !minted {
		if err := staticFits(wiring, r.EnvironmentID); err != nil {
			_ = j.state.RevokeCredential(context.WithoutCancel(ctx), user)
			return Credentials{}, err
		}
	}
	return j.refreshable(Credentials{StateUsername: user, StatePassword: pass, CloudToken: token, Wiring: wiring}, claims), nil
}

// staticFits refuses a static credential for a target that cannot use one: it is handed
// over as the token file, a bearer token (the sandbox's key, a Kubernetes service
// account token); AWS, GCP and Azure exchange a web identity token instead.
func staticFits(w targets.Wiring, envID string) error {
	if k := w.Target.OrSandbox().Kind; !k.TakesStaticCredential() {
		return fmt.Errorf("environment %s holds a static credential, which a %s target cannot use: "+
			"remove it (its phases then get federated workload tokens) or choose a sandbox or Kubernetes target", envID, k)
	}
	return nil
}

// wiring is how phase of run r reaches its environment's target, and the audience its
// workload token is minted for.
func (j jobCredentials) wiring(ctx context.Context, r run.Run, phase identity.Phase) (targets.Wiring, string, error) {
	var target environment.Target
	if j.targets != nil {
		var err error
		if target, err = j.targets.Target(ctx, r.OrganizationID, r.EnvironmentID); err != nil {
			return targets.Wiring{}, "", fmt.Errorf("reading the target of environment %s: %w", r.EnvironmentID, err)
		}
	}
	target = target.OrSandbox()
	in, err := targets.For(target)
	if err != nil {
		return targets.Wiring{}, "", fmt.Errorf("environment %s: %w", r.EnvironmentID, err)
	}
	w := targets.Wiring{Target: target, Scope: phase.Scope(), Session: "gantry-" + r.ID + "-" + string(phase)}
	return w, in.Audience(), nil
}

// workloadClaims are what the workload token of phase of run r asserts. An apply's
// token also names the plan it applies (r.PlanDigest, which BeginApply checked against
// the approved digest and the stored plan file) and its lease's fencing token: one
// attempt at one plan, which a cloud can count (a second attempt at the same digest is
// an apply run twice), and the change classes that plan holds: what its approval covered
// (the reviewed plan is the applied plan, so its summary is the approved one), which a
// target can hold the apply to (a Kubernetes admission policy refuses a DELETE nobody
// approved).
func workloadClaims(r run.Run, phase identity.Phase, l run.Lease) identity.Claims {
	c := identity.Claims{OrganizationID: r.OrganizationID, EnvironmentID: r.EnvironmentID,
		WorkspaceID: r.WorkspaceID, RunID: r.ID, Phase: phase}
	if phase == identity.PhaseApply {
		c.PlanDigest, c.Lease = r.PlanDigest, l.Token
		s := r.PlanSummary
		c.Approved = identity.ApprovedClasses(s.Create, s.Update, s.Replace, s.Delete)
	}
	return c
}

// cloudToken is the cloud credential of one phase of run r. The rule (DESIGN §6,
// docs/runners.md "What a phase gets"):
//
//   - apply: the environment's static write credential if it holds one, else a
//     workload identity token minted for the apply (write-scoped to the workspace);
//   - plan and verify: the environment's static read credential if it holds one, else
//     a workload identity token minted for that phase (read-scoped by the phase).
//
// A read phase never gets the write credential, whether or not a read credential is
// set: a plan or verification runs code and providers that only need to read, and a
// write key in its environment is a write key anyone who subverts it holds. Any other
// phase is refused (no credential is better than a guessed one).
func (j jobCredentials) cloudToken(ctx context.Context, r run.Run, claims identity.Claims) (string, error) {
	phase := claims.Phase
	var lookup func(ctx context.Context, orgID, envID string) (string, bool, error)
	switch phase {
	case identity.PhaseApply:
		if j.static != nil {
			lookup = j.static.StaticCredential
		}
	case identity.PhasePlan, identity.PhaseVerify:
		if j.static != nil {
			lookup = j.static.StaticReadCredential
		}
	default:
		return "", fmt.Errorf("no cloud credential for phase %q", phase)
	}
	if lookup != nil {
		secret, ok, err := lookup(ctx, r.OrganizationID, r.EnvironmentID)
		if err != nil {
			return "", fmt.Errorf("reading the environment's static %s credential: %w", phase.Scope(), err)
		}
		if ok {
			return secret, nil
		}
	}
	token, _, err := j.identity.Mint(ctx, claims)
	return token, err
}

func (j jobCredentials) Revoke(ctx context.Context, c Credentials) error {
	// The workload token needs no revoking here: it ends with its grant. Gantry's issuer
	// answers a cloud that asks (introspection, at every call: the sandbox cloud does)
	// that a token is live only while its run is in the token's phase under a live lease
	// of it, an apply's under the very lease it names (run.Jobs.PhaseHolds). Credentials
	// are revoked as the phase ends: it finished, failed or was cancelled (the run left
	// the phase), or its worker returns without finishing and releases the lease just
	// after this; either way the token is refused from then on. A cloud that does not
	// ask trusts it until its exp (at most 15 minutes), scoped to this run's phase.
	// A static credential is not Gantry's to end: it lives until an admin removes it (and
	// deletes it in the cloud). The state credential ends now.
	return j.state.RevokeCredential(ctx, c.StateUsername)
}
