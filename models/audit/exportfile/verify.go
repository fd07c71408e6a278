package exportfile

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"gantry/models/words"
)

// PublicKey is one signing key as an organization publishes it.
type PublicKey struct {
	KeyID       string     `json:"key_id"`
	PublicKey   string     `json:"public_key"` // base64 Ed25519
	Fingerprint string     `json:"fingerprint"`
	CreatedAt   time.Time  `json:"created_at"`
	RetiredAt   *time.Time `json:"retired_at,omitempty"`
}

// KeySet is an organization's published signing keys, current and retired.
type KeySet struct {
	Keys []PublicKey `json:"keys"`
}

// Trust is what a verification trusts: fingerprints pinned out of band, or a key set
// fetched from the organization. A file signed by any other key fails.
type Trust struct {
	Fingerprints []string
	Keys         *KeySet
}

func (t Trust) empty() bool { return len(t.Fingerprints) == 0 && t.Keys == nil }

// Admits says whether pub, named kid, is trusted (nil) or why not.
func (t Trust) Admits(kid string, pub ed25519.PublicKey) error {
	fp := Fingerprint(pub)
	if slices.Contains(t.Fingerprints, fp) {
		return nil
	}
	if t.Keys != nil {
		for _, k := range t.Keys.Keys {
			if k.KeyID == kid {
				raw, err := base64.StdEncoding.DecodeString(k.PublicKey)
				if err != nil || !bytes.Equal(raw, pub) {
					return fmt.Errorf("the manifest's key %s is not the organization's key of that id", kid)
				}
				return nil
			}
		}
		return fmt.Errorf("key %s is not one of the organization's keys", kid)
	}
	return fmt.Errorf("key %s (%s) is not the pinned key", kid, fp)
}

// Result is a verification's outcome. Line is the first bad line (1-based; 0 when the
// fault is not one line's, such as the signature).
type Result struct {
	OK       bool
	Line     int
	Verdict  string
	Manifest Manifest
}

func fail(line int, m Manifest, format string, args ...any) Result {
	msg := fmt.Sprintf(format, args...)
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	return Result{Line: line, Verdict: "FAIL " + msg, Manifest: m}
}

// body is what verification reads of a hashed event.
type body struct {
	OrganizationID string `json:"organization_id"`
	Seq            int64  `json:"seq"`
	OccurredAt     string `json:"occurred_at"`
}

// Verify reads an export from r and checks, in this order: the manifest's signature
// and key, every event line (hash over its exact bytes, sequence, organization, time
// range, and in chain mode each link from the anchor on), the end of the chain and the
// count against the manifest, and the file's sha256. It holds one line at a time.
func Verify(r io.Reader, trust Trust) Result {
	lines, trailerLine, last, err := splitTrailer(r)
	if err != nil {
		return fail(0, Manifest{}, "%v", err)
	}
	m, signed, sig, csvFormat, err := parseTrailer(last)
	if err != nil {
		return fail(trailerLine, Manifest{}, "%v", err)
	}
	pub, err := base64.StdEncoding.DecodeString(m.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fail(trailerLine, m, "signature: the manifest carries no valid Ed25519 public key")
	}
	if !ed25519.Verify(pub, signed, sig) {
		return fail(trailerLine, m, "signature: does not verify over the manifest (manifest or signature altered)")
	}
	if Fingerprint(pub) != m.KeyFingerprint {
		return fail(trailerLine, m, "signature: the manifest's fingerprint is not its key's")
	}
	if trust.empty() {
		return fail(0, m, "signature valid but the key is not pinned: pass --key %s (after checking it out of band) or --keys-url", m.KeyFingerprint)
	}
	if err := trust.Admits(m.KeyID, pub); err != nil {
		return fail(trailerLine, m, "signature: %v", err)
	}
	if (m.Format == CSV) != csvFormat {
		return fail(trailerLine, m, "the manifest says %s but the file is not", m.Format)
	}

	digest := sha256.New()
	n := 0
	var prevSeq int64
	var prevHash []byte
	var count int64
	for {
		raw, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fail(0, m, "reading: %v", err)
		}
		n++
		digest.Write(raw)
		if csvFormat && n == 1 {
			rec, err := csvRecord(raw)
			if err != nil || !slices.Equal(rec, csvHeader) {
				return fail(n, m, "not the export's CSV header")
			}
			continue
		}
		l, err := parseLine(raw, csvFormat)
		if err != nil {
			return fail(n, m, "%v", err)
		}
		sum := sha256.New()
		sum.Write(l.PrevHash)
		sum.Write(l.Body)
		if !bytes.Equal(sum.Sum(nil), l.Hash) {
			return fail(n, m, "seq %d: the event's hash does not match its bytes (the event was edited)", l.Seq)
		}
		var b body
		if err := json.Unmarshal(l.Body, &b); err != nil {
			return fail(n, m, "seq %d: the event is not JSON: %v", l.Seq, err)
		}
		if b.Seq != l.Seq || b.OrganizationID != m.OrganizationID {
			return fail(n, m, "seq %d: the line's sequence or organization is not its event's", l.Seq)
		}
		at, err := time.Parse(time.RFC3339Nano, b.OccurredAt)
		if err != nil || at.Before(m.From) || !at.Before(m.To) {
			return fail(n, m, "seq %d: occurred at %s, outside the export's range", l.Seq, b.OccurredAt)
		}
		switch {
		case count == 0 && m.Mode == ModeChain && hex.EncodeToString(l.PrevHash) != m.Anchor:
			return fail(n, m, "seq %d does not follow the anchor (an event before it was removed, or one inserted)", l.Seq)
		case count == 0 && l.Seq != m.FirstSeq:
			return fail(n, m, "seq %d where the manifest starts at seq %d", l.Seq, m.FirstSeq)
		case count > 0 && m.Mode == ModeChain && (l.Seq != prevSeq+1 || !bytes.Equal(l.PrevHash, prevHash)):
			return fail(n, m, "seq %d does not follow seq %d (an event was removed, inserted or moved)", l.Seq, prevSeq)
		case count > 0 && l.Seq <= prevSeq:
			return fail(n, m, "seq %d after seq %d (events out of order or repeated)", l.Seq, prevSeq)
		}
		prevSeq, prevHash = l.Seq, l.Hash
		count++
	}
	if count != m.Events || (count > 0 && (prevSeq != m.LastSeq || hex.EncodeToString(prevHash) != m.LastHash)) {
		return fail(n+1, m, "the file ends after %d events at seq %d; the manifest says %d events ending at seq %d (events removed or added)",
			count, prevSeq, m.Events, m.LastSeq)
	}
	if hex.EncodeToString(digest.Sum(nil)) != m.SHA256 {
		return fail(0, m, "the file's sha256 differs from the signed manifest's")
	}
	mode := "chain verified from its anchor"
	if m.Mode == ModeEvents {
		mode = "filtered export: each event verified on its own (no chain continuity)"
	}
	span := "no events"
	if count > 0 {
		span = fmt.Sprintf("seq %d..%d", m.FirstSeq, m.LastSeq)
	}
	return Result{OK: true, Manifest: m, Verdict: fmt.Sprintf("OK %s, %s, %s; signed by %s (%s)",
		words.Count(count, "event", "events"), span, mode, m.KeyID, m.KeyFingerprint)}
}

