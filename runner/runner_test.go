package runner

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCredentialsNeverPrint: credentials formatted or logged show no secret.
func TestCredentialsNeverPrint(t *testing.T) {
	t.Parallel()
	c := Credentials{StateUsername: "cred-1", StatePassword: "pw-CANARY", CloudToken: "tok-CANARY"}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("job", "creds", c, "req", PlanRequest{Credentials: c})
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", c, c, c, c), buf.String()} {
		require.NotContains(t, s, "CANARY")
	}
}
