package session_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/session"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func TestLoadIdleLifetimeAndSweep(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	st := session.NewStore(gdb, 30*time.Minute, 12*time.Hour)
	ctx := context.Background()

	fresh, _, err := st.Create(ctx, session.Data{})
	require.NoError(t, err)
	idle, idleSess, err := st.Create(ctx, session.Data{})
	require.NoError(t, err)
	old, oldSess, err := st.Create(ctx, session.Data{})
	require.NoError(t, err)
	require.NoError(t, gdb.Exec("UPDATE sessions SET last_seen_at = now() - interval '31 minutes' WHERE id_hash = ?", idleSess.IDHash).Error)
	require.NoError(t, gdb.Exec("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id_hash = ?", oldSess.IDHash).Error)

	_, err = st.Load(ctx, fresh)
	require.NoError(t, err)
	_, err = st.Load(ctx, "not-a-token")
	require.ErrorIs(t, err, errs.ErrNotFound)

	n, err := st.DeleteOver(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	for _, token := range []string{idle, old} {
		_, err = st.Load(ctx, token)
		require.ErrorIs(t, err, errs.ErrNotFound)
	}
	_, err = st.Load(ctx, fresh)
	require.NoError(t, err)
}

func TestSignInRotatesToken(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	st := session.NewStore(gdb, time.Hour, time.Hour)
	ctx := context.Background()
	require.NoError(t, gdb.Exec("INSERT INTO users (id, issuer, subject) VALUES ('usr-1', 'https://idp', 'sub')").Error)
	anon, anonSess, err := st.Create(ctx, session.Data{Flashes: []session.Flash{{Kind: "info", Message: "before"}}})
	require.NoError(t, err)
	token, sess, err := st.SignIn(ctx, anonSess, "usr-1", nil)
	require.NoError(t, err)
	require.NotEqual(t, anon, token)
	require.NotEqual(t, anonSess.CSRFToken, sess.CSRFToken)
	_, err = st.Load(ctx, anon)
	require.ErrorIs(t, err, errs.ErrNotFound, "the pre-login token must be dead (session fixation)")
	loaded, err := st.Load(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "usr-1", *loaded.UserID)
	require.Empty(t, loaded.Data.Flashes, "nothing of the old session comes along")
}
