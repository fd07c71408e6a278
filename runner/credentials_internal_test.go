package runner

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/models/run"
)

// fakeStatic is an environment's static credentials ("" for none), recording which
// credential each phase asked for.
type fakeStatic struct {
	write, read string
	err         error
	mu          sync.Mutex
	asked       []string
}

func (f *fakeStatic) lookup(which, secret string) (string, bool, error) {
	f.mu.Lock()
	f.asked = append(f.asked, which)
	f.mu.Unlock()
	return secret, secret != "", f.err
}

func (f *fakeStatic) StaticCredential(context.Context, string, string) (string, bool, error) {
	return f.lookup("write", f.write)
}

func (f *fakeStatic) StaticReadCredential(context.Context, string, string) (string, bool, error) {
	return f.lookup("read", f.read)
}

// TestCloudTokenPerPhase: the phase decides the cloud credential. An apply gets the static
// write credential when the environment holds one, else a write-scoped workload token;
// a plan or verification gets the static read credential when there is one, else a
// read-scoped workload token for its phase, and never the write credential (it is not even
// looked up).
func TestCloudTokenPerPhase(t *testing.T) {
	t.Parallel()
	keys, err := keyring.Parse(keyring.NewKeySpec("kek-test"))
	require.NoError(t, err)
	issuer := identity.NewIssuer(dbtest.New(t), keys, "https://gantry.test/workload", identity.Options{})
	r := run.Run{ID: "run-1", OrganizationID: "org-1", EnvironmentID: "env-1", WorkspaceID: "ws-1",
		PlanDigest: "sha256:" + strings.Repeat("ab", 32), PlanSummary: run.Summary{Create: 3, Replace: 1}}
	lease := func(phase run.JobKind) run.Lease { return run.Lease{RunID: r.ID, Phase: phase, Token: 7} }
	claimsOf := func(phase run.JobKind) identity.Claims {
		return workloadClaims(r, phases[phase].identity, lease(phase))
	}
	const writeKey, readKey = "sbxk-write-key", "sbxk-read-key"

	// workload requires token to be a workload token of this run for phase, with its scope.
	workload := func(t *testing.T, token string, phase identity.Phase, scope string) {
		t.Helper()
		require.NotEqual(t, writeKey, token)
		claims, err := issuer.Verify(t.Context(), token)
		require.NoError(t, err, "a workload identity token")
		require.Equal(t, phase, claims.Phase)
		require.Equal(t, scope, claims.Phase.Scope())
		require.Equal(t, r.ID, claims.RunID)
		require.Equal(t, r.WorkspaceID, claims.WorkspaceID)
		if phase == identity.PhaseApply {
			// An apply's token names the plan it applies and its attempt (the lease).
			require.Equal(t, r.PlanDigest, claims.PlanDigest)
			require.Equal(t, int64(7), claims.Lease)
			// And what its approval covered: the approved plan's change classes.
			require.Equal(t, []string{identity.ChangeCreate, identity.ChangeReplace}, claims.Approved)
		} else {
			require.Empty(t, claims.PlanDigest)
			require.Zero(t, claims.Lease)
			require.Empty(t, claims.Approved)
		}
	}
	for _, tc := range []struct {
		name        string
		static      *fakeStatic
		apply, read string // "" expects a workload token
	}{
		{"both keys", &fakeStatic{write: writeKey, read: readKey}, writeKey, readKey},
		{"write key only", &fakeStatic{write: writeKey}, writeKey, ""},
		{"read key only", &fakeStatic{read: readKey}, "", readKey},
		{"no keys", &fakeStatic{}, "", ""},
		{"no static store", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := jobCredentials{identity: issuer}
			if tc.static != nil {
				j.static = tc.static
			}
			for _, phase := range []run.JobKind{run.JobPlan, run.JobVerify} {
				token, err := j.cloudToken(t.Context(), r, claimsOf(phase))
				require.NoError(t, err)
				require.NotEqual(t, writeKey, token, "%s got the write key", phase)
				if tc.read != "" {
					require.Equal(t, tc.read, token, phase)
				} else {
					workload(t, token, phases[phase].identity, identity.ScopeRead)
				}
			}
			if tc.static != nil {
				require.NotContains(t, tc.static.asked, "write", "a read phase never looks the write key up")
				require.Equal(t, []string{"read", "read"}, tc.static.asked)
			}
			token, err := j.cloudToken(t.Context(), r, claimsOf(run.JobApply))
			require.NoError(t, err)
			if tc.apply != "" {
				require.Equal(t, tc.apply, token)
			} else {
				require.NotEqual(t, readKey, token, "an apply never gets the read key")
				workload(t, token, identity.PhaseApply, identity.ScopeWrite)
			}
		})
	}

	// The runner's phases map onto the identity phases the rule is written for.
	require.Equal(t, identity.PhasePlan, phases[run.JobPlan].identity)
	require.Equal(t, identity.PhaseApply, phases[run.JobApply].identity)
	require.Equal(t, identity.PhaseVerify, phases[run.JobVerify].identity)

	// Any other phase gets nothing; a failing lookup fails the phase rather than fall
	// back to something else.
	_, err = jobCredentials{identity: issuer, static: &fakeStatic{write: writeKey}}.cloudToken(t.Context(), r, identity.Claims{OrganizationID: r.OrganizationID, EnvironmentID: r.EnvironmentID,
		WorkspaceID: r.WorkspaceID, WindowID: "win-1", Phase: identity.PhaseBreakglass})
	require.Error(t, err)
	broken := &fakeStatic{write: writeKey, read: readKey, err: errors.New("database down")}
	_, err = jobCredentials{identity: issuer, static: broken}.cloudToken(t.Context(), r, claimsOf(run.JobPlan))
	require.ErrorContains(t, err, "database down")
	require.Equal(t, []string{"read"}, broken.asked)
}
