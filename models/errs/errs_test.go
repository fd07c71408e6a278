package errs_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/errs"
)

type sqlState string

func (s sqlState) Error() string    { return "ERROR: deadlock detected (SQLSTATE " + string(s) + ")" }
func (s sqlState) SQLState() string { return string(s) }

func TestCodeOf(t *testing.T) {
	t.Parallel()
	v := &errs.Validation{}
	v.Add("reason", "Say why.")
	cases := map[errs.Code]error{
		errs.CodeStaleEvidence:   fmt.Errorf("deciding: %w", errs.ErrStaleEvidence),
		errs.CodeApprovalExpired: errs.Explain(errs.ErrApprovalExpired, "too late"),
		errs.CodeNotFound:        fmt.Errorf("reading run: %w", errs.ErrNotFound),
		errs.CodeForbidden:       errs.ErrForbidden,
		errs.CodeUnauthenticated: errs.ErrUnauthenticated,
		errs.CodeConflict:        fmt.Errorf("x: %w", errs.ErrConflict),
		errs.CodeBadRequest:      errs.ErrBadRequest,
		errs.CodeRateLimited:     errs.Explain(errs.ErrRateLimited, "try again in 7 seconds"),
		errs.CodeInvalidInput:    fmt.Errorf("validating: %w", v),
		errs.CodeInternal:        errors.New("disk on fire"),
	}
	cases[errs.CodeConflict+"-deadlock"] = fmt.Errorf("locking: %w", sqlState("40P01"))
	for want, err := range cases {
		if strings.HasSuffix(string(want), "-deadlock") {
			want = errs.CodeConflict
		}
		require.Equal(t, want, errs.CodeOf(err), err.Error())
	}
	// The specific conflicts are still conflicts for code that only knows 409.
	require.ErrorIs(t, errs.ErrStaleEvidence, errs.ErrConflict)
	require.ErrorIs(t, errs.ErrApprovalExpired, errs.ErrConflict)
	require.Equal(t, errs.Code(""), errs.CodeOf(nil))
}
