package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit/exportfile"
)

// keySigner signs exports with a key of the test's own.
type keySigner struct{ priv ed25519.PrivateKey }

func (s keySigner) KeyID() string                   { return "audit-test" }
func (s keySigner) Public() ed25519.PublicKey       { return s.priv.Public().(ed25519.PublicKey) }
func (s keySigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// verdicts runs both verifiers of an export file: `gantry audit verify` and the
// script of docs/audit-format.md. Each answers with its exit status and its output.
type verdicts struct {
	t           *testing.T
	dir         string
	fingerprint string
}

func (v verdicts) of(name string, data []byte) (cliCode int, cli string, scriptCode int, script string) {
	v.t.Helper()
	file := filepath.Join(v.dir, name)
	require.NoError(v.t, os.WriteFile(file, data, 0o600))
	var out, errOut bytes.Buffer
	cliCode = run([]string{"audit", "verify", file, "--key", v.fingerprint}, &out, &errOut)
	require.Empty(v.t, errOut.String(), "%s: a verification's answer is its verdict, not an error log", name)
	scriptCode, scriptOut, scriptErr := runScript(v.t, file, v.fingerprint)
	require.Empty(v.t, scriptErr, "%s: the script wrote to stderr (a traceback?)", name)
	return cliCode, strings.TrimSpace(out.String()), scriptCode, strings.TrimSpace(scriptOut)
}

// runScript runs docs/audit-verify.py on file with the pinned fingerprint and returns
// its exit status, stdout and stderr.
func runScript(t *testing.T, file, fingerprint string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command("python3", filepath.Join("..", "..", "docs", "audit-verify.py"), file, fingerprint)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, out.String(), errOut.String()
}

// scriptEvents is n events of org-1 from at, a second apart, linked as Gantry links
// them, with their times as the database writes them (microseconds, UTC).
func scriptEvents(at time.Time, n int) []exportfile.Line {
	var out []exportfile.Line
	var prev []byte
	for i := 1; i <= n; i++ {
		when := at.Add(time.Duration(i-1) * time.Second).UTC().Format("2006-01-02T15:04:05.000000Z")
		body := fmt.Sprintf(`{"action":"test.event","actor_id":"usr-1","actor_name":"Ann","data":{"i":%d},"occurred_at":%q,"organization_id":"org-1","seq":%d,"target_id":"t","target_type":"thing"}`,
			i, when, i)
		sum := sha256.Sum256(append(append([]byte{}, prev...), body...))
		out = append(out, exportfile.Line{Seq: int64(i), PrevHash: prev, Hash: sum[:], Body: []byte(body), OccurredAt: when,
			ActorName: "Ann", Action: "test.event", TargetType: "thing", TargetID: "t"})
		prev = sum[:]
	}
	return out
}

// TestAuditVerifyScriptAgreesWithGantry: the script of docs/audit-format.md gives the
// verdict `gantry audit verify` gives, on every kind of bounds an export can carry
// (fractional, whole-second, minute, Z or an offset, a nanosecond either side of an
// event) and on every kind of broken file (truncated, without its manifest, garbage):
// one line each, OK or FAIL naming the same line, never a traceback.
func TestAuditVerifyScriptAgreesWithGantry(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s := keySigner{priv: priv}
	v := verdicts{t: t, dir: t.TempDir(), fingerprint: exportfile.Fingerprint(s.Public())}
	first := time.Date(2026, 3, 1, 9, 30, 12, 345678000, time.UTC)
	lines := scriptEvents(first, 3) // 09:30:12.345678 to 09:30:14.345678
	export := func(format string, from, to time.Time) []byte {
		var buf bytes.Buffer
		w, err := exportfile.NewWriter(&buf, format, exportfile.Manifest{ExportID: "exp-1", OrganizationID: "org-1", From: from, To: to, CreatedAt: first})
		require.NoError(t, err)
		for _, l := range lines {
			require.NoError(t, w.Write(l))
		}
		_, err = w.Close(s)
		require.NoError(t, err)
		return buf.Bytes()
	}
	plus2, minus530 := time.FixedZone("", 2*3600), time.FixedZone("", -(5*3600+30*60))
	last := first.Add(2 * time.Second)
	bounds := []struct {
		name     string
		from, to time.Time
		ok       bool
	}{
		{"fractional", first.Add(-time.Hour), last.Add(time.Hour), true},
		{"whole-second", first.Truncate(time.Second), last.Truncate(time.Second).Add(time.Second), true},
		{"minute", first.Truncate(time.Minute), first.Truncate(time.Minute).Add(time.Minute), true},
		{"offset +02:00", first.Truncate(time.Minute).In(plus2), last.Add(time.Hour).In(plus2), true},
		{"offset -05:30, nanoseconds", first.In(minus530), last.Add(time.Nanosecond).In(minus530), true},
		{"from a nanosecond after the first event", first.Add(time.Nanosecond), last.Add(time.Hour), false},
		{"to the last event's own time (the range is [from, to))", first.Add(-time.Hour), last, false},
	}
	for _, b := range bounds {
		for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
			name := b.name + " " + format
			cliCode, cli, scriptCode, script := v.of("bounds."+format, export(format, b.from, b.to))
			require.Equal(t, 0, strings.Count(cli, "\n"), "%s: one line: %s", name, cli)
			require.Equal(t, 0, strings.Count(script, "\n"), "%s: one line: %s", name, script)
			if b.ok {
				require.Equal(t, 0, cliCode, "%s: %s", name, cli)
				require.Equal(t, 0, scriptCode, "%s: %s", name, script)
				require.Equal(t, "OK 3 events, mode chain, signed by audit-test ("+v.fingerprint+")", script, name)
				continue
			}
			require.Equal(t, 1, cliCode, "%s: %s", name, cli)
			require.Equal(t, 1, scriptCode, "%s: %s", name, script)
			require.Contains(t, script, "outside the export's range", name)
			require.Equal(t, failedLine(cli), failedLine(script), "%s: the same line: %s | %s", name, cli, script)
		}
	}

	good := map[string][]byte{exportfile.JSONL: export(exportfile.JSONL, first.Add(-time.Hour), last.Add(time.Hour)),
		exportfile.CSV: export(exportfile.CSV, first.Add(-time.Hour), last.Add(time.Hour))}
	garbage := make([]byte, 300)
	_, err = rand.Read(garbage)
	require.NoError(t, err)
	broken := []struct {
		name string
		data func(format string) []byte
		// the verdict both give, when they say it in the same words
		want string
	}{
		{"truncated mid-line", func(f string) []byte { return good[f][:len(good[f])*2/3] }, ""},
		{"truncated in the manifest", func(f string) []byte { return good[f][:len(good[f])-40] }, ""},
		{"without its manifest", func(f string) []byte { return withoutLastLine(good[f]) }, ""},
		{"its manifest alone", func(f string) []byte { return lastLine(good[f]) }, ""},
		{"empty", func(string) []byte { return nil }, "FAIL the file is empty"},
		{"one empty line", func(string) []byte { return []byte("\n") }, "FAIL line 1: the last line is not the signed manifest (file truncated?)"},
		{"random bytes", func(string) []byte { return garbage }, ""},
		{"random bytes before the manifest", func(f string) []byte { return append(append([]byte{}, garbage...), good[f]...) }, ""},
		{"JSON nested deeper than Python recurses", func(string) []byte { return []byte(strings.Repeat("[", 100000) + "\n") },
			"FAIL line 1: the last line is not the signed manifest (file truncated?)"},
		{"a line that is JSON but no event", func(f string) []byte { return append([]byte("{\"seq\":\"one\"}\n"), good[f]...) }, ""},
		{"a manifest whose fields have other types", func(string) []byte {
			return []byte(`{"signed":"{\"version\":\"1\",\"from\":7}","signature":""}` + "\n")
		}, ""},
	}
	for _, b := range broken {
		for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
			name := b.name + " " + format
			cliCode, cli, scriptCode, script := v.of("broken."+format, b.data(format))
			require.Equal(t, 1, cliCode, "%s: %s", name, cli)
			require.Equal(t, 1, scriptCode, "%s: %s", name, script)
			require.Equal(t, 0, strings.Count(cli, "\n"), "%s: one line: %s", name, cli)
			require.Equal(t, 0, strings.Count(script, "\n"), "%s: one line: %s", name, script)
			require.True(t, strings.HasPrefix(script, "FAIL "), "%s: %s", name, script)
			require.NotContains(t, script, "could not be read as an export", "%s: the script's last resort answered, not its checks", name)
			require.Equal(t, failedLine(cli), failedLine(script), "%s: the same line: %s | %s", name, cli, script)
			if b.want != "" {
				require.Equal(t, b.want, cli, name)
				require.Equal(t, b.want, script, name)
			}
		}
	}
	// Truncated or without its manifest: the same words from both, naming the last line.
	for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
		cut := withoutLastLine(good[format])
		_, cli, _, script := v.of("cut."+format, cut)
		want := fmt.Sprintf("FAIL line %d: the last line is not the signed manifest (file truncated?)", bytes.Count(cut, []byte("\n")))
		require.Equal(t, want, cli)
		require.Equal(t, want, script)
	}
}

// failedLine is the line a FAIL verdict names ("" when none).
func failedLine(verdict string) string {
	var n int
	if _, err := fmt.Sscanf(verdict, "FAIL line %d:", &n); err != nil {
		return ""
	}
	return fmt.Sprint(n)
}

func withoutLastLine(data []byte) []byte {
	trimmed := bytes.TrimSuffix(data, []byte("\n"))
	return data[:bytes.LastIndexByte(trimmed, '\n')+1]
}

func lastLine(data []byte) []byte { return data[len(withoutLastLine(data)):] }
