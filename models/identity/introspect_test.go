package identity_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
)

// grants is a settable stand-in for the grants' owners (the real ones, the break-glass
// windows and the runs' leases, are tested against the database in web and runner):
// it says which windows are open and which phases hold, and records what it was asked.
type grants struct {
	mu     sync.Mutex
	open   map[string]bool // window id
	phases map[string]bool // "run/phase/lease"
	asked  []string
	err    error
}

func (g *grants) WindowOpen(_ context.Context, orgID, windowID string) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, "window "+orgID+"/"+windowID)
	return g.open[windowID], g.err
}

func (g *grants) PhaseHolds(_ context.Context, orgID, runID, phase string, lease int64) (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := runID + "/" + phase + "/" + strconv.FormatInt(lease, 10)
	g.asked = append(g.asked, "phase "+orgID+"/"+key)
	return g.phases[key], g.err
}

func (g *grants) set(f func(g *grants)) { g.mu.Lock(); defer g.mu.Unlock(); f(g) }

// TestIntrospection: a token is active while it verifies, has not reached its exp and
// its grant's owner says the grant holds, asked at every question: the break-glass
// window for a window's token, the run's phase (an apply's by its exact lease) for a
// job's. Anything else is {"active":false} and nothing more; a failing owner is an
// error, never an answer.
func TestIntrospection(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	keys := newKeyring(t)
	g := &grants{open: map[string]bool{"bgw-d": true}, phases: map[string]bool{"run-d/plan/0": true, "run-d/apply/42": true}}
	clk := &clock{t: time.Now()}
	iss := identity.NewIssuer(gdb, keys, "https://gantry.test/workload", identity.Options{Windows: g, Phases: g, Now: clk.Now})
	ctx := t.Context()

	var doc map[string]any
	require.NoError(t, json.Unmarshal(iss.Discovery(), &doc))
	require.Equal(t, "https://gantry.test/workload/introspect", doc["introspection_endpoint"])
	require.Equal(t, []any{"none"}, doc["introspection_endpoint_auth_methods_supported"])

	window := identity.Claims{OrganizationID: "org-a", EnvironmentID: "env-b", WorkspaceID: "ws-c", WindowID: "bgw-d", Phase: identity.PhaseBreakglass}
	cases := []struct {
		name   string
		claims identity.Claims
		asked  string
		end    func(g *grants)
	}{
		{"break-glass", window, "window org-a/bgw-d", func(g *grants) { g.open["bgw-d"] = false }},
		{"plan", claimsFor(identity.PhasePlan), "phase org-a/run-d/plan/0", func(g *grants) { g.phases["run-d/plan/0"] = false }},
		{"apply", claimsFor(identity.PhaseApply), "phase org-a/run-d/apply/42", func(g *grants) { g.phases["run-d/apply/42"] = false }},
	}
	for _, c := range cases {
		token, expires, err := iss.Mint(ctx, c.claims)
		require.NoError(t, err)
		for range 2 { // asked every time: no answer is kept
			got, err := iss.Introspect(ctx, token)
			require.NoError(t, err, c.name)
			require.True(t, got.Active, c.name)
			require.Equal(t, c.claims.Phase, got.Phase)
			require.Equal(t, c.claims.Phase.Scope(), got.Scope)
			require.Equal(t, expires.Unix(), got.Exp)
			require.Equal(t, "org-a", got.Organization)
			require.NotEmpty(t, got.Jti)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.NotContains(t, string(b), token, "an answer never holds the token")
		}
		g.set(func(g *grants) {
			require.Equal(t, []string{c.asked, c.asked}, g.asked, c.name)
			g.asked = nil
		})
		g.set(c.end)
		got, err := iss.Introspect(ctx, token)
		require.NoError(t, err)
		require.Equal(t, identity.Introspection{}, got, "%s: its grant ended", c.name)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		require.JSONEq(t, `{"active":false}`, string(b))
		g.set(func(g *grants) { g.asked = nil })
	}

	// Another attempt at the same apply (another lease) is not the one that holds.
	g.set(func(g *grants) { g.phases["run-d/apply/42"] = true })
	other := claimsFor(identity.PhaseApply)
	other.Lease = 41
	token, _, err := iss.Mint(ctx, other)
	require.NoError(t, err)
	got, err := iss.Introspect(ctx, token)
	require.NoError(t, err)
	require.False(t, got.Active, "an earlier attempt's token")

	// An owner that cannot answer is an error, never an answer: the caller fails closed.
	g.set(func(g *grants) { g.open["bgw-d"] = true; g.err = errors.New("database down") })
	token, expires, err := iss.Mint(ctx, window)
	require.NoError(t, err)
	_, err = iss.Introspect(ctx, token)
	require.ErrorContains(t, err, "database down")

	// Past its exp it is over, without the verifier's leeway, and the owner is not asked.
	g.set(func(g *grants) { g.err = nil; g.asked = nil })
	clk.Advance(expires.Sub(clk.Now()))
	got, err = iss.Introspect(ctx, token)
	require.NoError(t, err)
	require.False(t, got.Active, "at its exp")
	g.set(func(g *grants) { require.Empty(t, g.asked) })

	// Not a token of this issuer, or not a token at all: inactive, owner not asked.
	for _, bad := range []string{"", "not.a.token", token + "x"} {
		got, err = iss.Introspect(ctx, bad)
		require.NoError(t, err)
		require.False(t, got.Active, bad)
	}
	g.set(func(g *grants) { require.Empty(t, g.asked) })

}

// TestNoIntrospectionWithoutGrants: an issuer built without both owners offers no
// introspection and answers none.
func TestNoIntrospectionWithoutGrants(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	g := &grants{}
	for _, opts := range []identity.Options{{}, {Windows: g}, {Phases: g}} {
		iss := identity.NewIssuer(gdb, newKeyring(t), "https://gantry.test/workload", opts)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(iss.Discovery(), &doc))
		require.NotContains(t, doc, "introspection_endpoint")
		_, err := iss.Introspect(t.Context(), "a.b.c")
		require.ErrorIs(t, err, identity.ErrNoIntrospection)
	}
}
