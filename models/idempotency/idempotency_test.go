package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/bench"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/idempotency"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// members creates organizations and users and returns a context acting as each member,
// keyed "org/user".
func members(t *testing.T, gdb *gorm.DB, pairs ...string) map[string]context.Context {
	t.Helper()
	out := map[string]context.Context{}
	for _, p := range pairs {
		orgID, userID, _ := strings.Cut(p, "/")
		require.NoError(t, gdb.Exec("INSERT INTO organizations (id, slug, name) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", orgID, orgID, orgID).Error)
		require.NoError(t, gdb.Exec("INSERT INTO users (id, issuer, subject) VALUES (?, 'https://idp', ?) ON CONFLICT DO NOTHING", userID, userID).Error)
		require.NoError(t, gdb.Exec("INSERT INTO memberships (organization_id, user_id, role) VALUES (?, ?, 'admin')", orgID, userID).Error)
		out[p] = authz.WithSubject(context.Background(), authz.Subject{OrganizationID: orgID, UserID: userID, Name: userID, Role: authz.RoleAdmin})
	}
	return out
}

// counter is a decision that counts its runs and renames its organization, so a test
// sees whether its writes committed with the key.
type counter struct {
	gdb  *gorm.DB
	runs atomic.Int32
	err  error
}

func (c *counter) decide(ctx context.Context) (idempotency.Outcome, error) {
	c.runs.Add(1)
	subject, _ := authz.SubjectFrom(ctx)
	if err := db.Conn(ctx, c.gdb).Exec("UPDATE organizations SET name = name || '+' WHERE id = ?", subject.OrganizationID).Error; err != nil {
		return idempotency.Outcome{}, err
	}
	if c.err != nil {
		return idempotency.Outcome{}, c.err
	}
	return idempotency.Outcome{Status: 303, Location: "/runs/run-1", Flash: "Approved."}, nil
}

func orgName(t *testing.T, gdb *gorm.DB, id string) string {
	t.Helper()
	var name string
	require.NoError(t, gdb.Raw("SELECT name FROM organizations WHERE id = ?", id).Scan(&name).Error)
	return name
}

func countKeys(t *testing.T, gdb *gorm.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, gdb.Raw("SELECT count(*) FROM idempotency_keys").Scan(&n).Error)
	return n
}

func fieldError(t *testing.T, err error) string {
	t.Helper()
	v, ok := errs.AsValidation(err)
	require.True(t, ok, "want a validation error, got %v", err)
	return v.Fields[idempotency.Field]
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	form := url.Values{"_csrf": {"a"}, "idempotency_key": {"k1"}, "plan_digest": {"sha256:1"}, "reason": {"because"}}
	base := idempotency.Fingerprint("POST", "/runs/run-1/reject", form)
	require.True(t, strings.HasPrefix(base, "sha256:"))

	same := url.Values{"reason": {"because"}, "plan_digest": {"sha256:1"}, "_csrf": {"another session"}, "idempotency_key": {"k2"}}
	require.Equal(t, base, idempotency.Fingerprint("POST", "/runs/run-1/reject", same), "CSRF token, key and field order do not count")
	for name, other := range map[string]string{
		"method": idempotency.Fingerprint("PUT", "/runs/run-1/reject", form),
		"path":   idempotency.Fingerprint("POST", "/runs/run-2/reject", form),
		"value":  idempotency.Fingerprint("POST", "/runs/run-1/reject", url.Values{"plan_digest": {"sha256:1"}, "reason": {"because!"}}),
		"field":  idempotency.Fingerprint("POST", "/runs/run-1/reject", url.Values{"plan_digest": {"sha256:1"}, "reason": {"because"}, "confirm": {""}}),
		// Field boundaries are unambiguous: a value cannot pose as another field.
		"smuggled": idempotency.Fingerprint("POST", "/runs/run-1/reject", url.Values{"plan_digest": {"sha256:1&reason=because"}}),
	} {
		require.NotEqual(t, base, other, name)
	}
}

func TestNewKeyIsFreshAndURLSafe(t *testing.T) {
	t.Parallel()
	a, b := idempotency.NewKey(), idempotency.NewKey()
	require.NotEqual(t, a, b)
	require.Len(t, a, 22) // 128 bits, base64url without padding
	require.Equal(t, url.QueryEscape(a), a)
}

func TestDoRunsOnceAndReplays(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}
	req := idempotency.Request{Key: idempotency.NewKey(), Hash: "sha256:1"}

	out, replayed, err := st.Do(ctx, req, c.decide)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, idempotency.Outcome{Status: 303, Location: "/runs/run-1", Flash: "Approved."}, out)

	again, replayed, err := st.Do(ctx, req, c.decide)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, out, again, "the repeat gets the same response")
	require.EqualValues(t, 1, c.runs.Load(), "the decision ran once")
	require.Equal(t, "org-a+", orgName(t, gdb, "org-a"))
}

