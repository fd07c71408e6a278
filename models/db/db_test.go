package db_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/errs"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// TestTranslateEncodingErrors: text PostgreSQL refuses to store (NUL or invalid UTF-8 in
// a text parameter, \u0000 in jsonb) is the request's fault, a 400, not a 500.
func TestTranslateEncodingErrors(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	for name, q := range map[string]struct {
		sql  string
		arg  string
		code string
	}{
		"NUL in text":           {"SELECT ?::text", "a\x00b", "22021"},
		"invalid UTF-8 in text": {"SELECT ?::text", "a\xffb", "22021"},
		"NUL escape in jsonb":   {"SELECT ?::jsonb", `{"a":"\u0000"}`, "22P05"},
	} {
		var out string
		err := gdb.Raw(q.sql, q.arg).Scan(&out).Error
		require.Error(t, err, name)
		require.Contains(t, err.Error(), q.code, name)
		translated := db.Translate(err)
		require.ErrorIs(t, translated, errs.ErrBadRequest, name)
		require.Equal(t, errs.CodeBadRequest, errs.CodeOf(translated), name)
	}
	// Other errors keep their meaning: a type error is Gantry's own bug, still internal.
	var n int
	err := gdb.Raw("SELECT ?::int", "x").Scan(&n).Error
	require.Error(t, err)
	require.Equal(t, errs.CodeInternal, errs.CodeOf(db.Translate(err)))
}
