// Package errs holds the domain errors every service returns and the web layer maps to
// HTTP statuses in one place: not found 404, forbidden 403, conflict 409, invalid 422,
// rate limited 429.
package errs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

var (
	// ErrNotFound covers both "does not exist" and "belongs to another organization":
	// a caller must not be able to tell the two apart.
	ErrNotFound = errors.New("not found")
	// ErrForbidden means the subject is known but its role does not allow the action.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthenticated means there is no signed-in subject at all.
	ErrUnauthenticated = errors.New("not signed in")
	// ErrConflict means the request clashes with the current state (a duplicate, a race).
	ErrConflict = errors.New("conflict")
	// ErrStaleEvidence means a decision names other evidence than the run now carries
	// (another plan, config, predecessor state or policy result), or the run went STALE:
	// reload and decide again. A conflict (409).
	ErrStaleEvidence = fmt.Errorf("stale evidence: %w", ErrConflict)
	// ErrApprovalExpired means a decision came after the run's decision deadline or
	// approval validity, judged by the database clock when it commits. A conflict (409).
	ErrApprovalExpired = fmt.Errorf("approval expired: %w", ErrConflict)
	// ErrBadRequest means the request itself is malformed (bad bytes, a broken body): 400.
	ErrBadRequest = errors.New("bad request")
	// ErrRateLimited means the client sent more requests of a kind than its limit allows
	// (web/ratelimit.go); nothing was done, and it may try again later: 429.
	ErrRateLimited = errors.New("rate limited")
)

// Code is an error's stable machine code, carried by JSON problem documents so scripts
// need not read messages.
type Code string

const (
	CodeNotFound        Code = "NOT_FOUND"
	CodeForbidden       Code = "FORBIDDEN"
	CodeUnauthenticated Code = "UNAUTHENTICATED"
	CodeConflict        Code = "CONFLICT"
	CodeStaleEvidence   Code = "STALE_EVIDENCE"
	CodeApprovalExpired Code = "APPROVAL_EXPIRED"
	CodeInvalidInput    Code = "INVALID_INPUT"
	CodeBadRequest      Code = "BAD_REQUEST"
	CodeRateLimited     Code = "RATE_LIMITED"
	CodeInternal        Code = "INTERNAL"
)

// CodeOf is err's code: the most specific sentinel it wraps, INTERNAL when none.
func CodeOf(err error) Code {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrStaleEvidence):
		return CodeStaleEvidence
	case errors.Is(err, ErrApprovalExpired):
		return CodeApprovalExpired
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrForbidden):
		return CodeForbidden
	case errors.Is(err, ErrUnauthenticated):
		return CodeUnauthenticated
	case errors.Is(err, ErrConflict):
		return CodeConflict
	case errors.Is(err, ErrBadRequest):
		return CodeBadRequest
	case errors.Is(err, ErrRateLimited):
		return CodeRateLimited
	case transientConflict(err):
		return CodeConflict
	}
	if _, ok := AsValidation(err); ok {
		return CodeInvalidInput
	}
	return CodeInternal
}

// transientConflict reports a database error that means "another change got there at
// the same moment, nothing was done" (a deadlock or serialization failure, SQLSTATE
// 40P01 or 40001), wherever it was not translated: a conflict to retry, not a crash.
func transientConflict(err error) bool {
	var state interface{ SQLState() string }
	if !errors.As(err, &state) {
		return false
	}
	code := state.SQLState()
	return code == "40P01" || code == "40001"
}

// Validation carries one message per offending input field. Services return it before
// writing anything, so a 422 never leaves a partial change behind.
type Validation struct {
	Fields map[string]string
}

// Add records a message for field unless one is already there (the first problem
// with a field is the one a person should fix first).
func (v *Validation) Add(field, message string) {
	if v.Fields == nil {
		v.Fields = map[string]string{}
	}
	if _, ok := v.Fields[field]; !ok {
		v.Fields[field] = message
	}
}

// Err returns v as an error when it holds any message, else nil.
func (v *Validation) Err() error {
	if len(v.Fields) == 0 {
		return nil
	}
	return v
}

func (v *Validation) Error() string {
	keys := make([]string, 0, len(v.Fields))
	for k := range v.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+v.Fields[k])
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// AsValidation unwraps err into a *Validation when it is one.
func AsValidation(err error) (*Validation, bool) {
	var v *Validation
	ok := errors.As(err, &v)
	return v, ok
}

// Explained is a domain error with a message written for the person who caused it: the
// error page shows Message instead of its generic text (which hides internal details).
type Explained struct {
	Err     error // ErrForbidden, ErrConflict, ...
	Message string
}

func (e *Explained) Error() string { return e.Message + ": " + e.Err.Error() }
func (e *Explained) Unwrap() error { return e.Err }

// Explain wraps err with a message for the person.
func Explain(err error, message string) error { return &Explained{Err: err, Message: message} }
