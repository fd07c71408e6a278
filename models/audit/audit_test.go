package audit_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/org"
)

func TestMain(m *testing.M) {
	// The export benchmark runs the export in a child process of this binary, so that
	// its peak memory is the export's alone (see bench_test.go).
	if os.Getenv(exportChildEnv) != "" {
		os.Exit(exportChild())
	}
	os.Exit(dbtest.Main(m))
}

func TestChainConcurrentAppendsAndTamperDetection(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	ctx := context.Background()
	o, err := org.NewService(gdb, log).EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(t, err)
	actor := authz.WithSubject(ctx, authz.Subject{UserID: "usr-1", Name: "Ann", OrganizationID: o.ID, Role: authz.RoleOwner})

	// Concurrent appends must still form one unbroken chain.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := log.Record(actor, audit.Entry{Action: "test.event", TargetType: "thing", TargetID: "t",
				Data: map[string]any{"i": i, "nested": map[string]any{"z": 1, "a": []int{3, 2}}, "big": int64(1) << 53}})
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	n, err := log.Verify(ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, 21, n) // 20 + organization.created

	// Tampering (possible only for a superuser who first disables the guard) is detected.
	require.NoError(t, gdb.Exec("ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update_delete").Error)
	require.NoError(t, gdb.Exec("UPDATE audit_events SET actor_name = 'Mallory' WHERE organization_id = ? AND seq = 5", o.ID).Error)
	_, err = log.Verify(ctx, o.ID)
	require.ErrorIs(t, err, audit.ErrChainBroken)
	require.ErrorContains(t, err, "seq 5")

	require.NoError(t, gdb.Exec("UPDATE audit_events SET actor_name = 'Ann' WHERE organization_id = ? AND seq = 5", o.ID).Error)
	_, err = log.Verify(ctx, o.ID)
	require.NoError(t, err)
	require.NoError(t, gdb.Exec("DELETE FROM audit_events WHERE organization_id = ? AND seq = 7", o.ID).Error)
	_, err = log.Verify(ctx, o.ID)
	require.ErrorIs(t, err, audit.ErrChainBroken)
}

func TestAppendOnlyInDatabase(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	_, err := org.NewService(gdb, log).EnsureOrganization(context.Background(), "acme", "Acme")
	require.NoError(t, err)
	require.ErrorContains(t, gdb.Exec("UPDATE audit_events SET action = 'forged'").Error, "append-only")
	require.ErrorContains(t, gdb.Exec("DELETE FROM audit_events").Error, "append-only")
	require.ErrorContains(t, gdb.Exec("TRUNCATE audit_events").Error, "append-only")
	var n int64
	require.NoError(t, gdb.Table("audit_events").Where("action = 'organization.created'").Count(&n).Error)
	require.EqualValues(t, 1, n)
}

func TestListNeedsAuditRead(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	o, err := org.NewService(gdb, log).EnsureOrganization(context.Background(), "acme", "Acme")
	require.NoError(t, err)
	viewer := authz.WithSubject(context.Background(), authz.Subject{UserID: "v", OrganizationID: o.ID, Role: authz.RoleViewer})
	_, err = log.List(viewer, audit.Filter{})
	require.Error(t, err)
	auditor := authz.WithSubject(context.Background(), authz.Subject{UserID: "a", OrganizationID: o.ID, Role: authz.RoleAuditor})
	events, err := log.List(auditor, audit.Filter{})
	require.NoError(t, err)
	require.Len(t, events, 1)
}

// TestRecordRefusesUnstorableText: data PostgreSQL cannot store (a NUL in a reason) is
// the request's fault, a bad request, and nothing is recorded.
func TestRecordRefusesUnstorableText(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	ctx := context.Background()
	o, err := org.NewService(gdb, log).EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(t, err)
	actor := authz.WithSubject(ctx, authz.Subject{UserID: "usr-1", Name: "Ann", OrganizationID: o.ID, Role: authz.RoleOwner})
	err = log.Record(actor, audit.Entry{Action: "test.event", TargetType: "thing", TargetID: "t", Data: map[string]any{"reason": "a\x00b"}})
	require.ErrorIs(t, err, errs.ErrBadRequest)
	n, err := log.Verify(ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, 1, n) // organization.created only
}
