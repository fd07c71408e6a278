package web_test

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // tofu's Content-MD5
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"gantry/handlers"
	"gantry/models/db/dbtest"
	"gantry/models/state"
	"gantry/models/state/statetest"
)

// The tests below speak to the state backend over HTTP exactly as OpenTofu's http
// backend client does (internal/backend/remote-state/http/client.go, observed in
// shared/notes/opentofu-runner-feasibility.md §4): Basic auth from
// TF_HTTP_USERNAME/PASSWORD, every body sent as application/json with a base64
// Content-MD5, the custom methods LOCK and UNLOCK on the lock address, and ?ID=<lock
// id> on the state upload while tofu holds the lock.

const stateLineage = "6f4d9f65-2b0e-4c3d-a2b7-2a6c3c7b9d10"

// stateServer serves the backend routes on their own echo, outside any session.
func stateServer(t *testing.T, f *statetest.Fixture) string {
	t.Helper()
	e := echo.New()
	handlers.State{Backend: f.Service}.Register(e.Group(""))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv.URL
}

// tofuClient is one tofu process's http backend client.
type tofuClient struct {
	t           *testing.T
	address     string // TF_HTTP_ADDRESS
	lockAddress string // TF_HTTP_LOCK_ADDRESS and TF_HTTP_UNLOCK_ADDRESS
	user, pass  string
	lockID      string // set while it holds the lock, as tofu's httpClient does
	lockInfo    []byte
}

func newTofu(t *testing.T, base, workspaceID, user, pass string) *tofuClient {
	address, lockAddress := state.Addresses(base, workspaceID)
	return &tofuClient{t: t, address: address, lockAddress: lockAddress, user: user, pass: pass}
}

type stateAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error // the request got no answer (send only; do fails the test)
}

func (c *tofuClient) do(method, url string, body []byte, edit ...func(*http.Request)) stateAnswer {
	c.t.Helper()
	a := c.send(method, url, body, edit...)
	require.NoError(c.t, a.err)
	return a
}

