package keyring_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/keyring"
)

func TestSealOpenRotate(t *testing.T) {
	t.Parallel()
	spec1 := keyring.NewKeySpec("k1")
	old, err := keyring.Parse(spec1)
	require.NoError(t, err)
	plain := []byte(`{"resources":[]}`)
	s, err := old.Seal(plain, []byte("artifact:a1"))
	require.NoError(t, err)
	require.Equal(t, "k1", s.KeyID)
	require.False(t, bytes.Contains(s.Ciphertext, plain))

	got, err := old.Open(s, []byte("artifact:a1"))
	require.NoError(t, err)
	require.Equal(t, plain, got)
	_, err = old.Open(s, []byte("artifact:a2"))
	require.Error(t, err, "other associated data must not open it")

	// Two seals of the same plaintext differ (fresh data key and nonce).
	s2, err := old.Seal(plain, []byte("artifact:a1"))
	require.NoError(t, err)
	require.NotEqual(t, s.Ciphertext, s2.Ciphertext)

	// Rotation: a new current key; old data still opens and re-wraps under the new key.
	both, err := keyring.Parse(keyring.NewKeySpec("k2") + "," + spec1)
	require.NoError(t, err)
	require.Equal(t, "k2", both.CurrentKeyID())
	re, err := both.Rewrap(s)
	require.NoError(t, err)
	require.Equal(t, "k2", re.KeyID)
	require.Equal(t, s.Ciphertext, re.Ciphertext, "rotation re-wraps keys, not data")
	got, err = both.Open(re, []byte("artifact:a1"))
	require.NoError(t, err)
	require.Equal(t, plain, got)

	_, err = old.Open(re, []byte("artifact:a1"))
	require.ErrorIs(t, err, keyring.ErrUnknownKey)
	re.KeyID = "k1"
	_, err = both.Open(re, []byte("artifact:a1"))
	require.Error(t, err, "a relabelled wrapped key must not open")
}

func TestParseRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "nokey", "k1:notbase64!", "k1:c2hvcnQ=", "bad id:" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", keyring.NewKeySpec("k1") + "," + keyring.NewKeySpec("k1")} {
		_, err := keyring.Parse(spec)
		require.Error(t, err, spec)
	}
}