// lineSource hands back the lines before the trailer from a spooled copy of the input,
// so that the input is read once and memory holds one line.
type lineSource struct {
	r     *bufio.Reader
	limit int64 // bytes left before the trailer
}

func (s *lineSource) next() ([]byte, error) {
	if s.limit <= 0 {
		return nil, io.EOF
	}
	line, err := s.r.ReadBytes('\n')
	s.limit -= int64(len(line))
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		return nil, err
	}
	return line, nil
}

// splitTrailer finds the last line. It needs to read the input twice, so a reader
// that is not seekable is not accepted.
func splitTrailer(r io.Reader) (*lineSource, int, []byte, error) {
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		return nil, 0, nil, errors.New("verifying needs a file")
	}
	br := bufio.NewReaderSize(rs, 1<<16)
	var offset, lastStart int64
	var last []byte
	lineNo := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			lineNo++
			lastStart, last = offset, line
			offset += int64(len(line))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, nil, err
		}
	}
	if lineNo == 0 {
		return nil, 0, nil, errors.New("the file is empty")
	}
	if _, err := rs.Seek(0, io.SeekStart); err != nil {
		return nil, 0, nil, err
	}
	return &lineSource{r: bufio.NewReaderSize(rs, 1<<16), limit: lastStart}, lineNo, bytes.TrimRight(last, "\r\n"), nil
}

func parseTrailer(last []byte) (m Manifest, signed, sig []byte, csvFormat bool, err error) {
	var t trailer
	if bytes.HasPrefix(last, []byte(csvTrailerTag+",")) {
		rec, err := csvRecord(last)
		if err != nil || len(rec) != 3 {
			return m, nil, nil, true, errors.New("the last line is not the signed manifest")
		}
		t, csvFormat = trailer{Signed: rec[1], Signature: rec[2]}, true
	} else if err := json.Unmarshal(last, &t); err != nil || t.Signed == "" {
		return m, nil, nil, false, errors.New("the last line is not the signed manifest (file truncated?)")
	}
	if sig, err = base64.StdEncoding.DecodeString(t.Signature); err != nil {
		return m, nil, nil, csvFormat, errors.New("signature: not base64")
	}
	if err := json.Unmarshal([]byte(t.Signed), &m); err != nil {
		return m, nil, nil, csvFormat, fmt.Errorf("the manifest is not JSON: %w", err)
	}
	if m.Version != Version {
		return m, nil, nil, csvFormat, fmt.Errorf("manifest version %d; this verifier reads version %d", m.Version, Version)
	}
	return m, []byte(t.Signed), sig, csvFormat, nil
}

func csvRecord(line []byte) ([]string, error) {
	cr := csv.NewReader(bytes.NewReader(line))
	cr.FieldsPerRecord = -1
	return cr.Read()
}

func parseLine(raw []byte, csvFormat bool) (Line, error) {
	var l Line
	var prev, hash string
	if csvFormat {
		rec, err := csvRecord(raw)
		if err != nil || len(rec) != len(csvHeader) {
			return l, errors.New("not an event row")
		}
		seq, err := strconv.ParseInt(rec[0], 10, 64)
		if err != nil {
			return l, errors.New("the sequence number is not a number")
		}
		l.Seq, prev, hash, l.Body = seq, rec[6], rec[7], []byte(rec[8])
	} else {
		var j jsonLine
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil || j.Body == nil {
			return l, errors.New("not an event line")
		}
		// The hashed bytes exactly as they stand in the line (a RawMessage keeps them).
		l.Seq, prev, hash, l.Body = j.Seq, j.PrevHash, j.Hash, j.Body
	}
	var err error
	if l.PrevHash, err = hex.DecodeString(prev); err != nil {
		return l, errors.New("prev_hash is not hex")
	}
	if l.Hash, err = hex.DecodeString(hash); err != nil || len(l.Hash) != sha256.Size {
		return l, errors.New("hash is not a sha256 in hex")
	}
	return l, nil
}
