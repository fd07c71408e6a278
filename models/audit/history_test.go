package audit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/keyring"
	"gantry/models/org"
)

type fixture struct {
	db      *gorm.DB
	log     *audit.Log
	keys    *keyring.Keyring
	spec    string
	signers *audit.Keys
	exports *audit.Exports
	queued  *[]string
	org     string
	owner   context.Context
	auditor context.Context
	viewer  context.Context
	other   context.Context // an owner of another organization
}

// recordingEnqueuer stands in for the River queue (whose real path the web tests
// drive): it remembers the exports asked for, so the test builds them itself.
type recordingEnqueuer struct{ ids *[]string }

func (r recordingEnqueuer) EnqueueExport(_ context.Context, id string) error {
	*r.ids = append(*r.ids, id)
	return nil
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	ctx := context.Background()
	orgs := org.NewService(gdb, log)
	o, err := orgs.EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(t, err)
	g, err := orgs.EnsureOrganization(ctx, "globex", "Globex")
	require.NoError(t, err)
	spec := keyring.NewKeySpec("k1")
	keys, err := keyring.Parse(spec)
	require.NoError(t, err)
	var queued []string
	signers := audit.NewKeys(gdb, keys)
	as := func(orgID, user string, role authz.Role) context.Context {
		return authz.WithSubject(ctx, authz.Subject{UserID: user, Name: "User " + user, OrganizationID: orgID, Role: role})
	}
	return fixture{db: gdb, log: log, keys: keys, spec: spec, signers: signers, queued: &queued,
		exports: audit.NewExports(gdb, log, keys, signers, recordingEnqueuer{&queued}), org: o.ID,
		owner: as(o.ID, "usr-owner", authz.RoleOwner), auditor: as(o.ID, "usr-auditor", authz.RoleAuditor),
		viewer: as(o.ID, "usr-viewer", authz.RoleViewer), other: as(g.ID, "usr-other", authz.RoleOwner)}
}

// seed records n events in acme, alternating between two environments, workspaces and
// actors, with every third a run's event.
func (f fixture) seed(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		who := []string{"usr-ann", "usr-bob"}[i%2]
		ctx := authz.WithSubject(context.Background(), authz.Subject{UserID: who, Name: who, OrganizationID: f.org, Role: authz.RoleOperator})
		e := audit.Entry{Action: "workspace.created", TargetType: "workspace", TargetID: fmt.Sprintf("ws-%d", i%2),
			EnvironmentID: fmt.Sprintf("env-%d", i%2), Data: map[string]any{"i": i}}
		if i%3 == 0 {
			e = audit.Entry{Action: "run.queued", TargetType: "run", TargetID: fmt.Sprintf("run-%d", i), WorkspaceID: fmt.Sprintf("ws-%d", i%2),
				EnvironmentID: fmt.Sprintf("env-%d", i%2), Data: map[string]any{"number": i, "reason": "<b>&\"quoted\"</b>"}}
		}
		require.NoError(t, f.log.Record(ctx, e))
	}
}

func TestScopesAreRecordedAndHashed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t, 6)
	page, err := f.log.History(f.auditor, audit.Query{RunID: "run-3"})
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	ev := page.Events[0]
	require.Equal(t, "run-3", ev.RunID, "a run's event is scoped to its run by its target")
	require.Equal(t, "ws-1", ev.WorkspaceID)
	require.Equal(t, "env-1", ev.EnvironmentID)
	body, err := ev.Body()
	require.NoError(t, err)
	require.Contains(t, string(body), `"run_id":"run-3"`, "the scope is part of the hashed bytes")

	n, err := f.log.Verify(context.Background(), f.org)
	require.NoError(t, err)
	require.Equal(t, 7, n)
	// Moving an event to another workspace breaks the chain.
	require.NoError(t, f.db.Exec("ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update_delete").Error)
	require.NoError(t, f.db.Exec("UPDATE audit_events SET workspace_id = 'ws-0' WHERE organization_id = ? AND seq = ?", f.org, ev.Seq).Error)
	_, err = f.log.Verify(context.Background(), f.org)
	require.ErrorIs(t, err, audit.ErrChainBroken)
}