// send is do returning the error in the answer instead of failing the test: for a
// client on a goroutine of the test's own.
func (c *tofuClient) send(method, url string, body []byte, edit ...func(*http.Request)) stateAnswer {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return stateAnswer{err: err}
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		sum := md5.Sum(body) //nolint:gosec // tofu's Content-MD5
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	}
	for _, e := range edit {
		e(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stateAnswer{err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return stateAnswer{status: resp.StatusCode, header: resp.Header, body: data, err: err}
}

func (c *tofuClient) get() stateAnswer { return c.do(http.MethodGet, c.address, nil) }

func tofuLockInfo(id, operation string) []byte {
	return []byte(`{"ID":"` + id + `","Operation":"` + operation + `","Info":"","Who":"root@runner","Version":"1.10.10","Created":"2026-01-02T03:04:05.123456789Z","Path":""}`)
}

// lock sends LOCK with a LockInfo of id and remembers it on a 200, as tofu does.
func (c *tofuClient) lock(id string) stateAnswer {
	c.t.Helper()
	a := c.tryLock(id)
	require.NoError(c.t, a.err)
	return a
}

// tryLock is lock returning the error in the answer (for a client on a goroutine).
func (c *tofuClient) tryLock(id string) stateAnswer {
	info := tofuLockInfo(id, "OperationTypeApply")
	a := c.send(handlers.MethodLock, c.lockAddress, info)
	if a.err == nil && a.status == http.StatusOK {
		c.lockID, c.lockInfo = id, info
	}
	return a
}

// unlock sends UNLOCK with the LockInfo it locked with.
func (c *tofuClient) unlock() stateAnswer {
	return c.do(handlers.MethodUnlock, c.lockAddress, c.lockInfo)
}

// forceUnlock is `tofu force-unlock -force id`: a LockInfo carrying only the ID.
func (c *tofuClient) forceUnlock(id string) stateAnswer {
	return c.do(handlers.MethodUnlock, c.lockAddress, []byte(`{"ID":"`+id+`","Operation":"","Info":"","Who":"","Version":"","Created":"0001-01-01T00:00:00Z","Path":""}`))
}

// put uploads a state, with ?ID= while the lock is held.
func (c *tofuClient) put(data []byte, edit ...func(*http.Request)) stateAnswer {
	url := c.address
	if c.lockID != "" {
		url += "?ID=" + c.lockID
	}
	return c.do(http.MethodPost, url, data, edit...)
}

func requireHolder(t *testing.T, a stateAnswer, wantStatus int, holderID string) {
	t.Helper()
	require.Equal(t, wantStatus, a.status, string(a.body))
	var holder struct{ ID, Operation, Who string }
	require.NoError(t, json.Unmarshal(a.body, &holder), string(a.body))
	require.Equal(t, holderID, holder.ID)
	require.Equal(t, "root@runner", holder.Who)
}

// TestStateProtocolRoundTrip follows an apply: no state (204), LOCK, GET, POST under
// the lock, GET returns what was stored, a second (persist-interval) POST, UNLOCK.
func TestStateProtocolRoundTrip(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	c := newTofu(t, base, f.WorkspaceID, user, pass)

	require.Equal(t, http.StatusNoContent, c.get().status)
	require.Equal(t, http.StatusOK, c.lock("7b1d1e5a-0000-4000-8000-000000000001").status)
	require.Equal(t, http.StatusNoContent, c.get().status)

	first := statetest.StateJSON(1, stateLineage, "first")
	require.Equal(t, http.StatusOK, c.put(first).status)
	got := c.get()
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, first, got.body)
	require.Equal(t, "application/json", got.header.Get("Content-Type"))
	sum := md5.Sum(first) //nolint:gosec // tofu's Content-MD5
	require.Equal(t, base64.StdEncoding.EncodeToString(sum[:]), got.header.Get("Content-MD5"))

	second := statetest.StateJSON(2, stateLineage, "second")
	require.Equal(t, http.StatusOK, c.put(second).status)
	require.Equal(t, http.StatusOK, c.put(second).status, "a retried upload of the same state is fine")
	require.Equal(t, http.StatusOK, c.unlock().status)
	require.Equal(t, second, c.get().body)

	// update_method = "PUT" works the same, without a lock (-lock=false sends no ?ID=).
	c.lockID = ""
	third := statetest.StateJSON(3, stateLineage, "third")
	require.Equal(t, http.StatusOK, c.do(http.MethodPut, c.address, third).status)
	require.Equal(t, third, c.get().body)

	var versions []struct {
		Serial  int
		Lineage string
		RunID   string
	}
	require.NoError(t, f.DB.Raw("SELECT serial, lineage, run_id FROM state_versions WHERE workspace_id = ? ORDER BY serial", f.WorkspaceID).Scan(&versions).Error)
	require.Len(t, versions, 3)
	for i, v := range versions {
		require.Equal(t, i+1, v.Serial)
		require.Equal(t, stateLineage, v.Lineage)
		require.Equal(t, f.RunID, v.RunID)
	}

	var events []struct{ Data string }
	require.NoError(t, f.DB.Raw("SELECT data::text AS data FROM audit_events WHERE organization_id = ? AND action = 'state.version_created' ORDER BY seq", f.OrgID).Scan(&events).Error)
	require.Len(t, events, 3)
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(events[0].Data), &data))
	require.EqualValues(t, 1, data["serial"])
	require.Equal(t, stateLineage, data["lineage"])
	require.Equal(t, f.RunID, data["run_id"])
	require.True(t, strings.HasPrefix(data["sha256"].(string), "sha256:"))
	require.NotContains(t, events[0].Data, "first", "the audit log never holds state content")
}

