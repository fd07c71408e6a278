package environment_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/org"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func TestInputValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in    environment.Input
		field string
	}{
		{environment.Input{Name: "prod-eu", Tier: "production"}, ""},
		{environment.Input{Name: "a", Tier: "development"}, ""},
		{environment.Input{Name: "", Tier: "staging"}, "name"},
		{environment.Input{Name: "-lead", Tier: "staging"}, "name"},
		{environment.Input{Name: "trail-", Tier: "staging"}, "name"},
		{environment.Input{Name: "Upper", Tier: "staging"}, "name"},
		{environment.Input{Name: "sp ace", Tier: "staging"}, "name"},
		{environment.Input{Name: strings.Repeat("x", 64), Tier: "staging"}, "name"},
		{environment.Input{Name: "ok", Tier: "qa"}, "tier"},
		{environment.Input{Name: "ok", Tier: ""}, "tier"},
		{environment.Input{Name: "ok", Tier: "staging", DecisionWindowHours: 0}, ""}, // the default
		{environment.Input{Name: "ok", Tier: "staging", DecisionWindowHours: 1}, ""},
		{environment.Input{Name: "ok", Tier: "staging", DecisionWindowHours: 720}, ""},
		{environment.Input{Name: "ok", Tier: "staging", DecisionWindowHours: 721}, "decision_window_hours"},
		{environment.Input{Name: "ok", Tier: "staging", DecisionWindowHours: -1}, "decision_window_hours"},
	}
	for _, tc := range cases {
		v := tc.in.Validate()
		if tc.field == "" {
			require.NoError(t, v.Err(), "%+v", tc.in)
			continue
		}
		require.Error(t, v.Err(), "%+v", tc.in)
		require.Contains(t, v.Fields, tc.field, "%+v", tc.in)
	}
}

func TestTierDefaults(t *testing.T) {
	t.Parallel()
	require.True(t, environment.TierProduction.DefaultRequiresApproval())
	require.False(t, environment.TierStaging.DefaultRequiresApproval())
	require.False(t, environment.TierDevelopment.DefaultRequiresApproval())
}

func setup(t *testing.T) (*environment.Service, context.Context, context.Context) {
	t.Helper()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	orgs := org.NewService(gdb, log)
	ctx := context.Background()
	a, err := orgs.EnsureOrganization(ctx, "a", "A")
	require.NoError(t, err)
	b, err := orgs.EnsureOrganization(ctx, "b", "B")
	require.NoError(t, err)
	asA := authz.WithSubject(ctx, authz.Subject{UserID: "usr-a", Name: "A admin", OrganizationID: a.ID, Role: authz.RoleAdmin})
	asB := authz.WithSubject(ctx, authz.Subject{UserID: "usr-b", Name: "B admin", OrganizationID: b.ID, Role: authz.RoleAdmin})
	return environment.NewService(gdb, log, nil), asA, asB
}

