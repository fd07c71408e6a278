package attest_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/stretchr/testify/require"

	"gantry/models/attest"
	"gantry/models/audit/exportfile"
)

// key is an audit key of the test's own (exportfile.Signer, and dsse's signer for
// envelopes made the way Gantry made them before).
type key struct{ priv ed25519.PrivateKey }

func newKey(t *testing.T) key {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return key{priv: priv}
}

func (k key) KeyID() string                   { return "audit-test" }
func (k key) Public() ed25519.PublicKey       { return k.priv.Public().(ed25519.PublicKey) }
func (k key) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(k.priv, msg), nil }
func (k key) trust() exportfile.Trust {
	return exportfile.Trust{Fingerprints: []string{exportfile.Fingerprint(k.Public())}}
}

type dsseSigner struct{ k key }

func (s dsseSigner) Sign(_ context.Context, data []byte) ([]byte, error) { return s.k.Sign(data) }
func (s dsseSigner) KeyID() (string, error)                              { return s.k.KeyID(), nil }

// inTotoVerify checks an envelope as the in-toto attestation framework's rules ask a
// consumer to (github.com/in-toto/attestation, docs/validation.md and spec/v1: the DSSE
// envelope, then the Statement), written from those rules with the standard library
// alone, not with Gantry's verifier or the libraries it uses: the payload type is
// exactly application/vnd.in-toto+json; a signature by pub verifies over DSSE's
// pre-authentication encoding of that type and the payload; the payload is a Statement
// of _type https://in-toto.io/Statement/v1 with a predicateType, an object predicate
// and subjects, each named, with lower-case hex digests; and one subject carries the
// artifact's sha256.
func inTotoVerify(bundle []byte, pub ed25519.PublicKey, artifactSHA256 string) error {
	var b struct {
		Envelope struct {
			PayloadType string `json:"payloadType"`
			Payload     string `json:"payload"`
			Signatures  []struct {
				KeyID string `json:"keyid"`
				Sig   string `json:"sig"`
			} `json:"signatures"`
		} `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(bundle, &b); err != nil {
		return err
	}
	env := b.Envelope
	if env.PayloadType != "application/vnd.in-toto+json" {
		return fmt.Errorf("payloadType %q", env.PayloadType)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		// DSSE allows either base64 alphabet.
		if payload, err = base64.URLEncoding.DecodeString(env.Payload); err != nil {
			return fmt.Errorf("payload: %w", err)
		}
	}
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d ", len(env.PayloadType), env.PayloadType, len(payload))
	pae = append(pae, payload...)
	verified := false
	for _, s := range env.Signatures {
		sig, err := base64.StdEncoding.DecodeString(s.Sig)
		verified = verified || (err == nil && ed25519.Verify(pub, pae, sig))
	}
	if !verified {
		return errors.New("no signature verifies over the PAE")
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Predicate     any    `json:"predicate"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" {
		return fmt.Errorf("_type %q", st.Type)
	}
	if _, isObject := st.Predicate.(map[string]any); st.PredicateType == "" || !isObject {
		return errors.New("predicateType or predicate missing")
	}
	if len(st.Subject) == 0 {
		return errors.New("no subject")
	}
	lowerHex := regexp.MustCompile(`^[0-9a-f]+$`)
	matched := false
	for _, s := range st.Subject {
		if s.Name == "" || len(s.Digest) == 0 {
			return fmt.Errorf("subject %+v: a name and a digest", s)
		}
		for alg, d := range s.Digest {
			if !lowerHex.MatchString(d) || alg != strings.ToLower(alg) {
				return fmt.Errorf("subject %s: digest %s:%s", s.Name, alg, d)
			}
		}
		matched = matched || s.Digest["sha256"] == artifactSHA256
	}
	if !matched {
		return fmt.Errorf("no subject is the artifact sha256:%s", artifactSHA256)
	}
	return nil
}

