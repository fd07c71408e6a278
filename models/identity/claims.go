// Package identity makes Gantry a workload identity issuer: for each job phase it mints
// a short-lived ES256 JWT naming the organization, environment, workspace, run and
// phase, which a cloud (the sandbox cloud, or a real one through web identity
// federation) verifies against Gantry's published OIDC discovery document and JWKS,
// then enforces the token's scope. No standing cloud credential is needed. A cloud that
// asks (token introspection, introspect.go) is told, at every call, whether the token's
// grant still holds: a token ends with its phase or its break-glass window, not at its
// exp.
//
// Signing keys live in workload_keys, private halves sealed by the keyring, shared by
// every portal replica. They rotate on a period; a rotated key stays published until
// every token it signed has expired, so verification never breaks during a rotation.
package identity

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Phase is the job phase a token is minted for; it decides the token's scope.
type Phase string

const (
	PhasePlan   Phase = "plan"
	PhaseApply  Phase = "apply"
	PhaseVerify Phase = "verify"
	// PhaseBreakglass is a person's manual change through an approved break-glass
	// window (DESIGN §9): write-scoped to the window's workspace, bound to the window,
	// and never longer-lived than the window.
	PhaseBreakglass Phase = "breakglass"
)

// Scopes a cloud enforces: plan and verify only read, apply and a break-glass window
// write (to the workspace the subject names, nothing more).
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// Valid reports whether p is a known phase.
func (p Phase) Valid() bool {
	return p == PhasePlan || p == PhaseApply || p == PhaseVerify || p == PhaseBreakglass
}

// Scope is what a token for phase p may do: only an apply and a break-glass window
// write.
func (p Phase) Scope() string {
	if p == PhaseApply || p == PhaseBreakglass {
		return ScopeWrite
	}
	return ScopeRead
}

// ErrInvalidClaims means the claims cannot be put in (or were not found in) a token.
var ErrInvalidClaims = errors.New("invalid workload claims")

// Claims is what a workload token asserts: which job, of which run, in which
// workspace, environment and organization; or, for PhaseBreakglass, which break-glass
// window (and no run).
type Claims struct {
	OrganizationID string
	EnvironmentID  string
	WorkspaceID    string
	RunID          string
	WindowID       string
	Phase          Phase
	// PlanDigest is the digest of the saved plan an apply token applies ("sha256:<hex>",
	// as runs record it), and Lease the fencing token of the apply's lease: together they
	// name one attempt at applying one plan, so a cloud can count applies per plan digest
	// (the sandbox cloud does; a second attempt at a digest is a double apply). Only an
	// apply token carries them, and it must.
	PlanDigest string
	Lease      int64
	// Approved is what the approval of an apply covered: the change classes its plan
	// holds (ChangeCreate, ChangeUpdate, ChangeReplace, ChangeDelete), sorted, each once.
	// A target that checks it refuses what nobody approved even from a runner that tries
	// (a Kubernetes admission policy refusing a DELETE when no delete was approved). Only
	// an apply token carries it; an apply of a plan without changes carries none.
	Approved []string
	// Audience is the token's aud: whom it is for (the integration of the environment's
	// target: the sandbox cloud, a Kubernetes API server, AWS STS, ...). Empty: the
	// issuer's default audience.
	Audience string
}

// The change classes of a plan an approval covers (Claims.Approved).
const (
	ChangeCreate  = "create"
	ChangeUpdate  = "update"
	ChangeReplace = "replace"
	ChangeDelete  = "delete"
)

// changeClasses are the known classes in their one order.
var changeClasses = []string{ChangeCreate, ChangeUpdate, ChangeReplace, ChangeDelete}

// ApprovedClasses is the Approved list of a plan with these counts of creates, updates,
// replaces and deletes: the classes with at least one change, in their one order.
func ApprovedClasses(create, update, replace, del int) []string {
	var out []string
	for n, count := range []int{create, update, replace, del} {
		if count > 0 {
			out = append(out, changeClasses[n])
		}
	}
	return out
}

// Approves reports whether the approved classes include class.
func (c Claims) Approves(class string) bool { return slices.Contains(c.Approved, class) }