func TestServiceScopesToOrganization(t *testing.T) {
	t.Parallel()
	svc, asA, asB := setup(t)
	env, err := svc.Create(asA, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
	require.True(t, env.RequiresApproval)

	_, err = svc.Get(asB, env.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, err = svc.Update(asB, env.ID, environment.Input{Name: "mine", Tier: "development"})
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, err = svc.Grants(asB, env.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
	list, err := svc.List(asB)
	require.NoError(t, err)
	require.Empty(t, list)

	// The same name is free in another organization.
	_, err = svc.Create(asB, environment.Input{Name: "prod", Tier: "production"})
	require.NoError(t, err)
}

func TestServiceRefusesNonAdmins(t *testing.T) {
	t.Parallel()
	svc, asA, _ := setup(t)
	subject, _ := authz.SubjectFrom(asA)
	for _, role := range []authz.Role{authz.RoleViewer, authz.RoleOperator, authz.RoleAuditor} {
		subject.Role = role
		ctx := authz.WithSubject(context.Background(), subject)
		_, err := svc.Create(ctx, environment.Input{Name: "x", Tier: "development"})
		require.ErrorIs(t, err, errs.ErrForbidden, role)
		_, err = svc.List(ctx)
		require.ErrorIs(t, err, errs.ErrForbidden, role)
	}
	_, err := svc.List(context.Background())
	require.ErrorIs(t, err, errs.ErrUnauthenticated)
}

// TestConcurrentDuplicateNames: two admins racing to create the same name get one
// environment and one field error, never a 500.
func TestConcurrentDuplicateNames(t *testing.T) {
	t.Parallel()
	svc, asA, _ := setup(t)
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, results[i] = svc.Create(asA, environment.Input{Name: "race", Tier: "staging"})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		if err == nil {
			ok++
			continue
		}
		v, isValidation := errs.AsValidation(err)
		require.True(t, isValidation, "unexpected error %v", err)
		require.Contains(t, v.Fields["name"], "already exists")
	}
	require.Equal(t, 1, ok)
}

// TestDecisionWindow: a new environment's decision window is 168 hours unless the input
// sets one; 721 is a field error and stores nothing; an edit that omits the window keeps
// it, one that changes it is audited before and after.
func TestDecisionWindow(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	a, err := org.NewService(gdb, log).EnsureOrganization(context.Background(), "a", "A")
	require.NoError(t, err)
	asA := authz.WithSubject(context.Background(), authz.Subject{UserID: "usr-a", Name: "A admin", OrganizationID: a.ID, Role: authz.RoleAdmin})
	svc := environment.NewService(gdb, log, nil)

	env, err := svc.Create(asA, environment.Input{Name: "staging", Tier: "staging"})
	require.NoError(t, err)
	require.Equal(t, environment.DefaultDecisionWindowHours, env.DecisionWindowHours)
	require.Equal(t, 7*24*time.Hour, env.DecisionWindow())
	stored, err := svc.Get(asA, env.ID)
	require.NoError(t, err)
	require.Equal(t, 168, stored.DecisionWindowHours)

	short, err := svc.Create(asA, environment.Input{Name: "short", Tier: "development", DecisionWindowHours: 1})
	require.NoError(t, err)
	require.Equal(t, 1, short.DecisionWindowHours)

	var envs, events int64
	count := func() (int64, int64) {
		require.NoError(t, gdb.Table("environments").Count(&envs).Error)
		require.NoError(t, gdb.Table("audit_events").Count(&events).Error)
		return envs, events
	}
	e0, a0 := count()
	_, err = svc.Create(asA, environment.Input{Name: "long", Tier: "staging", DecisionWindowHours: 721})
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, map[string]string{"decision_window_hours": "Between 1 and 720 hours."}, v.Fields)
	_, err = svc.Update(asA, env.ID, environment.Input{Name: "staging", Tier: "staging", DecisionWindowHours: 721})
	v, ok = errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "Between 1 and 720 hours.", v.Fields["decision_window_hours"])
	e1, a1 := count()
	require.Equal(t, []int64{e0, a0}, []int64{e1, a1}, "a refused input stores nothing")
	stored, err = svc.Get(asA, env.ID)
	require.NoError(t, err)
	require.Equal(t, 168, stored.DecisionWindowHours)

	// An edit without the window keeps it (and, changing nothing, audits nothing).
	updated, err := svc.Update(asA, short.ID, environment.Input{Name: "short", Tier: "development", Executor: "default"})
	require.NoError(t, err)
	require.Equal(t, 1, updated.DecisionWindowHours)
	_, a2 := count()
	require.Equal(t, a1, a2)

	updated, err = svc.Update(asA, env.ID, environment.Input{Name: "staging", Tier: "staging", DecisionWindowHours: 720})
	require.NoError(t, err)
	require.Equal(t, 720, updated.DecisionWindowHours)
	var ev audit.Event
	require.NoError(t, gdb.Where("target_id = ? AND action = 'environment.updated'", env.ID).Take(&ev).Error)
	var data struct{ Before, After map[string]any }
	require.NoError(t, json.Unmarshal(ev.Data, &data))
	require.EqualValues(t, 168, data.Before["decision_window_hours"])
	require.EqualValues(t, 720, data.After["decision_window_hours"])
	var created audit.Event
	require.NoError(t, gdb.Where("target_id = ? AND action = 'environment.created'", short.ID).Take(&created).Error)
	data.After = nil
	require.NoError(t, json.Unmarshal(created.Data, &data))
	require.EqualValues(t, 1, data.After["decision_window_hours"])
}
