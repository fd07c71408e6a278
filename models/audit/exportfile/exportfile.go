// Package exportfile is the file format of Gantry's signed audit exports: how events
// are written as JSON Lines or CSV, the signed manifest in the last line, and the
// offline verification of both (signature, file digest and hash chain). It imports
// nothing of Gantry, so `gantry audit verify` needs neither a database nor a portal;
// docs/audit-format.md specifies the same algorithm for a script outside Gantry.
package exportfile

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Version is the format version written in every manifest.
const Version = 1

// Formats an export can take.
const (
	JSONL = "jsonl"
	CSV   = "csv"
)

// Modes of verification. An unfiltered export is one stretch of the organization's
// chain and is verified as a chain (every link, from the anchor to the last hash); a
// filtered export holds events with gaps between them and is verified event by event.
const (
	ModeChain  = "chain"
	ModeEvents = "events"
)

// Line is one exported event: its sequence number, the hash of the event before it in
// the organization's chain, its own hash, and Body, the exact bytes that were hashed:
// Hash = sha256(PrevHash || Body).
type Line struct {
	Seq      int64
	PrevHash []byte
	Hash     []byte
	Body     []byte
	// For CSV readers: the event's time, actor, action and target, taken from Body.
	OccurredAt, ActorName, Action, TargetType, TargetID string
}

// jsonLine is a JSON Lines event. Body is the hashed JSON object itself, written as
// it was hashed: a line is `{"seq":N,"prev_hash":"…","hash":"…","body":` + the exact
// bytes + `}`, so the bytes are everything between `,"body":` and the line's last `}`
// (and tools such as jq read the event as an object).
type jsonLine struct {
	Seq      int64           `json:"seq"`
	PrevHash string          `json:"prev_hash"`
	Hash     string          `json:"hash"`
	Body     json.RawMessage `json:"body"`
}

// Filters are the filters an export was made with (empty: none).
type Filters struct {
	Actor       string `json:"actor,omitempty"`
	Action      string `json:"action,omitempty"`
	Run         string `json:"run,omitempty"`
	Environment string `json:"environment,omitempty"`
	Workspace   string `json:"workspace,omitempty"`
}

// Empty reports whether no filter is set.
func (f Filters) Empty() bool { return f == Filters{} }

// Manifest is what the signature covers: the file's digest and everything needed to
// judge it without the database.
type Manifest struct {
	Version        int       `json:"version"`
	ExportID       string    `json:"export_id"`
	OrganizationID string    `json:"organization_id"`
	Format         string    `json:"format"`
	From           time.Time `json:"from"`
	To             time.Time `json:"to"`
	Filters        Filters   `json:"filters"`
	Mode           string    `json:"mode"`
	// Anchor is the hash of the event just before FirstSeq in the chain (empty when
	// FirstSeq is the organization's first event): a window that starts mid-chain
	// verifies on its own.
	Anchor   string `json:"anchor"`
	FirstSeq int64  `json:"first_seq"`
	LastSeq  int64  `json:"last_seq"`
	LastHash string `json:"last_hash"`
	Events   int64  `json:"events"`
	// SHA256 is the hex digest of every byte of the file before the manifest line.
	SHA256         string    `json:"sha256"`
	KeyID          string    `json:"key_id"`
	KeyFingerprint string    `json:"key_fingerprint"`
	PublicKey      string    `json:"public_key"` // base64 Ed25519 public key; trusted only when its fingerprint is pinned
	CreatedAt      time.Time `json:"created_at"`
}

// Fingerprint names an Ed25519 public key: "SHA256:" and the unpadded base64 of its
// sha256, the form ssh-keygen prints.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// Signer signs a manifest.
type Signer interface {
	KeyID() string
	Public() ed25519.PublicKey
	Sign(message []byte) ([]byte, error)
}

// trailer is the last line of a JSON Lines export; Signed is the manifest's exact
// JSON bytes, carried as a string for the same reason as a line's body.
type trailer struct {
	Signed    string `json:"signed"`
	Signature string `json:"signature"`
}

// csvHeader names the CSV columns; body is the exact hashed JSON.
var csvHeader = []string{"seq", "occurred_at", "actor", "action", "target_type", "target_id", "prev_hash", "hash", "body"}

// csvTrailerTag starts the CSV row that carries the manifest and its signature.
const csvTrailerTag = "#gantry-manifest"

