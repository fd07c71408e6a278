package risk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/org"
	"gantry/models/risk"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

type storeFixture struct {
	db         *gorm.DB
	store      *risk.Store
	log        *audit.Log
	orgA, orgB string
	// ownerA, adminA: members of A; ownerB: an owner of B.
	ownerA, adminA, ownerB context.Context
}

// member signs up a real user (versions reference users) and returns its subject's context.
func member(t *testing.T, orgs *org.Service, orgID, name string, role authz.Role) context.Context {
	t.Helper()
	ctx := context.Background()
	u, err := orgs.UpsertLoginUser(ctx, org.Login{Issuer: "https://issuer.test", Subject: name, Email: name + "@example.test", Name: name})
	require.NoError(t, err)
	require.NoError(t, orgs.EnsureMembership(ctx, orgID, u.ID, role))
	return authz.WithSubject(ctx, authz.Subject{UserID: u.ID, Name: name, OrganizationID: orgID, Role: role})
}

func storeSetup(t *testing.T) storeFixture {
	t.Helper()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	orgs := org.NewService(gdb, log)
	ctx := context.Background()
	a, err := orgs.EnsureOrganization(ctx, "a", "A")
	require.NoError(t, err)
	b, err := orgs.EnsureOrganization(ctx, "b", "B")
	require.NoError(t, err)
	return storeFixture{
		db: gdb, store: risk.NewStore(gdb, log, risk.Floors{}), log: log, orgA: a.ID, orgB: b.ID,
		ownerA: member(t, orgs, a.ID, "Olga Owner", authz.RoleOwner),
		adminA: member(t, orgs, a.ID, "Adam Admin", authz.RoleAdmin),
		ownerB: member(t, orgs, b.ID, "Bea Owner", authz.RoleOwner),
	}
}

func (f storeFixture) versions(t *testing.T, orgID string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, f.db.Table("risk_matrix_versions").Where("organization_id = ?", orgID).Count(&n).Error)
	return n
}

func (f storeFixture) matrixEvents(t *testing.T, orgID string) []audit.Event {
	t.Helper()
	var events []audit.Event
	require.NoError(t, f.db.Where("organization_id = ? AND action = 'risk_matrix.updated'", orgID).Order("seq").Find(&events).Error)
	return events
}

func prodAtThree() risk.Matrix {
	m := risk.Default()
	setClass(m, risk.CondProduction, 3)
	return m
}

func TestStoreDefaultUntilSaved(t *testing.T) {
	t.Parallel()
	f := storeSetup(t)
	cur, err := f.store.Current(context.Background(), f.orgA)
	require.NoError(t, err)
	require.Equal(t, risk.Version{OrganizationID: f.orgA, Version: 0, Matrix: risk.Default()}, cur)
	history, err := f.store.History(f.ownerA)
	require.NoError(t, err)
	require.Empty(t, history)
	require.Equal(t, 0, risk.Latest(history).Version)
	require.Equal(t, risk.Default(), risk.Latest(history).Matrix)
}

