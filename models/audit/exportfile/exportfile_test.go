package exportfile_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit/exportfile"
)

type signer struct {
	kid  string
	priv ed25519.PrivateKey
}

func newSigner(t *testing.T, kid string) signer {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return signer{kid: kid, priv: priv}
}

func (s signer) KeyID() string                   { return s.kid }
func (s signer) Public() ed25519.PublicKey       { return s.priv.Public().(ed25519.PublicKey) }
func (s signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }
func (s signer) trust() exportfile.Trust {
	return exportfile.Trust{Fingerprints: []string{exportfile.Fingerprint(s.Public())}}
}
func (s signer) keys() *exportfile.KeySet {
	return &exportfile.KeySet{Keys: []exportfile.PublicKey{s.published()}}
}
func (s signer) published() exportfile.PublicKey {
	return exportfile.PublicKey{KeyID: s.kid, PublicKey: base64.StdEncoding.EncodeToString(s.Public()), Fingerprint: exportfile.Fingerprint(s.Public())}
}

var start = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// chain is n events of one organization, linked as Gantry links them.
func chain(n int) []exportfile.Line {
	var out []exportfile.Line
	var prev []byte
	for i := 1; i <= n; i++ {
		at := start.Add(time.Duration(i) * time.Minute).Format("2006-01-02T15:04:05.000000Z")
		body := fmt.Sprintf(`{"action":"test.event","actor_id":"usr-1","actor_name":"Ann, \"the\" auditor","data":{"i":%d},"occurred_at":%q,"organization_id":"org-1","seq":%d,"target_id":"t","target_type":"thing"}`, i, at, i)
		h := sha256.New()
		h.Write(prev)
		h.Write([]byte(body))
		sum := h.Sum(nil)
		out = append(out, exportfile.Line{Seq: int64(i), PrevHash: prev, Hash: sum, Body: []byte(body), OccurredAt: at,
			ActorName: "Ann,\n\"the\" auditor", Action: "test.event", TargetType: "thing", TargetID: "t"})
		prev = sum
	}
	return out
}

func export(t *testing.T, s signer, format string, lines []exportfile.Line, f exportfile.Filters) []byte {
	t.Helper()
	var buf bytes.Buffer
	m := exportfile.Manifest{ExportID: "exp-1", OrganizationID: "org-1", From: start, To: start.Add(24 * time.Hour), Filters: f, CreatedAt: start}
	w, err := exportfile.NewWriter(&buf, format, m)
	require.NoError(t, err)
	for _, l := range lines {
		require.NoError(t, w.Write(l))
	}
	_, err = w.Close(s)
	require.NoError(t, err)
	return buf.Bytes()
}

func verify(data []byte, trust exportfile.Trust) exportfile.Result {
	return exportfile.Verify(bytes.NewReader(data), trust)
}

func fileLines(data []byte) []string { return strings.SplitAfter(string(data), "\n") }

func join(lines []string) []byte { return []byte(strings.Join(lines, "")) }

func TestIntactExportsVerify(t *testing.T) {
	s := newSigner(t, "audit-1")
	for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
		t.Run(format, func(t *testing.T) {
			whole := export(t, s, format, chain(10), exportfile.Filters{})
			r := verify(whole, s.trust())
			require.True(t, r.OK, r.Verdict)
			require.Equal(t, "OK 10 events, seq 1..10, chain verified from its anchor; signed by audit-1 ("+exportfile.Fingerprint(s.Public())+")", r.Verdict)
			require.True(t, verify(whole, exportfile.Trust{Keys: s.keys()}).OK)

			// A window that starts mid-chain carries its anchor and verifies on its own.
			mid := verify(export(t, s, format, chain(10)[4:8], exportfile.Filters{}), s.trust())
			require.True(t, mid.OK, mid.Verdict)
			require.Contains(t, mid.Verdict, "OK 4 events, seq 5..8, chain verified")

			// A filtered export is verified event by event, and says so.
			events := chain(10)
			filtered := verify(export(t, s, format, []exportfile.Line{events[1], events[4], events[8]}, exportfile.Filters{Action: "test.event"}), s.trust())
			require.True(t, filtered.OK, filtered.Verdict)
			require.Contains(t, filtered.Verdict, "filtered export: each event verified on its own")

			empty := verify(export(t, s, format, nil, exportfile.Filters{}), s.trust())
			require.True(t, empty.OK, empty.Verdict)
			require.Contains(t, empty.Verdict, "OK 0 events, no events")
		})
	}
}

