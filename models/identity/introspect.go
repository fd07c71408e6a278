package identity

import (
	"context"
	"errors"
	"fmt"
)

// Introspection (RFC 7662): a cloud that trusts Gantry's workload tokens asks, at every
// call a token makes, whether that token is still live. A signature and an exp cannot
// say so: a break-glass window ended early, a run cancelled or a phase whose lease ended
// withdraws the grant long before the token's exp, and no practical lifetime makes that
// refusal immediate (a token re-issued while the grant holds would have to live under a
// second to be refused within one). So the issuer asks the grant's owner, live, every
// time, and caches nothing: a "yes" is true only for the moment it is given.

// IntrospectionPath is where, under the issuer's URL, the introspection endpoint is
// served (views/paths.WorkloadIntrospection; web's tests hold the two in step).
const IntrospectionPath = "/introspect"

// WindowGrants answers for break-glass tokens (breakglass.Store implements it).
type WindowGrants interface {
	// WindowOpen reports whether break-glass window windowID of organization orgID is
	// open now: opened, not ended or closed, and its end not passed by the database clock.
	WindowOpen(ctx context.Context, orgID, windowID string) (bool, error)
}

// PhaseGrants answers for the tokens of a run's phases (run.Jobs implements it).
type PhaseGrants interface {
	// PhaseHolds reports whether run runID of organization orgID is still in phase
	// ("plan", "apply" or "verify") under a live lease of that phase; lease, when not
	// zero, names exactly which lease (an apply token's fencing token).
	PhaseHolds(ctx context.Context, orgID, runID, phase string, lease int64) (bool, error)
}

// ErrNoIntrospection means the issuer was built without the grants' owners, so it can
// say nothing about a token's grant (and its discovery offers no introspection).
var ErrNoIntrospection = errors.New("this workload issuer answers no introspection")

// Introspection is the answer about one token (RFC 7662 §2.2). An inactive token gets
// {"active":false} and nothing else: a caller learns nothing about a token that is not
// live. The token itself is never part of an answer.
type Introspection struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"`
	TokenType string `json:"token_type,omitempty"`
	Exp       int64  `json:"exp,omitempty"`
	Iat       int64  `json:"iat,omitempty"`
	Sub       string `json:"sub,omitempty"`
	Aud       string `json:"aud,omitempty"`
	Iss       string `json:"iss,omitempty"`
	Jti       string `json:"jti,omitempty"`
	// Gantry's claims, as the token carries them.
	Organization string `json:"gantry_org,omitempty"`
	Environment  string `json:"gantry_env,omitempty"`
	Workspace    string `json:"gantry_ws,omitempty"`
	Run          string `json:"gantry_run,omitempty"`
	Window       string `json:"gantry_window,omitempty"`
	Phase        Phase  `json:"gantry_phase,omitempty"`
	Lease        int64  `json:"gantry_lease,omitempty"`
}

// introspects reports whether the issuer can answer introspection.
func (i *Issuer) introspects() bool { return i.windows != nil && i.phases != nil }

// Introspect answers whether token is live now: it verifies as Verify does, has not
// reached its exp (by this issuer's clock, without Verify's leeway for skew between
// replicas: a token past its exp is over), and its grant still holds, asked of the
// grant's owner. Anything wrong with the token is an inactive answer, not an error;
// errors are the database's (the caller fails closed on them).
func (i *Issuer) Introspect(ctx context.Context, token string) (Introspection, error) {
	if !i.introspects() {
		return Introspection{}, ErrNoIntrospection
	}
	now := i.now()
	c, reg, err := i.verify(ctx, token, now)
	switch {
	case errors.Is(err, ErrInvalidToken):
		return Introspection{}, nil
	case err != nil:
		return Introspection{}, err
	case !now.Before(reg.Expiry.Time()):
		return Introspection{}, nil
	}
	holds, err := i.grantHolds(ctx, c)
	if err != nil || !holds {
		return Introspection{}, err
	}
	return Introspection{Active: true, Scope: c.Phase.Scope(), TokenType: "Bearer", Exp: reg.Expiry.Time().Unix(),
		Iat: reg.IssuedAt.Time().Unix(), Sub: reg.Subject, Aud: i.audience, Iss: i.issuer, Jti: reg.ID,
		Organization: c.OrganizationID, Environment: c.EnvironmentID, Workspace: c.WorkspaceID, Run: c.RunID,
		Window: c.WindowID, Phase: c.Phase, Lease: c.Lease}, nil
}

// grantHolds asks the owner of c's grant whether it still holds: a break-glass token's
// window, or a run's phase (an apply's by the exact lease its token names).
func (i *Issuer) grantHolds(ctx context.Context, c Claims) (bool, error) {
	var holds bool
	var err error
	switch c.Phase {
	case PhaseBreakglass:
		holds, err = i.windows.WindowOpen(ctx, c.OrganizationID, c.WindowID)
	case PhasePlan, PhaseVerify, PhaseApply:
		holds, err = i.phases.PhaseHolds(ctx, c.OrganizationID, c.RunID, string(c.Phase), c.Lease)
	default:
		return false, nil // Verify refuses unknown phases; nothing unknown is live
	}
	if err != nil {
		return false, fmt.Errorf("asking whether the %s token's grant holds: %w", c.Phase, err)
	}
	return holds, nil
}