func TestEventTimeFollowsTheSequence(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A transaction that began before the event ahead of it in the chain (now() is its
	// start) still dates its event no earlier than that event.
	err := db.Tx(f.owner, f.db, func(ctx context.Context) error {
		var started time.Time
		require.NoError(t, db.Conn(ctx, f.db).Raw("SELECT now()").Scan(&started).Error)
		done := make(chan error)
		go func() {
			done <- f.log.Record(f.auditor, audit.Entry{Action: "test.first", TargetType: "thing", TargetID: "a"})
		}()
		require.NoError(t, <-done)
		return f.log.Record(ctx, audit.Entry{Action: "test.second", TargetType: "thing", TargetID: "b"})
	})
	require.NoError(t, err)
	page, err := f.log.History(f.auditor, audit.Query{})
	require.NoError(t, err)
	require.Equal(t, "test.second", page.Events[0].Action)
	require.Equal(t, "test.first", page.Events[1].Action)
	require.False(t, page.Events[0].OccurredAt.Before(page.Events[1].OccurredAt), "%s before %s", page.Events[0].OccurredAt, page.Events[1].OccurredAt)
}

func TestHistoryFiltersAndKeysetPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t, 120)

	// Every page newest first, no event twice, none lost.
	var seen []int64
	q := audit.Query{Limit: 25}
	for {
		page, err := f.log.History(f.auditor, q)
		require.NoError(t, err)
		for _, e := range page.Events {
			seen = append(seen, e.Seq)
		}
		if page.Next == 0 {
			break
		}
		q.Before = page.Next
	}
	require.Len(t, seen, 121) // with organization.created
	for i := 1; i < len(seen); i++ {
		require.Equal(t, seen[i-1]-1, seen[i])
	}

	count := func(q audit.Query) int {
		q.Limit = audit.MaxPage
		page, err := f.log.History(f.auditor, q)
		require.NoError(t, err)
		return len(page.Events)
	}
	require.Equal(t, 60, count(audit.Query{ActorID: "usr-ann"}))
	require.Equal(t, 40, count(audit.Query{Action: "run.queued"}))
	require.Equal(t, 60, count(audit.Query{EnvironmentID: "env-1"}))
	require.Equal(t, 60, count(audit.Query{WorkspaceID: "ws-0"}))
	require.Equal(t, 20, count(audit.Query{WorkspaceID: "ws-0", Action: "run.queued"}))
	require.Equal(t, 1, count(audit.Query{RunID: "run-9"}))
	require.Equal(t, 0, count(audit.Query{RunID: "run-1"}))
	require.Equal(t, 121, count(audit.Query{From: time.Now().Add(-time.Hour)}))
	require.Equal(t, 0, count(audit.Query{To: time.Now().Add(-time.Hour)}))

	// Bad filters are named, nothing is read.
	_, err := f.log.History(f.auditor, audit.Query{From: time.Now(), To: time.Now().Add(-time.Hour), Limit: 9999, RunID: "run\x00"})
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Contains(t, v.Fields, "to")
	require.Contains(t, v.Fields, "limit")
	require.Contains(t, v.Fields, "run")

	// Only audit readers read it, and only their own organization's.
	_, err = f.log.History(f.viewer, audit.Query{})
	require.ErrorIs(t, err, errs.ErrForbidden)
	other, err := f.log.History(f.other, audit.Query{Limit: audit.MaxPage})
	require.NoError(t, err)
	require.Len(t, other.Events, 1, "globex sees its own creation only")
}

func TestChainCheckpointAdvancesAndFindsTheBrokenLink(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t, 30)
	state, err := f.log.Chain(f.auditor)
	require.NoError(t, err)
	require.True(t, state.CheckedAt.IsZero(), "never checked")
	require.EqualValues(t, 31, state.Head)

	orgs, err := f.log.Organizations(context.Background())
	require.NoError(t, err)
	require.Len(t, orgs, 2)
	require.Contains(t, orgs, f.org)

	state, err = f.log.Advance(context.Background(), f.org, 10)
	require.NoError(t, err)
	require.EqualValues(t, 10, state.VerifiedSeq, "the budget bounds one check")
	state, err = f.log.Advance(context.Background(), f.org, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 31, state.VerifiedSeq)
	require.True(t, state.Intact())

	f.seed(t, 5)
	require.NoError(t, f.db.Exec("ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update_delete").Error)
	require.NoError(t, f.db.Exec("UPDATE audit_events SET actor_name = 'Mallory' WHERE organization_id = ? AND seq = 34", f.org).Error)
	state, err = f.log.Advance(context.Background(), f.org, 1000)
	require.NoError(t, err)
	require.False(t, state.Intact())
	require.EqualValues(t, 34, state.BrokenSeq)
	require.EqualValues(t, 33, state.VerifiedSeq)
	// The column was edited, the stored body and its hash were not.
	require.Contains(t, state.BrokenReason, "event 34's stored body differs from its columns")

	shown, err := f.log.Chain(f.auditor)
	require.NoError(t, err)
	require.EqualValues(t, 34, shown.BrokenSeq, "the page reads the checkpoint, which stays at the break")
	require.EqualValues(t, 36, shown.Head)
}