// Writer writes an export, hashing what it writes; Close signs and writes the manifest.
type Writer struct {
	w        io.Writer
	digest   hashWriter
	format   string
	csv      *csv.Writer
	manifest Manifest
	buf      []byte
	started  bool
	prevHash []byte
}

type hashWriter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	w io.Writer
}

func (h hashWriter) Write(p []byte) (int, error) {
	h.h.Write(p)
	return h.w.Write(p)
}

// NewWriter starts an export in format to w. m carries what is known up front (id,
// organization, range, filters, creation time); Write and Close fill in the rest.
func NewWriter(w io.Writer, format string, m Manifest) (*Writer, error) {
	if format != JSONL && format != CSV {
		return nil, fmt.Errorf("unknown export format %q", format)
	}
	m.Version, m.Format = Version, format
	m.Mode = ModeChain
	if !m.Filters.Empty() {
		m.Mode = ModeEvents
	}
	ew := &Writer{w: w, format: format, manifest: m}
	ew.digest = hashWriter{h: sha256.New(), w: w}
	if format == CSV {
		ew.csv = csv.NewWriter(ew.digest)
		if err := ew.csv.Write(csvHeader); err != nil {
			return nil, err
		}
	}
	return ew, nil
}

// Write adds one event.
func (e *Writer) Write(l Line) error {
	if !e.started {
		// The anchor is the hash the first event links to: the signed manifest pins
		// it, so a removed first line shows, and the export joins the one before it.
		e.started = true
		e.manifest.FirstSeq, e.manifest.Anchor = l.Seq, hex.EncodeToString(l.PrevHash)
	}
	e.manifest.LastSeq, e.manifest.LastHash = l.Seq, hex.EncodeToString(l.Hash)
	e.manifest.Events++
	if e.format == CSV {
		// The readable columns are a convenience (the body is what counts) and are kept
		// to one line, so that every row is one line of the file.
		return e.csv.Write([]string{fmt.Sprint(l.Seq), oneLine(l.OccurredAt), oneLine(l.ActorName), oneLine(l.Action),
			oneLine(l.TargetType), oneLine(l.TargetID), hex.EncodeToString(l.PrevHash), hex.EncodeToString(l.Hash), string(l.Body)})
	}
	// The jsonLine fields, in order, written without reflection.
	b := append(e.buf[:0], `{"seq":`...)
	b = strconv.AppendInt(b, l.Seq, 10)
	b = append(b, `,"prev_hash":"`...)
	b = hex.AppendEncode(b, l.PrevHash)
	b = append(b, `","hash":"`...)
	b = hex.AppendEncode(b, l.Hash)
	b = append(b, `","body":`...)
	b = append(b, l.Body...)
	e.buf = append(b, '}', '\n')
	_, err := e.digest.Write(e.buf)
	return err
}

// Close signs the manifest with s and writes it as the last line; it returns the
// manifest as signed.
func (e *Writer) Close(s Signer) (Manifest, error) {
	if e.csv != nil {
		e.csv.Flush()
		if err := e.csv.Error(); err != nil {
			return Manifest{}, err
		}
	}
	m := e.manifest
	m.SHA256 = hex.EncodeToString(e.digest.h.Sum(nil))
	m.KeyID, m.PublicKey = s.KeyID(), base64.StdEncoding.EncodeToString(s.Public())
	m.KeyFingerprint = Fingerprint(s.Public())
	signed, err := json.Marshal(m)
	if err != nil {
		return Manifest{}, err
	}
	sig, err := s.Sign(signed)
	if err != nil {
		return Manifest{}, fmt.Errorf("signing the manifest: %w", err)
	}
	if e.format == CSV {
		cw := csv.NewWriter(e.w)
		if err := cw.Write([]string{csvTrailerTag, string(signed), base64.StdEncoding.EncodeToString(sig)}); err != nil {
			return Manifest{}, err
		}
		cw.Flush()
		return m, cw.Error()
	}
	b, err := json.Marshal(trailer{Signed: string(signed), Signature: base64.StdEncoding.EncodeToString(sig)})
	if err != nil {
		return Manifest{}, err
	}
	_, err = e.w.Write(append(b, '\n'))
	return m, err
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Events is how many events were written so far.
func (e *Writer) Events() int64 { return e.manifest.Events }