// TestStateLockContention: a second job finds the lock held (423 with the holder's
// LockInfo, which tofu prints), cannot unlock it with its own id (409) nor break it
// with force-unlock, and cannot write under it; the holder can.
func TestStateLockContention(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	aUser, aPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	a := newTofu(t, base, f.WorkspaceID, aUser, aPass)
	otherRun := f.Run(t, f.OrgID, f.WorkspaceID)
	bUser, bPass := f.Issue(t, f.WorkspaceID, otherRun, state.PhaseApply)
	b := newTofu(t, base, f.WorkspaceID, bUser, bPass)

	const holderID = "aaaaaaaa-0000-4000-8000-00000000000a"
	require.Equal(t, http.StatusOK, a.lock(holderID).status)
	require.Equal(t, http.StatusOK, a.lock(holderID).status, "a retried LOCK of its own lock succeeds")

	requireHolder(t, b.lock("bbbbbbbb-0000-4000-8000-00000000000b"), http.StatusLocked, holderID)
	b.lockID, b.lockInfo = "bbbbbbbb-0000-4000-8000-00000000000b", tofuLockInfo("bbbbbbbb-0000-4000-8000-00000000000b", "OperationTypeApply")
	requireHolder(t, b.unlock(), http.StatusConflict, holderID)
	requireHolder(t, b.forceUnlock(holderID), http.StatusConflict, holderID)
	requireHolder(t, b.put(statetest.StateJSON(1, stateLineage, "b")), http.StatusLocked, holderID)
	b.lockID = holderID // even knowing the holder's lock id (it was in the 423 body)
	requireHolder(t, b.put(statetest.StateJSON(1, stateLineage, "b")), http.StatusLocked, holderID)

	// The plan of another run locks too, and is refused the same way.
	planUser, planPass := f.Issue(t, f.WorkspaceID, otherRun, state.PhasePlan)
	requireHolder(t, newTofu(t, base, f.WorkspaceID, planUser, planPass).lock("cccccccc-0000-4000-8000-00000000000c"), http.StatusLocked, holderID)

	require.Equal(t, http.StatusOK, a.put(statetest.StateJSON(1, stateLineage, "a")).status)
	require.Equal(t, http.StatusOK, a.forceUnlock(holderID).status, "force-unlock by its own run releases it")
	require.Equal(t, http.StatusOK, a.unlock().status, "unlocking a free lock again is fine")

	b.lockID = ""
	require.Equal(t, http.StatusOK, b.lock("bbbbbbbb-0000-4000-8000-00000000000b").status, "free again")
	lock, err := f.Service.LockOf(context.Background(), f.WorkspaceID)
	require.NoError(t, err)
	require.True(t, lock.Held)
	require.Equal(t, otherRun, lock.RunID)
	require.Equal(t, int64(2), lock.Fence, "one fence per acquisition")
}

// TestStateRefusesBadWrites: serial regressions and stateLineage changes are 409, a body
// that does not match its Content-MD5 is 400, and nothing of them is stored.
func TestStateRefusesBadWrites(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	c := newTofu(t, base, f.WorkspaceID, user, pass)

	require.Equal(t, http.StatusOK, c.put(statetest.StateJSON(4, stateLineage, "four")).status)
	require.Equal(t, http.StatusConflict, c.put(statetest.StateJSON(3, stateLineage, "three")).status, "serial regression")
	require.Equal(t, http.StatusConflict, c.put(statetest.StateJSON(4, stateLineage, "other four")).status, "same serial, other content")
	require.Equal(t, http.StatusConflict, c.put(statetest.StateJSON(5, "7e0c2c49-1111-4222-8333-444455556666", "five")).status, "lineage change")
	require.Equal(t, http.StatusOK, c.put(statetest.StateJSON(4, stateLineage, "four")).status, "same serial, same content")

	badMD5 := c.put(statetest.StateJSON(5, stateLineage, "five"), func(r *http.Request) {
		sum := md5.Sum([]byte("something else")) //nolint:gosec // tofu's Content-MD5
		r.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	})
	require.Equal(t, http.StatusBadRequest, badMD5.status)
	notBase64 := c.put(statetest.StateJSON(5, stateLineage, "five"), func(r *http.Request) { r.Header.Set("Content-MD5", "%%%") })
	require.Equal(t, http.StatusBadRequest, notBase64.status)
	require.Equal(t, http.StatusBadRequest, c.put([]byte(`{"version":4,"serial":5}`)).status, "no lineage")
	require.Equal(t, http.StatusBadRequest, c.put([]byte(`<html>`)).status)
	require.Equal(t, http.StatusBadRequest, c.do(handlers.MethodLock, c.lockAddress, []byte(`{"Who":"x"}`)).status, "LockInfo without ID")

	// A write naming a lock nobody holds (released, or fenced) is refused.
	c.lockID = "dddddddd-0000-4000-8000-00000000000d"
	require.Equal(t, http.StatusConflict, c.put(statetest.StateJSON(5, stateLineage, "five")).status)

	require.Equal(t, statetest.StateJSON(4, stateLineage, "four"), c.get().body)
	var n int
	require.NoError(t, f.DB.Raw("SELECT count(*) FROM state_versions WHERE workspace_id = ?", f.WorkspaceID).Scan(&n).Error)
	require.Equal(t, 1, n)
}