func TestStoreSaveVersionsAndAudits(t *testing.T) {
	t.Parallel()
	f := storeSetup(t)
	v1, err := f.store.Save(f.ownerA, prodAtThree(), "  production changes need an owner  ")
	require.NoError(t, err)
	require.Equal(t, 1, v1.Version)
	require.Equal(t, f.orgA, v1.OrganizationID)
	require.Equal(t, "production changes need an owner", v1.Comment)
	require.Equal(t, "Olga Owner", v1.CreatedByName)
	require.False(t, v1.CreatedAt.IsZero())
	require.Equal(t, prodAtThree(), v1.Matrix)

	cur, err := f.store.Current(context.Background(), f.orgA)
	require.NoError(t, err)
	require.Equal(t, 1, cur.Version)
	require.Equal(t, prodAtThree(), cur.Matrix)
	require.Equal(t, risk.Class(3), cur.Matrix.Assess(risk.Facts{Kind: risk.KindApply, HasChanges: true, Create: 1, Tier: "production"}).Class)

	// The creator is a user reference, not only a name.
	var createdBy string
	require.NoError(t, f.db.Raw("SELECT created_by FROM risk_matrix_versions WHERE organization_id = ? AND version = 1", f.orgA).Scan(&createdBy).Error)
	owner, _ := authz.SubjectFrom(f.ownerA)
	require.Equal(t, owner.UserID, createdBy)

	m2 := prodAtThree()
	setDecision(m2, risk.Level2, func(d *risk.Decision) { d.Escalation, d.EscalateAfterHours = risk.ApproverEnvOwners, 4 })
	v2, err := f.store.SaveOnto(f.ownerA, 1, m2, "")
	require.NoError(t, err)
	require.Equal(t, 2, v2.Version)

	// Saving what is current changes nothing and audits nothing.
	same, err := f.store.Save(f.ownerA, m2, "again")
	require.NoError(t, err)
	require.Equal(t, 2, same.Version)
	require.EqualValues(t, 2, f.versions(t, f.orgA))

	history, err := f.store.History(f.adminA)
	require.NoError(t, err)
	require.Len(t, history, 2)
	require.Equal(t, []int{2, 1}, []int{history[0].Version, history[1].Version})
	require.Equal(t, m2, history[0].Matrix)
	require.Equal(t, risk.Latest(history), history[0])

	events := f.matrixEvents(t, f.orgA)
	require.Len(t, events, 2)
	var data struct {
		BeforeVersion int           `json:"before_version"`
		AfterVersion  int           `json:"after_version"`
		Changes       []risk.Change `json:"changes"`
		Comment       string        `json:"comment"`
	}
	require.NoError(t, json.Unmarshal(events[0].Data, &data))
	require.Equal(t, 0, data.BeforeVersion)
	require.Equal(t, 1, data.AfterVersion)
	require.Equal(t, []risk.Change{{Row: "rule production_change", Field: "class", Before: "2", After: "3"}}, data.Changes)
	require.Equal(t, "production changes need an owner", data.Comment)
	require.Equal(t, "risk_matrix", events[0].TargetType)
	require.Equal(t, "1", events[0].TargetID)
	require.Equal(t, owner.UserID, events[0].ActorID)
	require.NoError(t, json.Unmarshal(events[1].Data, &data))
	require.Equal(t, 1, data.BeforeVersion)
	require.Equal(t, 2, data.AfterVersion)
	require.Equal(t, []risk.Change{{Row: "decision 2", Field: "escalation", Before: "none", After: "environment_owners"},
		{Row: "decision 2", Field: "escalate_after_hours", Before: "0", After: "4"}}, data.Changes)
	n, err := f.log.Verify(context.Background(), f.orgA)
	require.NoError(t, err)
	require.Positive(t, n)

	// Versions are append-only.
	require.ErrorContains(t, f.db.Exec("UPDATE risk_matrix_versions SET comment = 'rewritten'").Error, "append-only")
	require.ErrorContains(t, f.db.Exec("DELETE FROM risk_matrix_versions").Error, "append-only")
}