func TestDoRefusesTheKeyWithOtherValues(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}
	key := idempotency.NewKey()
	_, _, err := st.Do(ctx, idempotency.Request{Key: key, Hash: "sha256:1"}, c.decide)
	require.NoError(t, err)

	_, _, err = st.Do(ctx, idempotency.Request{Key: key, Hash: "sha256:2"}, c.decide)
	require.Equal(t, "This form was already submitted with other values; reload the page.", fieldError(t, err))
	require.EqualValues(t, 1, c.runs.Load())
	require.Equal(t, "org-a+", orgName(t, gdb, "org-a"))
	// The first request's record stays as it was.
	out, replayed, err := st.Do(ctx, idempotency.Request{Key: key, Hash: "sha256:1"}, c.decide)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, "/runs/run-1", out.Location)
}

func TestDoNeedsAKeyAndASubject(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}

	_, _, err := st.Do(ctx, idempotency.Request{Hash: "sha256:1"}, c.decide)
	require.Contains(t, fieldError(t, err), "Every Gantry form sends one")
	_, _, err = st.Do(ctx, idempotency.Request{Key: strings.Repeat("k", idempotency.MaxKeyLength+1), Hash: "sha256:1"}, c.decide)
	require.Contains(t, fieldError(t, err), "longer than")
	_, _, err = st.Do(context.Background(), idempotency.Request{Key: "k", Hash: "sha256:1"}, c.decide)
	require.ErrorIs(t, err, errs.ErrUnauthenticated)
	require.Zero(t, c.runs.Load())
	require.Zero(t, countKeys(t, gdb))
}

// TestFailedDecisionKeepsTheKey: a decision that fails records nothing and undoes its
// writes with the reservation, so the same key (and other values) may be tried again.
func TestFailedDecisionKeepsTheKey(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb, err: fmt.Errorf("stale evidence: %w", errs.ErrConflict)}
	key := idempotency.NewKey()

	_, _, err := st.Do(ctx, idempotency.Request{Key: key, Hash: "sha256:1"}, c.decide)
	require.ErrorIs(t, err, errs.ErrConflict)
	require.Zero(t, countKeys(t, gdb))
	require.Equal(t, "org-a", orgName(t, gdb, "org-a"), "the failed decision's writes rolled back")

	c.err = nil
	out, replayed, err := st.Do(ctx, idempotency.Request{Key: key, Hash: "sha256:2"}, c.decide)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, "/runs/run-1", out.Location)
	require.EqualValues(t, 2, c.runs.Load())
	require.Equal(t, "org-a+", orgName(t, gdb, "org-a"))
}

func TestKeysBelongToOneMemberOfOneOrganization(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctxs := members(t, gdb, "org-a/usr-1", "org-a/usr-2", "org-b/usr-1")
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}
	key := idempotency.NewKey()
	for _, who := range []string{"org-a/usr-1", "org-a/usr-2", "org-b/usr-1"} {
		_, replayed, err := st.Do(ctxs[who], idempotency.Request{Key: key, Hash: "sha256:" + who}, c.decide)
		require.NoError(t, err, who)
		require.False(t, replayed, who)
	}
	require.EqualValues(t, 3, c.runs.Load())
	require.EqualValues(t, 3, countKeys(t, gdb))
}

func TestOldKeysAreSwept(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}
	for _, key := range []string{"old", "young"} {
		_, _, err := st.Do(ctx, idempotency.Request{Key: key, Hash: "sha256:1"}, c.decide)
		require.NoError(t, err)
	}
	require.NoError(t, gdb.Exec("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'old'").Error)

	// A day later the key is forgotten: other values are a new request, not a clash.
	_, replayed, err := st.Do(ctx, idempotency.Request{Key: "old", Hash: "sha256:2"}, c.decide)
	require.NoError(t, err)
	require.False(t, replayed)
	_, replayed, err = st.Do(ctx, idempotency.Request{Key: "young", Hash: "sha256:1"}, c.decide)
	require.NoError(t, err)
	require.True(t, replayed)
	require.EqualValues(t, 3, c.runs.Load())
}

// inFlight starts a decision with req that holds its transaction open until release is
// closed (then fails with fail, if set), and returns once its key is reserved, with the
// backend pid of its transaction (whose key row a repeat waits for).
func inFlight(t *testing.T, st *idempotency.Store, ctx context.Context, c *counter, req idempotency.Request, fail error) (release chan struct{}, done chan error, pid int) {
	t.Helper()
	reserved, release, done := make(chan int, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		_, _, err := st.Do(ctx, req, func(ctx context.Context) (idempotency.Outcome, error) {
			var pid int
			if err := db.Conn(ctx, c.gdb).Raw("SELECT pg_backend_pid()").Scan(&pid).Error; err != nil {
				return idempotency.Outcome{}, err
			}
			out, err := c.decide(ctx)
			reserved <- pid
			<-release
			if fail != nil {
				return idempotency.Outcome{}, fail
			}
			return out, err
		})
		done <- err
	}()
	pid = bench.Receive(t, "the first request to run", 10*time.Second, reserved)
	return release, done, pid
}

