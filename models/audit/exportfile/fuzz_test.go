package exportfile_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"gantry/models/audit/exportfile"
	"gantry/models/words"
)

// Fixed keys, so that the seeds built below are the same in every fuzzing process.
var (
	fuzzSigner  = signer{kid: "audit-fuzz", priv: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))}
	otherSigner = signer{kid: "audit-fuzz", priv: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))}
)

// writeExport writes lines as an export signed by s, as the portal does, and returns
// the file and the manifest as signed.
func writeExport(tb testing.TB, s signer, format string, lines []exportfile.Line, f exportfile.Filters) ([]byte, exportfile.Manifest) {
	tb.Helper()
	var buf bytes.Buffer
	m := exportfile.Manifest{ExportID: "exp-fuzz", OrganizationID: "org-1", From: start, To: start.Add(24 * time.Hour), Filters: f, CreatedAt: start}
	w, err := exportfile.NewWriter(&buf, format, m)
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range lines {
		if err := w.Write(l); err != nil {
			tb.Fatal(err)
		}
	}
	signed, err := w.Close(s)
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), signed
}

// trailerStart is where the last line of data starts, as the verifier finds it.
func trailerStart(data []byte) int {
	end := len(data)
	if end > 0 && data[end-1] == '\n' {
		end--
	}
	return bytes.LastIndexByte(data[:end], '\n') + 1
}

// manifestJSON is m as JSON, read back once: the signed JSON carries an invalid UTF-8
// filter as U+FFFD, which then encodes unescaped.
func manifestJSON(tb testing.TB, m exportfile.Manifest) string {
	tb.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	var back exportfile.Manifest
	if err := json.Unmarshal(b, &back); err != nil {
		tb.Fatal(err)
	}
	if b, err = json.Marshal(back); err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// FuzzVerify verifies any bytes as an export file, trusting the fuzzing key pinned or by
// a key set, nothing, or another key pinned: Verify never panics; a failure says FAIL
// and names a line of the file (or none); and it passes only a file whose bytes before
// the manifest line are exactly those of an export the trusted key signed (the seeds:
// no other file can be signed here), with that export's manifest.
func FuzzVerify(f *testing.F) {
	events := chain(6)
	// Per key: sha256 of the bytes before the manifest line -> the manifest it signed.
	signed := map[*signer]map[string]string{&fuzzSigner: {}, &otherSigner: {}}
	add := func(s *signer, data []byte, m exportfile.Manifest) {
		sum := sha256.Sum256(data[:trailerStart(data)])
		signed[s][hex.EncodeToString(sum[:])] = manifestJSON(f, m)
	}
	for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
		for _, c := range []struct {
			lines   []exportfile.Line
			filters exportfile.Filters
		}{
			{events, exportfile.Filters{}},
			{events[2:5], exportfile.Filters{}},
			{[]exportfile.Line{events[0], events[3], events[5]}, exportfile.Filters{Action: "test.event"}},
			{nil, exportfile.Filters{}},
		} {
			data, m := writeExport(f, fuzzSigner, format, c.lines, c.filters)
			add(&fuzzSigner, data, m)
			f.Add(data, uint8(0))
			f.Add(data, uint8(1))
		}
		forged, m := writeExport(f, otherSigner, format, events[:2], exportfile.Filters{})
		add(&otherSigner, forged, m)
		f.Add(forged, uint8(0))
		f.Add(forged, uint8(3))
	}
	f.Add([]byte(""), uint8(0))
	f.Add([]byte("\n\n"), uint8(0))
	f.Add([]byte(`{"signed":"{\"version\":1}","signature":""}`+"\n"), uint8(0))
	f.Add([]byte("#gantry-manifest,\"{\"\"version\"\":1}\",AAAA\n"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, trustMode uint8) {
		var trust exportfile.Trust
		var trusted *signer
		switch trustMode % 4 {
		case 0:
			trust, trusted = fuzzSigner.trust(), &fuzzSigner
		case 1:
			trust, trusted = exportfile.Trust{Keys: fuzzSigner.keys()}, &fuzzSigner
		case 2: // nothing trusted
		case 3:
			trust, trusted = otherSigner.trust(), &otherSigner
		}
		r := exportfile.Verify(bytes.NewReader(data), trust)
		if !r.OK {
			lines := bytes.Count(data, []byte("\n"))
			if !strings.HasPrefix(r.Verdict, "FAIL ") || r.Line < 0 || r.Line > lines+2 {
				t.Fatalf("failed with line %d of %d: %q", r.Line, lines, r.Verdict)
			}
			return
		}
		if !strings.HasPrefix(r.Verdict, "OK ") || r.Line != 0 {
			t.Fatalf("passed with line %d: %q", r.Line, r.Verdict)
		}
		if trusted == nil {
			t.Fatalf("passed trusting no key: %q", r.Verdict)
		}
		sum := sha256.Sum256(data[:trailerStart(data)])
		want, ok := signed[trusted][hex.EncodeToString(sum[:])]
		if !ok {
			t.Fatalf("passed a file whose events the trusted key never signed: %q\n%s", r.Verdict, data)
		}
		if got := manifestJSON(t, r.Manifest); got != want {
			t.Fatalf("passed with manifest %s, the export signed %s", got, want)
		}
	})
}

