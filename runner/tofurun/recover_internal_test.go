package tofurun

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOnlyStateFailed: an apply counts as applied once its left-behind state is pushed
// only when its output shows that storing the state (and unlocking) was all that
// failed; any other error, or output that does not say so, is a failed apply.
func TestOnlyStateFailed(t *testing.T) {
	const created = "module.bucket.sandbox_bucket.this: Creation complete after 0s [id=bkt-1]\n"
	const saveFailed = "\nError: Failed to save state\n\nError saving state: Failed to upload state: POST http://portal/state/ws-1 giving up after 11 attempt(s)\n"
	const persistFailed = "\nError: Failed to persist state to backend\n\nThe error shown above has prevented OpenTofu from writing the updated state\nto the configured backend.\n"
	const unlockFailed = "\nError: Error releasing the state lock\n\nError message: Failed to unlock: UNLOCK http://portal/state/ws-1/lock giving up after 11 attempt(s)\n"
	const resourceFailed = "\nError: creating bucket: the cloud answered 500\n\n  with module.bucket.sandbox_bucket.logs,\n"
	boxed := func(s string) string {
		var b strings.Builder
		for line := range strings.Lines(s) {
			b.WriteString("│ " + line)
		}
		return b.String()
	}
	for name, c := range map[string]struct {
		log  string
		want bool
	}{
		"state not stored, lock not released": {created + saveFailed + persistFailed + unlockFailed, true},
		"state not stored, lock released":     {created + saveFailed + persistFailed, true},
		"drawn in boxes":                      {created + boxed(saveFailed+persistFailed+unlockFailed), true},
		"a resource failed too":               {created + resourceFailed + saveFailed + persistFailed, false},
		"a resource failed too, in boxes":     {created + boxed(resourceFailed+saveFailed+persistFailed), false},
		"no local file either (state printed)": {created + saveFailed + "\nError: Failed to create local state file\n" + persistFailed,
			false},
		"not said that the state was not persisted": {created + saveFailed, false},
		"no error at all": {created, false},
		"nothing":         {"", false},
	} {
		require.Equal(t, c.want, onlyStateFailed([]byte(c.log)), name)
	}
}