// returnedOf reports whether a result arrived on ch (without waiting), and which.
func returnedOf[T any](ch <-chan T) func() (bool, any) {
	return func() (bool, any) {
		select {
		case v := <-ch:
			return true, v
		default:
			return false, nil
		}
	}
}

// TestConcurrentRepeatWaitsAndReplays: a double submit while the first request is still
// deciding waits for it, then gets its response; the decision runs once.
func TestConcurrentRepeatWaitsAndReplays(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}
	req := idempotency.Request{Key: idempotency.NewKey(), Hash: "sha256:1"}
	release, first, pid := inFlight(t, st, ctx, c, req, nil)

	type result struct {
		out      idempotency.Outcome
		replayed bool
		err      error
	}
	second := make(chan result, 1)
	go func() {
		out, replayed, err := st.Do(ctx, req, c.decide)
		second <- result{out, replayed, err}
	}()
	// The repeat's insert of the key waits for the first request's transaction.
	dbtest.WaitBlockedBy(t, gdb, pid, 1, returnedOf(second))
	close(release)
	require.NoError(t, <-first)
	r := <-second
	require.NoError(t, r.err)
	require.True(t, r.replayed)
	require.Equal(t, "/runs/run-1", r.out.Location)
	require.EqualValues(t, 1, c.runs.Load())
	require.Equal(t, "org-a+", orgName(t, gdb, "org-a"))
}

// TestConcurrentRepeatRunsWhenTheFirstFails: the waiting repeat decides itself when the
// first request failed (nothing of the first was kept).
func TestConcurrentRepeatRunsWhenTheFirstFails(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	c := &counter{gdb: gdb}
	req := idempotency.Request{Key: idempotency.NewKey(), Hash: "sha256:1"}
	release, first, pid := inFlight(t, st, ctx, c, req, errs.ErrConflict)

	second := make(chan error, 1)
	go func() {
		_, replayed, err := st.Do(ctx, req, c.decide)
		if err == nil && replayed {
			err = errors.New("replayed a failed request")
		}
		second <- err
	}()
	// The repeat waits for the first request's transaction, which then fails.
	dbtest.WaitBlockedBy(t, gdb, pid, 1, returnedOf(second))
	close(release)
	require.ErrorIs(t, <-first, errs.ErrConflict)
	require.NoError(t, <-second)
	require.EqualValues(t, 2, c.runs.Load())
	require.Equal(t, "org-a+", orgName(t, gdb, "org-a"), "only the second decision committed")
}

// TestConcurrentRepeatWaitIsBounded: a repeat does not wait forever for a first request
// that hangs; it gives up with a conflict (409) and leaves the first one alone.
func TestConcurrentRepeatWaitIsBounded(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	st.Wait = 200 * time.Millisecond
	c := &counter{gdb: gdb}
	req := idempotency.Request{Key: idempotency.NewKey(), Hash: "sha256:1"}
	release, first, _ := inFlight(t, st, ctx, c, req, nil)

	// The first request still holds its key (release is not closed): the repeat returning at
	// all, with a conflict, is the proof that its wait is bounded; how fast is no test's
	// business on a shared machine.
	_, _, err := st.Do(ctx, req, c.decide)
	require.ErrorIs(t, err, errs.ErrConflict)
	var ex *errs.Explained
	require.ErrorAs(t, err, &ex)
	require.Contains(t, ex.Message, "still being submitted")

	close(release)
	require.NoError(t, <-first)
	require.EqualValues(t, 1, c.runs.Load())
}

// TestDecisionKeepsItsLockTimeout: the bound applies to the key's insert alone; the
// decision's own statements (its row locks) wait as they always did.
func TestDecisionKeepsItsLockTimeout(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	ctx := members(t, gdb, "org-a/usr-1")["org-a/usr-1"]
	st := idempotency.NewStore(gdb)
	var inside string
	_, _, err := st.Do(ctx, idempotency.Request{Key: idempotency.NewKey(), Hash: "sha256:1"}, func(ctx context.Context) (idempotency.Outcome, error) {
		err := db.Conn(ctx, gdb).Raw("SELECT current_setting('lock_timeout')").Scan(&inside).Error
		return idempotency.Outcome{Status: 303, Location: "/"}, err
	})
	require.NoError(t, err)
	require.Equal(t, "0", inside)
}
