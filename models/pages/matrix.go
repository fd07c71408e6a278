package pages

import (
	"context"
	"errors"

	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/risk"
)

// MatrixStore keeps the approval matrix's versions (risk.Store).
type MatrixStore interface {
	History(ctx context.Context) ([]risk.Version, error)
	SaveOnto(ctx context.Context, base int, m risk.Matrix, comment string) (risk.Version, error)
}

// Matrix saves edits of the organization's risk rules and approval matrix.
type Matrix struct {
	Store MatrixStore
}

// MatrixEdit reads an edit of the approval matrix from a form onto the current matrix
// (rule ids, descriptions and order stay; classes and decisions come from the form): the
// matrix, the version the edit started from and its comment.
type MatrixEdit func(current risk.Matrix) (m risk.Matrix, base int, comment string)

// MatrixSave is what saving an edit came to: the version saved, or the edit to draw
// again with its problems (Errors) or against the version saved since it started
// (Conflict); History is the matrix's versions, newest first.
type MatrixSave struct {
	History   []risk.Version
	Saved     *risk.Version
	Submitted risk.Matrix
	Base      int
	Comment   string
	Errors    map[string]string
	// Conflict is the version saved since the edit started (0: none).
	Conflict int
	// CanEdit: the reader may edit the matrix (the form's controls).
	CanEdit bool
}

// MayEditMatrix reports whether s may edit the approval matrix: what the store
// requires of a save (matrix.manage, owners).
func MayEditMatrix(s authz.Subject) bool { return s.Can(authz.PermMatrixManage) }

// Page reads the matrix's versions, the current one drawn in the form, and whether
// the reader may edit it.
func (s Matrix) Page(ctx context.Context) (MatrixSave, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return MatrixSave{}, err
	}
	history, err := s.Store.History(ctx)
	if err != nil {
		return MatrixSave{}, err
	}
	cur := risk.Latest(history)
	return MatrixSave{History: history, Submitted: cur.Matrix, Base: cur.Version, CanEdit: MayEditMatrix(subject)}, nil
}

// Save saves the edit read onto the current matrix. Only owners edit it (the store
// checks); another version saved since the edit started refuses it, to be drawn against
// the version now current.
func (s Matrix) Save(ctx context.Context, edit MatrixEdit) (MatrixSave, error) {
	history, err := s.Store.History(ctx)
	if err != nil {
		return MatrixSave{}, err
	}
	cur := risk.Latest(history)
	subject, _ := authz.SubjectFrom(ctx)
	out := MatrixSave{History: history, CanEdit: MayEditMatrix(subject)}
	out.Submitted, out.Base, out.Comment = edit(cur.Matrix)
	saved, err := s.Store.SaveOnto(ctx, out.Base, out.Submitted, out.Comment)
	if v, ok := errs.AsValidation(err); ok {
		out.Errors = v.Fields
		return out, nil
	}
	if errors.Is(err, errs.ErrConflict) {
		out.Base, out.Conflict = cur.Version, cur.Version
		return out, nil
	}
	if err != nil {
		return MatrixSave{}, err
	}
	out.Saved = &saved
	return out, nil
}
