// Package attest signs what an apply wrote: for every apply that wrote state versions
// (failed ones included) an in-toto Statement (v1) whose subjects are the state
// versions (the sha256 of their plaintext) and whose predicate names the request,
// config bundle, plan, policy evaluation and approval that led to them, in a DSSE
// envelope signed with the organization's Ed25519 audit key. The bundle handed out
// carries the envelope and the key's public half; a verifier trusts the key only by its
// pinned fingerprint or the organization's published key set (exportfile.Trust).
package attest

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	ita1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/db"
)

// PredicateType names Gantry's apply predicate.
const PredicateType = "https://gantry.dev/attestation/apply/v1"

// MediaType is the bundle's own type.
const MediaType = "application/vnd.gantry.attestation.v1+json"

// PayloadType is the DSSE payload type of an in-toto Statement, as the in-toto
// envelope rules name it; tooling that follows them refuses any other.
const PayloadType = "application/vnd.in-toto+json"

// legacyPayloadType is the payload type attestations were signed with before
// PayloadType (the Statement's type URI). The signature covers it, so those keep it:
// Verify accepts it so that what was issued still verifies.
const legacyPayloadType = ita1.StatementTypeUri

// Subject is one state version an apply wrote.
type Subject struct {
	Name   string // "state-version/<id>"
	SHA256 string // of the plaintext state
}

// Bundle is what is stored and downloaded: the DSSE envelope and the key to check it by.
type Bundle struct {
	MediaType    string        `json:"mediaType"`
	DSSEEnvelope dsse.Envelope `json:"dsseEnvelope"`
	Key          struct {
		KeyID       string `json:"keyId"`
		PublicKey   string `json:"publicKey"`
		Fingerprint string `json:"fingerprint"`
	} `json:"verificationMaterial"`
}

type signer struct{ s exportfile.Signer }

func (s signer) Sign(_ context.Context, data []byte) ([]byte, error) { return s.s.Sign(data) }
func (s signer) KeyID() (string, error)                              { return s.s.KeyID(), nil }

type verifier struct {
	kid string
	pub ed25519.PublicKey
}

func (v verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("signature does not verify")
	}
	return nil
}
func (v verifier) KeyID() (string, error)   { return v.kid, nil }
func (v verifier) Public() crypto.PublicKey { return v.pub }

// record is one row of attestations.
type record struct {
	ID             string `gorm:"primaryKey"`
	OrganizationID string
	RunID          string
	Bundle         json.RawMessage `gorm:"type:jsonb"`
	CreatedAt      time.Time       `gorm:"->"`
}

func (record) TableName() string { return "attestations" }

// Attestor signs and keeps attestations.
type Attestor struct {
	db   *gorm.DB
	keys *audit.Keys
}

// New returns the attestor.
func New(gdb *gorm.DB, keys *audit.Keys) *Attestor { return &Attestor{db: gdb, keys: keys} }

// Attest signs a statement of subjects with predicate and stores it with run runID, in
// the transaction carried by ctx.
func (a *Attestor) Attest(ctx context.Context, orgID, runID string, subjects []Subject, predicate map[string]any) error {
	statement, err := Statement(subjects, predicate)
	if err != nil {
		return err
	}
	s, err := a.keys.Signer(ctx, orgID)
	if err != nil {
		return err
	}
	b, err := Sign(ctx, s, statement)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return err
	}
	row := record{ID: db.NewID("att"), OrganizationID: orgID, RunID: runID, Bundle: raw}
	if err := db.Conn(ctx, a.db).Create(&row).Error; err != nil {
		return fmt.Errorf("storing the attestation: %w", db.Translate(err))
	}
	return nil
}

// OfRun returns the bundles of run runID of organization orgID, newest first, for a
// caller that has already decided its subject may see the run.
func (a *Attestor) OfRun(ctx context.Context, orgID, runID string) ([]json.RawMessage, error) {
	var rows []record
	if err := db.Conn(ctx, a.db).Where("organization_id = ? AND run_id = ?", orgID, runID).Order("created_at DESC, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading attestations: %w", err)
	}
	out := make([]json.RawMessage, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Bundle)
	}
	return out, nil
}

// Statement is the in-toto Statement (v1) of subjects with predicate, as JSON.
func Statement(subjects []Subject, predicate map[string]any) ([]byte, error) {
	pred, err := structpb.NewStruct(predicate)
	if err != nil {
		return nil, fmt.Errorf("the predicate: %w", err)
	}
	st := &ita1.Statement{Type: ita1.StatementTypeUri, PredicateType: PredicateType, Predicate: pred}
	for _, s := range subjects {
		st.Subject = append(st.Subject, &ita1.ResourceDescriptor{Name: s.Name, Digest: map[string]string{"sha256": s.SHA256}})
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("the statement: %w", err)
	}
	return protojson.Marshal(st)
}

