package identity_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
)

// payload is token's claims, read without checking the signature (Mint just made it).
func payload(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var p map[string]any
	require.NoError(t, json.Unmarshal(raw, &p))
	return p
}

// A token for a real target names that target as its audience and carries what the
// approval covered, as a list and as AWS session tags; the issuer's own Verify (the
// sandbox cloud's introspection) refuses a token meant for someone else.
func TestTargetAudienceAndApprovedChanges(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	iss, _ := serve(t, func(u string) *identity.Issuer { return identity.NewIssuer(gdb, newKeyring(t), u, identity.Options{}) })

	c := claimsFor(identity.PhaseApply)
	c.Audience = "kube.gantry"
	c.Approved = identity.ApprovedClasses(2, 0, 0, 1)
	require.Equal(t, []string{"create", "delete"}, c.Approved)
	token, _, err := iss.Mint(t.Context(), c)
	require.NoError(t, err)
	p := payload(t, token)
	require.Equal(t, "kube.gantry", p["aud"])
	require.Equal(t, []any{"create", "delete"}, p["gantry_approved"])
	require.Equal(t, map[string]any{"principal_tags": map[string]any{
		"gantry_org": []any{"org-a"}, "gantry_env": []any{"env-b"}, "gantry_ws": []any{"ws-c"},
		"gantry_phase": []any{"apply"}, "gantry_scope": []any{"write"},
		"gantry_deletes": []any{"true"}, "gantry_replaces": []any{"false"},
	}}, p["https://aws.amazon.com/tags"])
	_, err = iss.Verify(t.Context(), token)
	require.ErrorIs(t, err, identity.ErrInvalidToken, "a Kubernetes token is no sandbox token")

	// The default audience round-trips, approved changes included.
	c.Audience = ""
	token, _, err = iss.Mint(t.Context(), c)
	require.NoError(t, err)
	require.Equal(t, "sandbox", payload(t, token)["aud"])
	back, err := iss.Verify(t.Context(), token)
	require.NoError(t, err)
	require.Equal(t, c, back)
	require.True(t, back.Approves(identity.ChangeDelete))
	require.False(t, back.Approves(identity.ChangeReplace))

	// A read token approves nothing: no list, and tags saying so.
	plan, _, err := iss.Mint(t.Context(), claimsFor(identity.PhasePlan))
	require.NoError(t, err)
	p = payload(t, plan)
	require.NotContains(t, p, "gantry_approved")
	tags := p["https://aws.amazon.com/tags"].(map[string]any)["principal_tags"].(map[string]any)
	require.Equal(t, []any{"read"}, tags["gantry_scope"])
	require.Equal(t, []any{"false"}, tags["gantry_deletes"])

	var doc struct {
		Claims []string `json:"claims_supported"`
	}
	require.NoError(t, json.Unmarshal(iss.Discovery(), &doc))
	require.Subset(t, doc.Claims, []string{"gantry_approved", "https://aws.amazon.com/tags", "scope", "gantry_ws"})
}

func TestApprovedChangesAndAudienceRefusals(t *testing.T) {
	t.Parallel()
	iss := identity.NewIssuer(dbtest.New(t), newKeyring(t), "https://gantry.test/workload", identity.Options{})
	for name, mutate := range map[string]func(*identity.Claims){
		"a plan approves":        func(c *identity.Claims) { *c = claimsFor(identity.PhasePlan); c.Approved = []string{"create"} },
		"unknown class":          func(c *identity.Claims) { c.Approved = []string{"drop"} },
		"out of order":           func(c *identity.Claims) { c.Approved = []string{"delete", "create"} },
		"repeated":               func(c *identity.Claims) { c.Approved = []string{"create", "create"} },
		"audience on two lines":  func(c *identity.Claims) { c.Audience = "kube\nadmin" },
		"audience with a space":  func(c *identity.Claims) { c.Audience = " kube" },
		"audience with NUL":      func(c *identity.Claims) { c.Audience = "kube\x00" },
		"audience over the size": func(c *identity.Claims) { c.Audience = strings.Repeat("a", identity.MaxAudience+1) },
	} {
		c := claimsFor(identity.PhaseApply)
		mutate(&c)
		_, _, err := iss.Mint(t.Context(), c)
		require.ErrorIs(t, err, identity.ErrInvalidClaims, name)
	}
	require.Nil(t, identity.ApprovedClasses(0, 0, 0, 0))
	require.Equal(t, []string{"create", "update", "replace", "delete"}, identity.ApprovedClasses(1, 1, 1, 1))
}