// FuzzExportRoundTrip writes events holding any text as an export and verifies it:
// whatever the actor names, actions and data, in either format, whole or filtered,
// starting anywhere in the chain, what the writer writes verifies, with the count and
// range it holds. Changing any byte before the manifest line then fails verification;
// changing a byte of the manifest line either fails or leaves the signed manifest as it
// was.
func FuzzExportRoundTrip(f *testing.F) {
	f.Add("Ann, \"the\" auditor", "run.approved", `{"reason":"ok"}`, uint8(5), false, false, uint16(0), uint32(17), uint8(1))
	f.Add("Bob\n\r\x00\x7f", "state.version_created", "ü\u2028<&>", uint8(3), true, false, uint16(41), uint32(300), uint8(0x20))
	f.Add("", "", "", uint8(0), true, true, uint16(0), uint32(0), uint8(0x80))
	f.Add("\xff\xfe", "a,b", "\"\"\"", uint8(4), false, true, uint16(65535), uint32(1<<31), uint8(0xff))
	f.Fuzz(func(t *testing.T, actor, action, data string, n uint8, csv, filtered bool, first uint16, pos uint32, flip uint8) {
		format := exportfile.JSONL
		if csv {
			format = exportfile.CSV
		}
		var lines []exportfile.Line
		prev := []byte{}
		if first > 0 {
			anchor := sha256.Sum256([]byte(fmt.Sprint("event ", first)))
			prev = anchor[:]
		}
		for i := range int(n % 6) {
			seq := int64(first) + int64(i) + 1
			at := start.Add(time.Duration(seq) * time.Second).Format("2006-01-02T15:04:05.000000Z")
			body, err := json.Marshal(map[string]any{"action": action, "actor_id": "usr-1", "actor_name": actor,
				"data": map[string]any{"text": data, "i": i}, "occurred_at": at, "organization_id": "org-1", "seq": seq,
				"target_id": "t", "target_type": "thing"})
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			h.Write(prev)
			h.Write(body)
			sum := h.Sum(nil)
			lines = append(lines, exportfile.Line{Seq: seq, PrevHash: prev, Hash: sum, Body: body, OccurredAt: at,
				ActorName: actor, Action: action, TargetType: "thing", TargetID: data})
			prev = sum
		}
		filters := exportfile.Filters{}
		if filtered {
			filters.Action = action + "."
			var kept []exportfile.Line
			for i, l := range lines {
				if i%2 == 0 {
					kept = append(kept, l)
				}
			}
			lines = kept
		}

		out, m := writeExport(t, fuzzSigner, format, lines, filters)
		r := exportfile.Verify(bytes.NewReader(out), fuzzSigner.trust())
		if !r.OK {
			t.Fatalf("a written export does not verify: %s\n%s", r.Verdict, out)
		}
		span := "no events"
		if len(lines) > 0 {
			span = fmt.Sprintf("seq %d..%d", lines[0].Seq, lines[len(lines)-1].Seq)
		}
		if r.Manifest.Events != int64(len(lines)) || !strings.HasPrefix(r.Verdict, fmt.Sprintf("OK %s, %s, ", words.Count(len(lines), "event", "events"), span)) {
			t.Fatalf("%d events written, verified %q", len(lines), r.Verdict)
		}
		if manifestJSON(t, r.Manifest) != manifestJSON(t, m) {
			t.Fatalf("verified manifest %+v, signed %+v", r.Manifest, m)
		}

		// One byte changed.
		i := int(pos % uint32(len(out)))
		tampered := bytes.Clone(out)
		tampered[i] ^= max(flip, 1)
		r = exportfile.Verify(bytes.NewReader(tampered), fuzzSigner.trust())
		switch {
		case !r.OK:
		case i < trailerStart(out):
			t.Fatalf("byte %d (%q -> %q) changed before the manifest, and the file still verifies: %s", i, out[i], tampered[i], r.Verdict)
		case manifestJSON(t, r.Manifest) != manifestJSON(t, m):
			t.Fatalf("byte %d of the manifest line changed the manifest and the file still verifies: %+v", i, r.Manifest)
		}
	})
}