// TestEnvelopeFollowsTheInTotoRules: an attestation Gantry signs now passes a
// consumer's check written from the in-toto attestation framework's rules, and that
// check refuses each thing it is there to refuse (the Statement's URI as payload type,
// a payload type changed after signing, another key, another artifact, another _type).
func TestEnvelopeFollowsTheInTotoRules(t *testing.T) {
	k := newKey(t)
	state := strings.Repeat("ab", 32)
	statement, err := attest.Statement([]attest.Subject{{Name: "state-version/sv-1", SHA256: state}}, map[string]any{"run": "run-1"})
	require.NoError(t, err)
	b, err := attest.Sign(context.Background(), k, statement)
	require.NoError(t, err)
	raw, err := json.Marshal(b)
	require.NoError(t, err)
	require.NoError(t, inTotoVerify(raw, k.Public(), state))
	require.Equal(t, "application/vnd.in-toto+json", b.DSSEEnvelope.PayloadType)
	require.True(t, attest.Verify(raw, k.trust()).OK, attest.Verify(raw, k.trust()).Verdict)

	// The check can fail.
	require.ErrorContains(t, inTotoVerify(raw, newKey(t).Public(), state), "no signature verifies")
	require.ErrorContains(t, inTotoVerify(raw, k.Public(), strings.Repeat("cd", 32)), "no subject is the artifact")
	relabelled := bytes.Replace(raw, []byte(`"payloadType":"application/vnd.in-toto+json"`), []byte(`"payloadType":"application/vnd.in-toto+JSON"`), 1)
	require.ErrorContains(t, inTotoVerify(relabelled, k.Public(), state), "payloadType")
	legacy := legacyBundle(t, k, statement)
	require.ErrorContains(t, inTotoVerify(legacy, k.Public(), state), `payloadType "https://in-toto.io/Statement/v1"`)
	otherType := bytes.Replace(statement, []byte(`"https://in-toto.io/Statement/v1"`), []byte(`"https://in-toto.io/Statement/v0.1"`), 1)
	require.NotEqual(t, statement, otherType)
	b, err = attest.Sign(context.Background(), k, otherType)
	require.NoError(t, err)
	raw, err = json.Marshal(b)
	require.NoError(t, err)
	require.ErrorContains(t, inTotoVerify(raw, k.Public(), state), "_type")
}

// legacyBundle is statement signed as Gantry signed attestations before the standard
// payload type: with the Statement's type URI as the DSSE payload type.
func legacyBundle(t *testing.T, k key, statement []byte) []byte {
	t.Helper()
	return bundleOf(t, k, "https://in-toto.io/Statement/v1", statement)
}

// bundleOf is statement signed by k in a DSSE envelope of payloadType, bundled as
// Gantry bundles it.
func bundleOf(t *testing.T, k key, payloadType string, statement []byte) []byte {
	t.Helper()
	es, err := dsse.NewEnvelopeSigner(dsseSigner{k})
	require.NoError(t, err)
	env, err := es.SignPayload(context.Background(), payloadType, statement)
	require.NoError(t, err)
	b := attest.Bundle{MediaType: attest.MediaType, DSSEEnvelope: *env}
	b.Key.KeyID, b.Key.PublicKey, b.Key.Fingerprint = k.KeyID(), base64.StdEncoding.EncodeToString(k.Public()), exportfile.Fingerprint(k.Public())
	raw, err := json.Marshal(b)
	require.NoError(t, err)
	return raw
}

// TestIssuedAttestationsKeepVerifying: an attestation signed before the standard
// payload type (the Statement's URI, which its signature covers) still verifies with
// Gantry's verifier; a payload type relabelled after signing fails the signature; a
// signed envelope of any other payload type is refused.
func TestIssuedAttestationsKeepVerifying(t *testing.T) {
	k := newKey(t)
	state := hex.EncodeToString(bytes.Repeat([]byte{0xab}, 32))
	statement, err := attest.Statement([]attest.Subject{{Name: "state-version/sv-1", SHA256: state}}, map[string]any{"run": "run-1"})
	require.NoError(t, err)
	legacy := legacyBundle(t, k, statement)
	r := attest.Verify(legacy, k.trust())
	require.True(t, r.OK, r.Verdict)
	require.Contains(t, r.Verdict, "OK attestation of run run-1: 1 state versions")

	relabelled := bytes.Replace(legacy, []byte(`"payloadType":"https://in-toto.io/Statement/v1"`), []byte(`"payloadType":"application/vnd.in-toto+json"`), 1)
	require.NotEqual(t, legacy, relabelled)
	r = attest.Verify(relabelled, k.trust())
	require.False(t, r.OK)
	require.Contains(t, r.Verdict, "FAIL signature: does not verify over the statement")

	r = attest.Verify(bundleOf(t, k, "application/json", statement), k.trust())
	require.False(t, r.OK)
	require.Equal(t, `FAIL payload type "application/json" is not an in-toto Statement's (application/vnd.in-toto+json)`, r.Verdict)
}