// Sign wraps statement in a DSSE envelope of PayloadType signed by s (an organization's
// audit key, audit.Signer) and bundles it with s's key.
func Sign(ctx context.Context, s exportfile.Signer, statement []byte) (Bundle, error) {
	es, err := dsse.NewEnvelopeSigner(signer{s})
	if err != nil {
		return Bundle{}, err
	}
	env, err := es.SignPayload(ctx, PayloadType, statement)
	if err != nil {
		return Bundle{}, fmt.Errorf("signing the statement: %w", err)
	}
	b := Bundle{MediaType: MediaType, DSSEEnvelope: *env}
	b.Key.KeyID, b.Key.PublicKey, b.Key.Fingerprint = s.KeyID(), base64.StdEncoding.EncodeToString(s.Public()), exportfile.Fingerprint(s.Public())
	return b, nil
}

// Result is a verification's outcome.
type Result struct {
	OK        bool
	Verdict   string
	Statement *ita1.Statement
}

// VerifyFile checks a file holding one bundle or a list of them (a run's
// attestations.json): every bundle must verify, and there must be one.
func VerifyFile(raw []byte, trust exportfile.Trust) Result {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return Verify(raw, trust)
	}
	if len(list) == 0 {
		return Result{Verdict: "FAIL the file holds no attestation (the run wrote no state version)"}
	}
	var last Result
	for i, b := range list {
		if last = Verify(b, trust); !last.OK {
			last.Verdict = fmt.Sprintf("%s (attestation %d of %d)", last.Verdict, i+1, len(list))
			return last
		}
	}
	if len(list) > 1 {
		last.Verdict = fmt.Sprintf("OK %d attestations; the newest: %s", len(list), strings.TrimPrefix(Verify(list[0], trust).Verdict, "OK "))
	}
	return last
}

// Verify checks a bundle offline: the key is trusted (pinned fingerprint or key set),
// the DSSE signature verifies over the payload and its type (PayloadType, or the
// legacy type of bundles signed before it), and the payload is a valid in-toto
// Statement of Gantry's apply predicate.
func Verify(raw []byte, trust exportfile.Trust) Result {
	fail := func(format string, args ...any) Result {
		return Result{Verdict: "FAIL " + fmt.Sprintf(format, args...)}
	}
	var b Bundle
	if err := json.Unmarshal(raw, &b); err != nil || b.MediaType != MediaType {
		return fail("not a Gantry attestation bundle")
	}
	pub, err := base64.StdEncoding.DecodeString(b.Key.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fail("the bundle carries no valid Ed25519 public key")
	}
	if exportfile.Fingerprint(pub) != b.Key.Fingerprint {
		return fail("signature: the bundle's fingerprint is not its key's")
	}
	if err := trust.Admits(b.Key.KeyID, pub); err != nil {
		return fail("signature: %v", err)
	}
	ev, err := dsse.NewEnvelopeVerifier(verifier{kid: b.Key.KeyID, pub: pub})
	if err != nil {
		return fail("%v", err)
	}
	if _, err := ev.Verify(context.Background(), &b.DSSEEnvelope); err != nil {
		return fail("signature: does not verify over the statement (statement or signature altered): %v", err)
	}
	if t := b.DSSEEnvelope.PayloadType; t != PayloadType && t != legacyPayloadType {
		return fail("payload type %q is not an in-toto Statement's (%s)", t, PayloadType)
	}
	payload, err := b.DSSEEnvelope.DecodeB64Payload()
	if err != nil {
		return fail("the payload is not base64")
	}
	var st ita1.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return fail("the payload is not an in-toto Statement: %v", err)
	}
	if err := st.Validate(); err != nil {
		return fail("the statement is not valid: %v", err)
	}
	if st.GetPredicateType() != PredicateType {
		return fail("predicate type %q is not Gantry's apply predicate", st.GetPredicateType())
	}
	run := st.GetPredicate().GetFields()["run"].GetStringValue()
	first := st.GetSubject()[0]
	return Result{OK: true, Statement: &st, Verdict: fmt.Sprintf("OK attestation of run %s: %d state versions (first %s sha256:%s); signed by %s (%s)",
		run, len(st.GetSubject()), first.GetName(), first.GetDigest()["sha256"], b.Key.KeyID, b.Key.Fingerprint)}
}