// exportAll requests and builds an export, returning the file's bytes.
func (f fixture) exportAll(t *testing.T, ctx context.Context, req audit.ExportRequest) (audit.Export, []byte) {
	t.Helper()
	e, err := f.exports.Request(ctx, req)
	require.NoError(t, err)
	require.Equal(t, audit.ExportQueued, e.Status)
	require.Contains(t, *f.queued, e.ID)
	require.NoError(t, f.exports.Build(context.Background(), e.ID))
	e, err = f.exports.Get(ctx, e.ID)
	require.NoError(t, err)
	require.Equal(t, audit.ExportReady, e.Status, e.Error)
	r, err := f.exports.Reader(ctx, e)
	require.NoError(t, err)
	data, err := io.ReadAll(r)
	require.NoError(t, err)
	require.EqualValues(t, *e.Size, len(data))
	return e, data
}

func (f fixture) trust(t *testing.T) exportfile.Trust {
	t.Helper()
	set, err := f.signers.Published(f.auditor)
	require.NoError(t, err)
	return exportfile.Trust{Keys: &set}
}

func TestExportsVerifyOfflineAndResumeByteIdentical(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.exports.SetChunkSize(4096) // many chunks, so ranges cross their boundaries
	f.seed(t, 200)
	all := audit.ExportRequest{Format: exportfile.JSONL, Query: audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}}
	e, data := f.exportAll(t, f.auditor, all)
	result := exportfile.Verify(bytes.NewReader(data), f.trust(t))
	require.True(t, result.OK, result.Verdict)
	require.Contains(t, result.Verdict, "OK 201 events, seq 1..201, chain verified from its anchor")
	require.EqualValues(t, 201, e.EventsDone)
	require.Greater(t, *e.Size, int64(10*4096))

	// Requesting and finishing an export are audit events; neither is in the export.
	page, err := f.log.History(f.auditor, audit.Query{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, "audit.exported", page.Events[0].Action)
	require.Equal(t, "audit.export_requested", page.Events[1].Action)
	require.Contains(t, string(page.Events[0].Data), e.SHA256)

	// A window that starts mid-chain verifies on its own with its anchor.
	page, err = f.log.History(f.auditor, audit.Query{Before: 150, Limit: 1})
	require.NoError(t, err)
	mid := audit.ExportRequest{Format: exportfile.CSV, Query: audit.Query{From: page.Events[0].OccurredAt, To: time.Now().Add(time.Hour)}}
	_, midData := f.exportAll(t, f.auditor, mid)
	result = exportfile.Verify(bytes.NewReader(midData), f.trust(t))
	require.True(t, result.OK, result.Verdict)
	require.NotEmpty(t, result.Manifest.Anchor)
	require.LessOrEqual(t, result.Manifest.FirstSeq, int64(149))

	// A filtered export verifies event by event.
	filtered := all
	filtered.Query.WorkspaceID = "ws-1"
	_, fdata := f.exportAll(t, f.auditor, filtered)
	result = exportfile.Verify(bytes.NewReader(fdata), f.trust(t))
	require.True(t, result.OK, result.Verdict)
	require.Contains(t, result.Verdict, "filtered export")
	require.EqualValues(t, 100, result.Manifest.Events)

	// Ranges: a download cut off and resumed is byte-identical.
	r, err := f.exports.Reader(f.auditor, e)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.ServeContent(w, req, "x.jsonl", time.Now(), r)
	}))
	defer srv.Close()
	cut := len(data)/3 + 17
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-", cut))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Equal(t, data, append(append([]byte{}, data[:cut]...), rest...))

	// A chunk altered in the database does not open.
	require.NoError(t, f.db.Exec("UPDATE audit_export_chunks SET ciphertext = set_byte(ciphertext, 5, get_byte(ciphertext, 5) # 1) WHERE export_id = ? AND n = 2", e.ID).Error)
	r, err = f.exports.Reader(f.auditor, e)
	require.NoError(t, err)
	_, err = io.ReadAll(r)
	require.ErrorContains(t, err, "export chunk 2 does not open")
}

