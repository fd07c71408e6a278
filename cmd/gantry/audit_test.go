package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/attest"
	"gantry/models/audit"
	"gantry/models/audit/exportfile"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/db/dbtest"
	"gantry/models/keyring"
	"gantry/models/org"
)

type noQueue struct{}

func (noQueue) EnqueueExport(context.Context, string) error { return nil }

// TestAuditVerifyAndKeysList: an export built by Gantry verifies with `gantry audit
// verify` against the fingerprint `gantry keys list` prints, and fails, naming the
// line, once a line is edited; exit statuses 0, 1 and 2 say which.
func TestAuditVerifyAndKeysList(t *testing.T) {
	ctx := context.Background()
	dsn := dbtest.NewURL(t)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"migrate", "--database-url", dsn}, &out, &errOut), errOut.String())
	gdb, err := db.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})
	log := audit.New(gdb)
	o, err := org.NewService(gdb, log).EnsureOrganization(ctx, "acme", "Acme")
	require.NoError(t, err)
	auditor := authz.WithSubject(ctx, authz.Subject{UserID: "usr-a", Name: "Ada", OrganizationID: o.ID, Role: authz.RoleAuditor})
	for i := range 20 {
		require.NoError(t, log.Record(auditor, audit.Entry{Action: "test.event", TargetType: "thing", TargetID: "t", Data: map[string]any{"i": i}}))
	}
	keys, err := keyring.Parse(keyring.NewKeySpec("k1"))
	require.NoError(t, err)
	signers := audit.NewKeys(gdb, keys)
	exports := audit.NewExports(gdb, log, keys, signers, noQueue{})
	// exportOf builds an export of q in format, as the auditor, and reads its file.
	exportOf := func(format string, q audit.Query) []byte {
		t.Helper()
		e, err := exports.Request(auditor, audit.ExportRequest{Format: format, Query: q})
		require.NoError(t, err)
		require.NoError(t, exports.Build(ctx, e.ID))
		e, err = exports.Get(auditor, e.ID)
		require.NoError(t, err)
		r, err := exports.Reader(auditor, e)
		require.NoError(t, err)
		data, err := io.ReadAll(r)
		require.NoError(t, err)
		return data
	}
	data := exportOf(exportfile.JSONL, audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)})
	dir := t.TempDir()
	file := filepath.Join(dir, "export.jsonl")
	require.NoError(t, os.WriteFile(file, data, 0o600))

	out.Reset()
	require.Equal(t, 0, run([]string{"keys", "list", "--database-url", dsn}, &out, &errOut), errOut.String())
	set, err := signers.Published(auditor)
	require.NoError(t, err)
	fingerprint := set.Keys[0].Fingerprint
	require.Contains(t, out.String(), "acme")
	require.Contains(t, out.String(), fingerprint)
	require.Contains(t, out.String(), "current")

	verify := func(args ...string) (int, string) {
		out.Reset()
		errOut.Reset()
		code := run(append([]string{"audit", "verify"}, args...), &out, &errOut)
		return code, strings.TrimSpace(out.String())
	}
	code, verdict := verify(file, "--key", fingerprint)
	require.Equal(t, 0, code, errOut.String())
	require.Equal(t, 1, strings.Count(verdict, "\n")+1, "one line: %s", verdict)
	require.True(t, strings.HasPrefix(verdict, "OK 21 events, seq 1..21, chain verified"), verdict)

	keysFile := filepath.Join(dir, "keys.json")
	raw, err := json.Marshal(set)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keysFile, raw, 0o600))
	code, verdict = verify("--keys-url", keysFile, file)
	require.Equal(t, 0, code, verdict)

	code, verdict = verify(file)
	require.Equal(t, 1, code)
	require.Contains(t, verdict, "FAIL signature valid but the key is not pinned: pass --key "+fingerprint)

	lines := strings.SplitAfter(string(data), "\n")
	lines[6] = strings.Replace(lines[6], `"i":5`, `"i":6`, 1)
	edited := filepath.Join(dir, "edited.jsonl")
	require.NoError(t, os.WriteFile(edited, []byte(strings.Join(lines, "")), 0o600))
	code, verdict = verify(edited, "--key", fingerprint)
	require.Equal(t, 1, code)
	require.Equal(t, "FAIL line 7: seq 7: the event's hash does not match its bytes (the event was edited)", verdict)
	require.Empty(t, errOut.String(), "a failed verification is its verdict, not an error log")

	// The script of docs/audit-format.md, outside Gantry, reaches the same verdicts.
	script := func(file string) (int, string) {
		code, out, errOut := runScript(t, file, fingerprint)
		return code, strings.TrimSpace(out + errOut)
	}
	code, verdict = script(file)
	require.Equal(t, 0, code, verdict)
	require.Equal(t, "OK 21 events, mode chain, signed by "+set.Keys[0].KeyID+" ("+fingerprint+")", verdict)
	code, verdict = script(edited)
	require.Equal(t, 1, code, verdict)
	require.Equal(t, "FAIL line 7: seq 7: the event's hash does not match its bytes (the event was edited)", verdict)
	csvData := exportOf(exportfile.CSV, audit.Query{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour), Action: "test.event"})
	csvFile := filepath.Join(dir, "export.csv")
	require.NoError(t, os.WriteFile(csvFile, csvData, 0o600))
	code, verdict = script(csvFile)
	require.Equal(t, 0, code, verdict)
	require.Contains(t, verdict, "OK 20 events, mode events")
	code, verdict = verify(csvFile, "--key", fingerprint)
	require.Equal(t, 0, code, verdict)
	csvLines := strings.SplitAfter(string(csvData), "\n")
	csvLines[3], csvLines[4] = csvLines[4], csvLines[3]
	swapped := filepath.Join(dir, "swapped.csv")
	require.NoError(t, os.WriteFile(swapped, []byte(strings.Join(csvLines, "")), 0o600))
	code, verdict = script(swapped)
	require.Equal(t, 1, code, verdict)
	require.Contains(t, verdict, "FAIL line 5: seq")
	code, verdict = verify(swapped, "--key", fingerprint)
	require.Equal(t, 1, code, verdict)
	require.Contains(t, verdict, "FAIL line 5: seq")

	// Bounds as pipelines and the browser give them: whole seconds (RFC 3339 over the
	// API) and minutes (the page's form). The script once read a zone's digits as
	// fractional seconds there and stopped on a naive-aware comparison.
	now := time.Now().UTC()
	for name, q := range map[string]audit.Query{
		"whole-second": {From: now.Add(-time.Hour).Truncate(time.Second), To: now.Add(time.Hour).Truncate(time.Second)},
		"minute":       {From: now.Add(-time.Hour).Truncate(time.Minute), To: now.Add(time.Hour).Truncate(time.Minute)},
	} {
		for _, format := range []string{exportfile.JSONL, exportfile.CSV} {
			raw := exportOf(format, q)
			require.Contains(t, string(raw), q.From.Format(time.RFC3339), "%s bounds in the manifest", name)
			bounded := filepath.Join(dir, name+"."+format)
			require.NoError(t, os.WriteFile(bounded, raw, 0o600))
			code, verdict = script(bounded)
			require.Equal(t, 0, code, "%s %s: %s", name, format, verdict)
			require.Regexp(t, `^OK \d+ events, mode chain, signed by `, verdict)
			code, verdict = verify(bounded, "--key", fingerprint)
			require.Equal(t, 0, code, "%s %s: %s", name, format, verdict)

			// Truncated, or without its manifest: the same one-line verdict from both.
			cut := raw[:len(raw)/2]
			withoutManifest := raw[:bytes.LastIndexByte(raw[:len(raw)-1], '\n')+1]
			for what, broken := range map[string][]byte{"truncated": cut, "without its manifest": withoutManifest} {
				brokenFile := filepath.Join(dir, "broken."+format)
				require.NoError(t, os.WriteFile(brokenFile, broken, 0o600))
				want := fmt.Sprintf("FAIL line %d: the last line is not the signed manifest (file truncated?)", bytes.Count(broken, []byte("\n"))+
					min(1, len(broken)-bytes.LastIndexByte(broken, '\n')-1))
				code, verdict = script(brokenFile)
				require.Equal(t, 1, code, "%s %s: %s", what, format, verdict)
				require.Equal(t, want, verdict, "%s %s", what, format)
				code, verdict = verify(brokenFile, "--key", fingerprint)
				require.Equal(t, 1, code, "%s %s: %s", what, format, verdict)
				require.Equal(t, want, verdict, "%s %s", what, format)
			}
		}
	}

	// An attestation bundle: verified with the same pinned key; another digest fails.
	signer, err := signers.Signer(ctx, o.ID)
	require.NoError(t, err)
	statement, err := attest.Statement([]attest.Subject{{Name: "state-version/sv-1", SHA256: strings.Repeat("ab", 32)}},
		map[string]any{"run": "run-1"})
	require.NoError(t, err)
	b, err := attest.Sign(ctx, signer, statement)
	require.NoError(t, err)
	rawBundle, err := json.Marshal(b)
	require.NoError(t, err)
	bundleFile := filepath.Join(dir, "attestation.json")
	require.NoError(t, os.WriteFile(bundleFile, rawBundle, 0o600))
	code, verdict = verify("--attestation", bundleFile, "--key", fingerprint)
	require.Equal(t, 0, code, verdict)
	require.Equal(t, "OK attestation of run run-1: 1 state versions (first state-version/sv-1 sha256:"+strings.Repeat("ab", 32)+"); signed by "+
		signer.KeyID()+" ("+fingerprint+")", verdict)
	other, err := attest.Statement([]attest.Subject{{Name: "state-version/sv-1", SHA256: strings.Repeat("cd", 32)}}, map[string]any{"run": "run-1"})
	require.NoError(t, err)
	b.DSSEEnvelope.Payload = base64.StdEncoding.EncodeToString(other)
	rawBundle, err = json.Marshal(b)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bundleFile, rawBundle, 0o600))
	code, verdict = verify("--attestation", bundleFile, "--key", fingerprint)
	require.Equal(t, 1, code)
	require.Contains(t, verdict, "FAIL signature: does not verify over the statement")

	code, _ = verify("--key", fingerprint)
	require.Equal(t, 2, code, "no file")
	code, _ = verify(filepath.Join(dir, "missing.jsonl"), "--key", fingerprint)
	require.Equal(t, 1, code)
}