// TestStateCredentialScope: a credential works for its own workspace only, plan and
// verify credentials never write, and bad, expired or revoked credentials are 401.
func TestStateCredentialScope(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	own := newTofu(t, base, f.WorkspaceID, user, pass)
	require.Equal(t, http.StatusOK, own.put(statetest.StateJSON(1, stateLineage, "mine")).status)

	// The sibling workspace's apply credential, aimed at this workspace: 403 for everything.
	sibUser, sibPass := f.Issue(t, f.SiblingID, f.SiblingRun, state.PhaseApply)
	intruder := newTofu(t, base, f.WorkspaceID, sibUser, sibPass)
	require.Equal(t, http.StatusForbidden, intruder.get().status)
	require.Equal(t, http.StatusForbidden, intruder.lock("eeeeeeee-0000-4000-8000-00000000000e").status)
	require.Equal(t, http.StatusForbidden, intruder.put(statetest.StateJSON(2, stateLineage, "theirs")).status)
	require.Equal(t, http.StatusForbidden, intruder.do(handlers.MethodUnlock, intruder.lockAddress, tofuLockInfo("x", "")).status)
	// Another organization's workspace does not exist for it.
	foreign := newTofu(t, base, f.ForeignID, user, pass)
	require.Equal(t, http.StatusNotFound, foreign.get().status)
	require.Equal(t, http.StatusNotFound, foreign.put(statetest.StateJSON(1, stateLineage, "x")).status)
	require.Equal(t, http.StatusNotFound, newTofu(t, base, "ws-nosuchworkspace", user, pass).get().status)

	// Plan and verify credentials read and lock, but never write.
	for _, phase := range []state.Phase{state.PhasePlan, state.PhaseVerify} {
		u, p := f.Issue(t, f.WorkspaceID, f.RunID, phase)
		c := newTofu(t, base, f.WorkspaceID, u, p)
		require.Equal(t, http.StatusOK, c.get().status, phase)
		require.Equal(t, http.StatusOK, c.lock("ffffffff-0000-4000-8000-00000000000f").status, phase)
		require.Equal(t, http.StatusForbidden, c.put(statetest.StateJSON(2, stateLineage, "plan")).status, phase)
		require.Equal(t, http.StatusOK, c.unlock().status, phase)
	}

	// Bad credentials: 401 with a Basic challenge.
	for name, c := range map[string]*tofuClient{
		"wrong password": newTofu(t, base, f.WorkspaceID, user, pass+"x"),
		"unknown user":   newTofu(t, base, f.WorkspaceID, "stc-nosuchcredential", pass),
		"no credentials": newTofu(t, base, f.WorkspaceID, "", ""),
	} {
		a := c.get()
		require.Equal(t, http.StatusUnauthorized, a.status, name)
		require.Contains(t, a.header.Get("WWW-Authenticate"), "Basic", name)
		require.Equal(t, http.StatusUnauthorized, c.put(statetest.StateJSON(2, stateLineage, "x")).status, name)
	}
	expUser, expPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	require.NoError(t, f.DB.Exec("UPDATE state_credentials SET expires_at = now() - interval '1 second' WHERE id = ?", expUser).Error)
	require.Equal(t, http.StatusUnauthorized, newTofu(t, base, f.WorkspaceID, expUser, expPass).get().status, "expired")
	_, err := f.Service.Revoke(context.Background(), f.RunID)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, own.get().status, "revoked")
	require.Equal(t, http.StatusUnauthorized, own.put(statetest.StateJSON(2, stateLineage, "x")).status, "revoked")
}