// TestEventsWithoutStoredBodyExportTheSame: events recorded before bodies were stored
// (body NULL) are rebuilt from their columns; the export is byte for byte the one the
// stored bodies make, and verifies.
func TestEventsWithoutStoredBodyExportTheSame(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seed(t, 40)
	req := audit.ExportRequest{Format: exportfile.JSONL, Query: audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}}
	e, stored := f.exportAll(t, f.auditor, req)

	require.NoError(t, f.db.Exec("ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update_delete").Error)
	require.NoError(t, f.db.Exec("UPDATE audit_events SET body = NULL WHERE organization_id = ? AND seq <= ?", f.org, e.LastSeq).Error)
	_, rebuilt := f.exportAll(t, f.auditor, req)
	result := exportfile.Verify(bytes.NewReader(rebuilt), f.trust(t))
	require.True(t, result.OK, result.Verdict)
	events := func(file []byte) []string { // the event lines: the manifests differ (id, time)
		lines := strings.Split(strings.TrimSpace(string(file)), "\n")
		return lines[:len(lines)-1]
	}
	// The second export also holds the first one's two audit events (bodies stored).
	before, after := events(stored), events(rebuilt)
	require.Len(t, before, int(e.EventsDone))
	require.Len(t, after, len(before)+2)
	for i := range before {
		require.Equal(t, before[i], after[i], "line %d", i+1)
	}
}

func TestExportsAreForAuditReadersOfTheirOrganization(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := audit.ExportRequest{Format: exportfile.CSV, Query: audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}}
	_, err := f.exports.Request(f.viewer, req)
	require.ErrorIs(t, err, errs.ErrForbidden)
	e, err := f.exports.Request(f.auditor, req)
	require.NoError(t, err)
	_, err = f.exports.Get(f.other, e.ID)
	require.ErrorIs(t, err, errs.ErrNotFound, "another organization's export does not exist for them")
	list, err := f.exports.List(f.other, 10)
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = f.exports.Request(f.auditor, audit.ExportRequest{Format: "xml", Query: audit.Query{To: time.Now()}})
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "%v", err)
	require.Contains(t, v.Fields, "format")
	require.Contains(t, v.Fields, "from")
}

func TestSigningKeysRotateAndStayPublished(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := audit.ExportRequest{Format: exportfile.JSONL, Query: audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}}
	_, before := f.exportAll(t, f.auditor, req)
	first, err := f.signers.Published(f.viewer)
	require.NoError(t, err, "every member may read the organization's public keys")
	require.Len(t, first.Keys, 1)

	n, err := f.signers.RotateSigning(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n, "acme had a key; globex gets its own on first use")
	_, after := f.exportAll(t, f.auditor, req)

	set, err := f.signers.Published(f.auditor)
	require.NoError(t, err)
	require.Len(t, set.Keys, 2)
	require.Nil(t, set.Keys[0].RetiredAt, "the current key first")
	require.NotNil(t, set.Keys[1].RetiredAt)
	require.Equal(t, first.Keys[0].KeyID, set.Keys[1].KeyID)
	trust := exportfile.Trust{Keys: &set}
	for _, data := range [][]byte{before, after} {
		r := exportfile.Verify(bytes.NewReader(data), trust)
		require.True(t, r.OK, r.Verdict)
	}
	require.NotEqual(t, exportfile.Verify(bytes.NewReader(before), trust).Manifest.KeyID, exportfile.Verify(bytes.NewReader(after), trust).Manifest.KeyID)

	// Another organization's key set is its own.
	theirs, err := f.signers.Published(f.other)
	require.NoError(t, err)
	require.Len(t, theirs.Keys, 1)
	require.NotEqual(t, set.Keys[0].KeyID, theirs.Keys[0].KeyID)
	r := exportfile.Verify(bytes.NewReader(after), exportfile.Trust{Keys: &theirs})
	require.False(t, r.OK)

	// The seed is sealed: its bytes are nowhere in clear.
	var sealed []byte
	require.NoError(t, f.db.Raw("SELECT ciphertext FROM audit_signing_keys WHERE kid = ?", set.Keys[0].KeyID).Row().Scan(&sealed))
	require.Len(t, sealed, 32+16, "stored as AES-GCM ciphertext of the 32-byte seed, not the seed")

	// Re-wrapped under a new key-encryption key, the keys open with it alone.
	newSpec := keyring.NewKeySpec("k2")
	both, err := keyring.Parse(newSpec + "," + f.spec)
	require.NoError(t, err)
	m, err := audit.RewrapSigningKeys(context.Background(), f.db, both)
	require.NoError(t, err)
	require.Equal(t, 3, m)
	onlyNew, err := keyring.Parse(newSpec)
	require.NoError(t, err)
	signer, err := audit.NewKeys(f.db, onlyNew).Signer(context.Background(), f.org)
	require.NoError(t, err)
	require.Equal(t, set.Keys[0].KeyID, signer.KeyID())
}
