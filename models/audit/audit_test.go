package audit_test

import (
	"context"
	"os"
	"strings"
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

	// Concurrent appends must still form one unbroken chain. Each goroutine keeps its error
	// for the test's goroutine to check: require may only stop the test from there.
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = log.Record(actor, audit.Entry{Action: "test.event", TargetType: "thing", TargetID: "t",
				Data: map[string]any{"i": i, "nested": map[string]any{"z": 1, "a": []int{3, 2}}, "big": int64(1) << 53}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "append %d", i)
	}
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

// TestStoredBodyIsWhatWasHashed: every event keeps the exact bytes its hash covers;
// the database refuses a body that does not match the hash, and the chain check finds
// a body that was rewritten with a matching hash but differs from the event's columns.
func TestStoredBodyIsWhatWasHashed(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	ctx := context.Background()
	o, err := org.NewService(gdb, log).EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(t, err)
	actor := authz.WithSubject(ctx, authz.Subject{UserID: "usr-1", Name: "Ann", OrganizationID: o.ID, Role: authz.RoleOwner})
	require.NoError(t, log.Record(actor, audit.Entry{Action: "test.event", TargetType: "thing", TargetID: "t",
		Data: map[string]any{"b": 2, "a": "x"}}))
	var last audit.Event
	require.NoError(t, gdb.Where("organization_id = ?", o.ID).Order("seq DESC").First(&last).Error)
	rebuilt, err := last.Body()
	require.NoError(t, err)
	require.Equal(t, string(rebuilt), string(last.HashedBody))
	require.Equal(t, audit.HashOf(last.PrevHash, last.HashedBody), last.Hash)

	require.NoError(t, gdb.Exec("ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update_delete").Error)
	forged := []byte(strings.Replace(string(last.HashedBody), `"Ann"`, `"Mallory"`, 1))
	require.NotEqual(t, forged, last.HashedBody)
	require.ErrorContains(t, gdb.Exec("UPDATE audit_events SET body = ? WHERE organization_id = ? AND seq = ?", forged, o.ID, last.Seq).Error,
		"audit_events_body_hash")
	// Body and hash rewritten together: the link holds, the body no longer matches the columns.
	require.NoError(t, gdb.Exec("UPDATE audit_events SET body = ?, hash = ? WHERE organization_id = ? AND seq = ?",
		forged, audit.HashOf(last.PrevHash, forged), o.ID, last.Seq).Error)
	_, err = log.Verify(ctx, o.ID)
	require.ErrorIs(t, err, audit.ErrChainBroken)
	require.ErrorContains(t, err, "stored body differs")
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