func TestStoreSaveRefusals(t *testing.T) {
	t.Parallel()
	f := storeSetup(t)

	// Only owners edit the matrix; nobody signed in, nobody at all.
	admin, _ := authz.SubjectFrom(f.adminA)
	for _, role := range []authz.Role{authz.RoleViewer, authz.RoleOperator, authz.RoleAdmin, authz.RoleAuditor} {
		admin.Role = role
		_, err := f.store.Save(authz.WithSubject(context.Background(), admin), prodAtThree(), "")
		require.ErrorIs(t, err, errs.ErrForbidden, role)
	}
	_, err := f.store.Save(context.Background(), prodAtThree(), "")
	require.ErrorIs(t, err, errs.ErrUnauthenticated)
	_, err = f.store.History(context.Background())
	require.ErrorIs(t, err, errs.ErrUnauthenticated)

	// Invalid input: field messages, nothing stored.
	bad := risk.Default()
	setClass(bad, risk.CondDestroy, 5)
	_, err = f.store.Save(f.ownerA, bad, strings.Repeat("x", risk.MaxComment+1))
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Contains(t, v.Fields, "class.destroy")
	require.Contains(t, v.Fields, "comment")
	_, err = f.store.Save(f.ownerA, prodAtThree(), strings.Repeat("é", risk.MaxComment))
	require.NoError(t, err, "the limit counts characters")

	// An edit of an older version is a conflict and writes nothing.
	_, err = f.store.SaveOnto(f.ownerA, 0, risk.Default(), "from a stale page")
	require.ErrorIs(t, err, errs.ErrConflict)
	require.EqualValues(t, 1, f.versions(t, f.orgA))
	require.Len(t, f.matrixEvents(t, f.orgA), 1)
}

func TestStoreTenantIsolation(t *testing.T) {
	t.Parallel()
	f := storeSetup(t)
	_, err := f.store.Save(f.ownerA, prodAtThree(), "a's change")
	require.NoError(t, err)

	history, err := f.store.History(f.ownerB)
	require.NoError(t, err)
	require.Empty(t, history)
	cur, err := f.store.Current(context.Background(), f.orgB)
	require.NoError(t, err)
	require.Equal(t, 0, cur.Version)

	// B's own numbering starts at 1, independent of A's.
	vb, err := f.store.Save(f.ownerB, risk.Default(), "")
	require.NoError(t, err)
	require.Equal(t, 0, vb.Version, "saving the default onto the default changes nothing")
	m := risk.Default()
	setClass(m, risk.CondReplace, 3)
	vb, err = f.store.Save(f.ownerB, m, "")
	require.NoError(t, err)
	require.Equal(t, 1, vb.Version)
	history, err = f.store.History(f.ownerA)
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.Equal(t, "a's change", history[0].Comment)
}

// TestStoreInTransaction: Current reads in the caller's transaction; a rolled-back save
// leaves nothing behind.
func TestStoreInTransaction(t *testing.T) {
	t.Parallel()
	f := storeSetup(t)
	rollback := fmt.Errorf("roll back")
	err := db.Tx(f.ownerA, f.db, func(ctx context.Context) error {
		v, err := f.store.Save(ctx, prodAtThree(), "inside")
		require.NoError(t, err)
		cur, err := f.store.Current(ctx, f.orgA)
		require.NoError(t, err)
		require.Equal(t, v.Version, cur.Version)
		outside, err := f.store.Current(context.Background(), f.orgA)
		require.NoError(t, err)
		require.Equal(t, 0, outside.Version, "not visible before commit")
		return rollback
	})
	require.ErrorIs(t, err, rollback)
	require.Zero(t, f.versions(t, f.orgA))
	require.Empty(t, f.matrixEvents(t, f.orgA))
}

// TestStoreConcurrentSaves: owners saving at once get consecutive versions.
func TestStoreConcurrentSaves(t *testing.T) {
	t.Parallel()
	f := storeSetup(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			// Every save differs from the default and from every other save.
			m := risk.Default()
			r := &m.Rules[1+i]
			r.Class = r.Class%3 + 1
			_, errs[i] = f.store.Save(f.ownerA, m, fmt.Sprintf("save %d", i))
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	var got []int
	require.NoError(t, f.db.Table("risk_matrix_versions").Where("organization_id = ?", f.orgA).Order("version").Pluck("version", &got).Error)
	require.Len(t, got, n)
	for i, v := range got {
		require.Equal(t, i+1, v, "versions are consecutive")
	}
	require.Len(t, f.matrixEvents(t, f.orgA), len(got))
	_, err := f.log.Verify(context.Background(), f.orgA)
	require.NoError(t, err)
}