func TestTamperedExportsFailAndNameTheLine(t *testing.T) {
	s := newSigner(t, "audit-1")
	for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
		// first is the file line of the first event (CSV has a header line).
		first := 1
		if format == exportfile.CSV {
			first = 2
		}
		t.Run(format, func(t *testing.T) {
			whole := export(t, s, format, chain(10), exportfile.Filters{})
			lines := fileLines(whole)
			event := func(i int) int { return first - 1 + i } // file index (0-based) of event i (0-based)

			cases := map[string]tamper{}
			edited := append([]string{}, lines...)
			edited[event(3)] = strings.Replace(edited[event(3)], `"i":4`, `"i":5`, 1)
			if format == exportfile.CSV {
				edited[event(3)] = strings.Replace(lines[event(3)], `""i"":4`, `""i"":5`, 1)
			}
			require.NotEqual(t, lines[event(3)], edited[event(3)], "the edit took")
			cases["edited"] = tamper{join(edited), event(3) + 1, "the event's hash does not match its bytes"}

			removed := append(append([]string{}, lines[:event(5)]...), lines[event(5)+1:]...)
			cases["removed"] = tamper{join(removed), event(5) + 1, "seq 7 does not follow seq 5"}

			removedFirst := append(append([]string{}, lines[:event(0)]...), lines[event(0)+1:]...)
			cases["removed first"] = tamper{join(removedFirst), event(0) + 1, "does not follow the anchor"}

			removedLast := append(append([]string{}, lines[:event(9)]...), lines[event(9)+1:]...)
			cases["removed last"] = tamper{join(removedLast), event(9) + 1, "the manifest says 10 events ending at seq 10"}

			inserted := append(append(append([]string{}, lines[:event(4)]...), lines[event(2)]), lines[event(4):]...)
			cases["inserted"] = tamper{join(inserted), event(4) + 1, "seq 3 does not follow seq 4"}

			reordered := append([]string{}, lines...)
			reordered[event(6)], reordered[event(7)] = reordered[event(7)], reordered[event(6)]
			cases["reordered"] = tamper{join(reordered), event(6) + 1, "seq 8 does not follow seq 6"}

			for name, c := range cases {
				r := verify(c.data, s.trust())
				require.False(t, r.OK, name)
				require.Equal(t, c.line, r.Line, "%s: %s", name, r.Verdict)
				require.Contains(t, r.Verdict, fmt.Sprintf("FAIL line %d: ", c.line), name)
				require.Contains(t, r.Verdict, c.says, name)
			}

			// The signature, the key id and the key itself.
			last := len(lines) - 2 // the trailer (lines ends with "" after the final newline)
			trailerLine := last + 1
			sigEdited := append([]string{}, lines...)
			sigEdited[last] = flipSignature(t, lines[last], format)
			r := verify(join(sigEdited), s.trust())
			require.False(t, r.OK)
			require.Equal(t, trailerLine, r.Line)
			require.Contains(t, r.Verdict, "signature: does not verify")

			kidEdited := append([]string{}, lines...)
			kidEdited[last] = strings.Replace(lines[last], "audit-1", "audit-2", 1)
			r = verify(join(kidEdited), s.trust())
			require.False(t, r.OK)
			require.Contains(t, r.Verdict, "signature: does not verify")

			// Re-signed by someone else's key: valid signature, untrusted key.
			mallory := newSigner(t, "audit-1")
			forged := export(t, mallory, format, chain(10), exportfile.Filters{})
			r = verify(forged, s.trust())
			require.False(t, r.OK)
			require.Contains(t, r.Verdict, "signature: key audit-1 ("+exportfile.Fingerprint(mallory.Public())+") is not the pinned key")
			r = verify(forged, exportfile.Trust{Keys: s.keys()})
			require.False(t, r.OK)
			require.Contains(t, r.Verdict, "is not the organization's key of that id")
			r = verify(whole, exportfile.Trust{})
			require.False(t, r.OK)
			require.Contains(t, r.Verdict, "the key is not pinned: pass --key "+exportfile.Fingerprint(s.Public()))

			truncated := join(lines[:last])
			r = verify(truncated, s.trust())
			require.False(t, r.OK)
			require.Contains(t, r.Verdict, "not the signed manifest")

			// A change no line check sees (a trailing space) still breaks the digest.
			spaced := append([]string{}, lines...)
			spaced[event(2)] = strings.TrimSuffix(lines[event(2)], "\n") + " \n"
			r = verify(join(spaced), s.trust())
			require.False(t, r.OK)
			if format == exportfile.JSONL {
				require.Contains(t, r.Verdict, "the file's sha256 differs from the signed manifest's")
			}
		})
	}
}

func TestFilteredExportsRefuseDisorder(t *testing.T) {
	s := newSigner(t, "audit-1")
	events := chain(10)
	data := export(t, s, exportfile.JSONL, []exportfile.Line{events[1], events[4], events[8]}, exportfile.Filters{Run: "run-1"})
	lines := fileLines(data)
	lines[1], lines[2] = lines[2], lines[1]
	r := verify(join(lines), s.trust())
	require.False(t, r.OK)
	require.Equal(t, 3, r.Line)
	require.Contains(t, r.Verdict, "seq 5 after seq 9 (events out of order or repeated)")

	lines = fileLines(data)
	removed := append(append([]string{}, lines[:1]...), lines[2:]...)
	r = verify(join(removed), s.trust())
	require.False(t, r.OK)
	require.Contains(t, r.Verdict, "the file ends after 2 events")
}

// tamper is an altered export: the first bad line verification must name, and what
// it must say about it.
type tamper struct {
	data []byte
	line int
	says string
}

func flipSignature(t *testing.T, line, format string) string {
	t.Helper()
	i := strings.LastIndex(line, `"signature":"`)
	j := i + len(`"signature":"`)
	if format == exportfile.CSV {
		i = strings.LastIndex(line, ",")
		j = i + 1
	}
	require.Positive(t, i)
	c := line[j]
	repl := byte('A')
	if c == 'A' {
		repl = 'B'
	}
	return line[:j] + string(repl) + line[j+1:]
}
