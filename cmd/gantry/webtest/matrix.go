package webtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/authz"
	"gantry/models/risk"
)

// SaveMatrix saves the default approval matrix changed by edit as organization slug's
// next version, as a new owner of it (through the matrix store: the floors hold).
func (a *App) SaveMatrix(t testing.TB, slug string, edit func(*risk.Matrix)) risk.Version {
	t.Helper()
	m := risk.Default()
	edit(&m)
	owner := a.NewMember(t, slug, "Oona", authz.RoleOwner, true)
	v, err := a.System.Matrix.Save(authz.WithSubject(context.Background(), owner.Subject(time.Now())), m, "set by the test")
	require.NoError(t, err)
	return v
}

// Decision is matrix m's row of level l, to edit.
func Decision(m *risk.Matrix, l risk.Level) *risk.Decision {
	for i := range m.Decisions {
		if m.Decisions[i].Level == l {
			return &m.Decisions[i]
		}
	}
	panic("the matrix has no level " + string(l))
}
