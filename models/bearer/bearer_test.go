package bearer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/bearer"
)

func TestSecretsMatchOnlyThemselves(t *testing.T) {
	secret, hash, err := bearer.New()
	require.NoError(t, err)
	require.Len(t, secret, 43)
	require.True(t, bearer.Matches(secret, hash))
	require.False(t, bearer.Matches(secret+"x", hash))
	require.False(t, bearer.Matches(secret, nil), "an unknown token never matches, even its dummy's secret")
	require.False(t, bearer.Matches("gantry-no-such-token", nil))
	other, _, err := bearer.New()
	require.NoError(t, err)
	require.NotEqual(t, secret, other)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		token      string
		id, secret string
		ok         bool
	}{
		{"gantry_abc.s3cret", "abc", "s3cret", true},
		{"gantry_abc.", "abc", "", true},
		{"gantry_.s3cret", "", "", false},
		{"gantry_abc", "", "", false},
		{"other_abc.s3cret", "", "", false},
		{"gantry_abc.\x00", "abc", "\x00", true},
		{"gantry_" + string(make([]byte, 200)) + ".x", "", "", false},
	} {
		id, secret, ok := bearer.Parse(tc.token, "gantry_")
		require.Equal(t, tc.ok, ok, "%q", tc.token)
		require.Equal(t, tc.id, id, "%q", tc.token)
		require.Equal(t, tc.secret, secret, "%q", tc.token)
	}
}