// TestStateFenceAndRelease: when the orchestrator declares the lock holder's job dead,
// the lock is released, the fence moves on, the zombie can neither write nor unlock,
// and a fresh credential for the retry locks and writes.
func TestStateFenceAndRelease(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	ctx := context.Background()
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	zombie := newTofu(t, base, f.WorkspaceID, user, pass)
	require.Equal(t, http.StatusOK, zombie.lock("11111111-0000-4000-8000-000000000001").status)
	require.Equal(t, http.StatusOK, zombie.put(statetest.StateJSON(1, stateLineage, "before")).status)
	// A request authenticated a moment before the fence, arriving after it.
	inFlight, err := f.Service.Authenticate(ctx, user, pass)
	require.NoError(t, err)

	// Another run's lock is not touched by fencing this run.
	require.NoError(t, f.Service.FenceAndRelease(ctx, f.SiblingID, f.SiblingRun, "unrelated"))
	before, err := f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.True(t, before.Held)

	require.NoError(t, f.Service.FenceAndRelease(ctx, f.WorkspaceID, f.RunID, "job lost: node gone"))
	after, err := f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.False(t, after.Held)
	require.Equal(t, before.Fence+1, after.Fence)

	require.Equal(t, http.StatusUnauthorized, zombie.put(statetest.StateJSON(2, stateLineage, "zombie")).status)
	require.Equal(t, http.StatusUnauthorized, zombie.unlock().status)
	require.ErrorIs(t, f.Service.Write(ctx, inFlight, f.WorkspaceID, zombie.lockID, statetest.StateJSON(2, stateLineage, "zombie")), state.ErrBadCredentials)

	retryUser, retryPass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	retry := newTofu(t, base, f.WorkspaceID, retryUser, retryPass)
	require.Equal(t, http.StatusOK, retry.lock("22222222-0000-4000-8000-000000000002").status)
	require.Equal(t, statetest.StateJSON(1, stateLineage, "before"), retry.get().body)
	require.Equal(t, http.StatusOK, retry.put(statetest.StateJSON(2, stateLineage, "after")).status)
	require.Equal(t, http.StatusOK, retry.unlock().status)
	final, err := f.Service.LockOf(ctx, f.WorkspaceID)
	require.NoError(t, err)
	require.Equal(t, after.Fence+1, final.Fence, "the fence never goes back")

	require.NoError(t, f.Service.FenceAndRelease(ctx, f.WorkspaceID, f.RunID, "again"), "fencing is idempotent")
	var fenced []struct{ Data string }
	require.NoError(t, f.DB.Raw("SELECT data::text AS data FROM audit_events WHERE organization_id = ? AND action = 'state.lock_fenced' AND target_id = ? ORDER BY seq",
		f.OrgID, f.WorkspaceID).Scan(&fenced).Error)
	require.Len(t, fenced, 2)
	var data map[string]any
	require.NoError(t, json.Unmarshal([]byte(fenced[0].Data), &data))
	require.Equal(t, true, data["released"])
	require.Equal(t, "11111111-0000-4000-8000-000000000001", data["lock_id"])
	require.Equal(t, "job lost: node gone", data["reason"])
	require.EqualValues(t, 1, data["credentials_revoked"])
	_, err = f.Audit.Verify(ctx, f.OrgID)
	require.NoError(t, err)
}