// MaxAudience bounds an audience's length (an ARN, a URL: long but not unbounded).
const MaxAudience = 512

// Validate refuses empty ids, ids containing ':' (the subject separator, so a subject
// always parses one way: "ws:a:run:b" cannot be forged from a crafted id) and unknown
// phases.
func (c Claims) Validate() error {
	// A token names a run's phase, or a break-glass window: never both, never neither.
	job := struct{ name, value string }{"run", c.RunID}
	if c.Phase == PhaseBreakglass {
		job = struct{ name, value string }{"window", c.WindowID}
		if c.RunID != "" {
			return fmt.Errorf("a break-glass token names a window, not run %q: %w", c.RunID, ErrInvalidClaims)
		}
	} else if c.WindowID != "" {
		return fmt.Errorf("only a break-glass token names a window: %w", ErrInvalidClaims)
	}
	for _, f := range []struct{ name, value string }{
		{"organization", c.OrganizationID},
		{"environment", c.EnvironmentID},
		{"workspace", c.WorkspaceID},
		job,
	} {
		if f.value == "" {
			return fmt.Errorf("%s id is empty: %w", f.name, ErrInvalidClaims)
		}
		if strings.Contains(f.value, ":") {
			return fmt.Errorf("%s id %q contains ':': %w", f.name, f.value, ErrInvalidClaims)
		}
	}
	if !c.Phase.Valid() {
		return fmt.Errorf("phase %q is not plan, apply, verify or breakglass: %w", c.Phase, ErrInvalidClaims)
	}
	if c.Phase == PhaseApply {
		if !planDigestRe.MatchString(c.PlanDigest) || c.Lease <= 0 {
			return fmt.Errorf("an apply token names the plan digest it applies and its lease, not %q and %d: %w", c.PlanDigest, c.Lease, ErrInvalidClaims)
		}
	} else if c.PlanDigest != "" || c.Lease != 0 || c.Approved != nil {
		return fmt.Errorf("only an apply token names a plan digest, a lease and approved changes: %w", ErrInvalidClaims)
	}
	if err := validApproved(c.Approved); err != nil {
		return err
	}
	if len(c.Audience) > MaxAudience || strings.ContainsFunc(c.Audience, unicode.IsControl) ||
		strings.TrimSpace(c.Audience) != c.Audience {
		return fmt.Errorf("audience %q is not a single line of at most %d bytes without surrounding spaces: %w", c.Audience, MaxAudience, ErrInvalidClaims)
	}
	return nil
}

// validApproved refuses unknown classes, repeats and another order than
// ApprovedClasses': one list means one thing.
func validApproved(approved []string) error {
	next := 0
	for _, class := range approved {
		n := slices.Index(changeClasses, class)
		if n < next {
			return fmt.Errorf("approved changes %q are not a sorted list of %v without repeats: %w", approved, changeClasses, ErrInvalidClaims)
		}
		next = n + 1
	}
	return nil
}

// planDigestRe is a plan digest as runs record it (bundle.Digest).
var planDigestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Subject is the token's sub: every level of the job's place, so a cloud's trust
// policy can match on a prefix (an environment) or the whole (one run's apply).
func (c Claims) Subject() string {
	job := ":run:" + c.RunID
	if c.Phase == PhaseBreakglass {
		job = ":window:" + c.WindowID
	}
	return "org:" + c.OrganizationID + ":env:" + c.EnvironmentID + ":ws:" + c.WorkspaceID +
		job + ":phase:" + string(c.Phase)
}

// LogValue logs the ids and phase; claims hold nothing secret, the token does and is
// never logged.
func (c Claims) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("organization", c.OrganizationID),
		slog.String("environment", c.EnvironmentID),
		slog.String("workspace", c.WorkspaceID),
		slog.String("run", c.RunID),
		slog.String("window", c.WindowID),
		slog.String("phase", string(c.Phase)),
		slog.String("plan_digest", c.PlanDigest),
		slog.Int64("lease", c.Lease),
		slog.Any("approved", c.Approved),
		slog.String("audience", c.Audience),
	)
}