// TestAuditVerifyKeysURLOfThePortal: the documented form, `gantry audit verify FILE
// --keys-url <portal>/api/v1/audit/keys`, verifies with the API token in GANTRY_TOKEN
// (the keys are served to members only); without one it says to set it (exit 2), and
// a refused token is said to be refused.
func TestAuditVerifyKeysURLOfThePortal(t *testing.T) {
	app := webtest.Start(t)
	auditor := app.NewMember(t, "acme", "Kim Keys", authz.RoleAuditor, false)
	viewer := app.NewMember(t, "acme", "Val Viewer", authz.RoleViewer, false)
	t.Setenv("GANTRY_URL", app.URL)
	cli := func(token string, args ...string) (int, string, string) {
		t.Helper()
		t.Setenv("GANTRY_TOKEN", token)
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return code, strings.TrimSpace(out.String()), errOut.String()
	}
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	// A minute past now: the default (now, whole seconds) leaves out this second's events.
	code, out, errOut := cli(app.Token(t, auditor, "audit"), "audit", "export", "-o", file,
		"--to", time.Now().UTC().Add(time.Minute).Truncate(time.Minute).Format(time.RFC3339))
	require.Equal(t, 0, code, out+errOut)
	keysURL := app.URL + "/api/v1/audit/keys"

	code, verdict, errOut := cli(app.Token(t, viewer, "read"), "audit", "verify", file, "--keys-url", keysURL)
	require.Equal(t, 0, code, verdict+errOut)
	require.Regexp(t, `^OK \d+ events, seq 1\.\.\d+, chain verified from its anchor; signed by audit-`, verdict)

	code, verdict, errOut = cli("", "audit", "verify", file, "--keys-url", keysURL)
	require.Equal(t, 2, code, verdict+errOut)
	require.Empty(t, verdict)
	require.Contains(t, errOut, "gantry audit: --keys-url: "+keysURL+" answered 401 Unauthorized: the portal shows its keys to members only; set GANTRY_TOKEN")

	code, verdict, errOut = cli("gantry_nope.nope", "audit", "verify", file, "--keys-url", keysURL)
	require.Equal(t, 1, code, verdict+errOut)
	require.Contains(t, errOut, "answered 401 Unauthorized: the portal refused GANTRY_TOKEN")
}