// TestStateEncryptedAtRest: the stored state is sealed: a canary from the state JSON
// is nowhere in the artifacts row, and the artifact store decrypts it back.
func TestStateEncryptedAtRest(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	user, pass := f.Issue(t, f.WorkspaceID, f.RunID, state.PhaseApply)
	c := newTofu(t, base, f.WorkspaceID, user, pass)
	canary := "canary-" + strings.ToLower(strings.ReplaceAll(f.RunID, "-", "")) + "-db-password"
	doc := statetest.StateJSON(1, stateLineage, canary)
	require.Equal(t, http.StatusOK, c.put(doc).status)

	var row struct {
		ID, Kind, KeyID string
		Ciphertext      []byte
		WrappedKey      []byte
	}
	require.NoError(t, f.DB.Raw(`SELECT a.id, a.kind, a.key_id, a.ciphertext, a.wrapped_key FROM artifacts a
		JOIN state_versions v ON v.artifact_id = a.id WHERE v.workspace_id = ?`, f.WorkspaceID).Scan(&row).Error)
	require.Equal(t, "state", row.Kind)
	require.Equal(t, "k1", row.KeyID)
	require.NotEmpty(t, row.Ciphertext)
	require.False(t, bytes.Contains(row.Ciphertext, []byte(canary)))
	require.False(t, bytes.Contains(row.Ciphertext, []byte(`"serial"`)))
	var anywhere int
	require.NoError(t, f.DB.Raw(`SELECT count(*) FROM artifacts WHERE position(convert_to(?, 'UTF8') in ciphertext) > 0`, canary).Scan(&anywhere).Error)
	require.Zero(t, anywhere)
	require.NoError(t, f.DB.Raw(`SELECT count(*) FROM audit_events WHERE data::text LIKE ?`, "%"+canary+"%").Scan(&anywhere).Error)
	require.Zero(t, anywhere)

	plain, _, err := f.Artifacts.Get(context.Background(), f.OrgID, row.ID)
	require.NoError(t, err)
	require.Equal(t, doc, plain)
}

// TestStateConcurrentLock: jobs racing for a free lock get exactly one winner; every
// other one is told who won.
func TestStateConcurrentLock(t *testing.T) {
	t.Parallel()
	f := statetest.New(t)
	base := stateServer(t, f)
	const racers = 8
	clients := make([]*tofuClient, racers)
	for i := range clients {
		u, p := f.Issue(t, f.WorkspaceID, f.Run(t, f.OrgID, f.WorkspaceID), state.PhasePlan)
		clients[i] = newTofu(t, base, f.WorkspaceID, u, p)
	}
	// All of them racing at once, whatever the machine's pace: the test holds the
	// workspace's lock row, so every LOCK queues for it in the database, and lets it go
	// only once all of them wait.
	require.NoError(t, f.DB.Exec("INSERT INTO state_locks (workspace_id, organization_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
		f.WorkspaceID, f.OrgID).Error)
	holder := f.DB.Begin()
	t.Cleanup(func() { holder.Rollback() }) // a failing test lets the contenders go too
	require.NoError(t, holder.Exec("SELECT workspace_id FROM state_locks WHERE workspace_id = ? FOR UPDATE", f.WorkspaceID).Error)
	answers := make([]stateAnswer, racers)
	var finished atomic.Int32
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			defer finished.Add(1)
			answers[i] = c.tryLock(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		})
	}
	dbtest.WaitBlockedBy(t, f.DB, dbtest.BackendPID(t, holder), racers, func() (bool, any) {
		return finished.Load() > 0, "an answer while the lock row was held"
	})
	require.NoError(t, holder.Rollback().Error)
	wg.Wait()
	winner := -1
	for i, a := range answers {
		require.NoError(t, a.err, "racer %d", i)
		if a.status == http.StatusOK {
			require.Equal(t, -1, winner, "two winners")
			winner = i
		}
	}
	require.NotEqual(t, -1, winner)
	for i, a := range answers {
		if i != winner {
			requireHolder(t, a, http.StatusLocked, clients[winner].lockID)
		}
	}
}
