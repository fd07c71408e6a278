//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu): the sensitive-input part of TestSecretsNeverLeak.

package web_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/cmd/gantry/webtest"
	"gantry/models/artifact"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/run"
)

// canaryNote is the sensitive input of the noted run in TestSecretsNeverLeak.
const canaryNote = "kea-canary-access-note-8c1e5b37"

// requireSensitiveInputsNeverLeak is TestSecretsNeverLeak's part for a sensitive template
// input (DESIGN §6): a noted run is requested through the API with canaryNote as its
// access note, planned with live OpenTofu, approved by admin, applied and verified in
// envID. The note appears in no file a job left (but its saved plans), no decrypted
// artifact (but its plan file), no state version, log, live log, page, stream, API
// answer, database dump, or sandbox cloud file or log; the digest the template derives
// from it (a label, which OpenTofu marks sensitive) appears in none of those either but
// the state versions and the cloud, which hold the resource as it is. The saved plan is
// the one exception, and must hold the note: OpenTofu keeps the variables' values in it
// so that its apply needs none; it is encrypted at rest and never shown.
func (a canaryApp) requireSensitiveInputsNeverLeak(t *testing.T, admin *http.Client, envID string) {
	t.Helper()
	sum := sha256.Sum256([]byte(canaryNote))
	digest := hex.EncodeToString(sum[:])
	both := map[string]string{canaryNote: "sensitive input", digest: "sensitive input's digest"}
	scan := &leakScanner{t: t, canaries: both, seen: map[string]int{}}
	// Where the resource is kept as it is (state, cloud), its digest label is expected.
	noteOnly := &leakScanner{t: t, canaries: map[string]string{canaryNote: "sensitive input"}, seen: scan.seen}
	files, dirSeen := len(a.exec.files()), map[string]bool{}

	requester := a.NewMember(t, "acme", "Nell Noted", authz.RoleOperator, true)
	token := a.Token(t, requester, "read", "plan", "apply")
	request := fmt.Sprintf(`{"template":"noted","environment_id":%q,"workspace":"canary-noted","inputs":{"name":"canary-noted","access_note":%q}}`,
		envID, canaryNote)
	resp := a.API(t, token, http.MethodPost, "/api/v1/requests", request)
	answer := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusCreated, resp.StatusCode, answer)
	scan.blob("api", "POST /api/v1/requests", []byte(answer))
	var created struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(answer), &created))
	r := waitForState(t, a.App, created.ID, run.PendingApproval)
	review := webtest.ReadBody(t, a.Get(t, admin, "/runs/"+r.ID+"/review"))
	scan.blob("page", "review (pending)", []byte(review))
	approve(t, a.App, admin, r)
	r = waitForState(t, a.App, r.ID, run.Succeeded)

	// The plan JSON OpenTofu wrote held the note and its digest; the stored one masks both.
	planJSON, _, err := a.System.Artifacts.Get(t.Context(), r.OrganizationID, *r.PlanJSONArtifactID)
	require.NoError(t, err)
	require.Contains(t, string(planJSON), `"access_note":{"value":"(sensitive)"}`)
	require.Contains(t, string(planJSON), `"key_digest":"(sensitive)"`)

	// Files the jobs left, after each command: the saved plans aside, which must hold it.
	saved := 0
	for _, f := range a.exec.files()[files:] {
		if strings.HasPrefix(f.name, "plan.bin ") || strings.HasPrefix(f.name, "verify.bin ") {
			if zipHolds(t, f.data, canaryNote) {
				saved++
			}
			continue
		}
		dirSeen[f.name] = true
		scan.blob("workdir", f.name, f.data)
	}
	require.Positive(t, saved, "no saved plan of the noted run holds the note: OpenTofu keeps it there, or the run did not get it")
	require.True(t, dirSeen["main.tf (after tofu init -input=false -no-color -lockfile=readonly)"], "the generated main.tf was scanned")

	// Every artifact, decrypted: the noted run's plan file holds the note (unzipped), and
	// nothing else does; state versions may hold the digest, as OpenTofu's state does.
	var rows []struct{ ID, OrganizationID, Kind string }
	require.NoError(t, a.DB.Raw("SELECT id, organization_id, kind FROM artifacts ORDER BY id").Scan(&rows).Error)
	for _, row := range rows {
		data, _, err := a.System.Artifacts.Get(t.Context(), row.OrganizationID, row.ID)
		require.NoError(t, err)
		switch artifact.Kind(row.Kind) {
		case artifact.PlanFile:
			holds := zipHolds(t, data, canaryNote)
			require.Equal(t, row.ID == *r.PlanArtifactID, holds, "plan file %s (the noted run's is %s)", row.ID, *r.PlanArtifactID)
			continue
		case artifact.State:
			noteOnly.blob(row.Kind, row.ID, data)
			continue
		case artifact.ConfigBundle:
			b, err := bundle.FromTar(data)
			require.NoError(t, err)
			for name, body := range b.Files {
				scan.blob(row.Kind, row.ID+":"+name, body)
			}
		}
		scan.blob(row.Kind, row.ID, data)
	}
	scan.liveLogs(a.App, []run.Run{r})
	scan.streams(a.App, admin, []run.Run{r})

	// Pages, as the admin: the run, its plan, its review and evidence, its workspace, and
	// the forms that ask for the inputs again (none fills the note in).
	scan.pages(a.App, admin, []string{"/runs/" + r.ID, "/runs/" + r.ID + "/plan.json", "/runs/" + r.ID + "/plan.txt",
		"/runs/" + r.ID + "/review", "/runs/" + r.ID + "/evidence", "/workspaces/" + r.WorkspaceID, "/workspaces/" + r.WorkspaceID + "/promote",
		"/workspaces/" + r.WorkspaceID + "/destroy", "/requests/new?template=noted&from_run=" + r.ID,
		"/workspaces/" + r.WorkspaceID + "/change", "/catalog/noted", "/runs", "/"})
	// The JSON API, with the requester's token: the run, its plan, its logs, timeline,
	// review and evidence (with its inputs), and its workspace with its outputs.
	for _, p := range []string{"/api/v1/runs/" + r.ID, "/api/v1/runs/" + r.ID + "/plan", "/api/v1/runs/" + r.ID + "/logs",
		"/api/v1/runs/" + r.ID + "/timeline", "/api/v1/runs/" + r.ID + "/review", "/api/v1/runs/" + r.ID + "/evidence",
		"/api/v1/workspaces/" + r.WorkspaceID, "/api/v1/workspaces/" + r.WorkspaceID + "/outputs",
		"/api/v1/workspaces/" + r.WorkspaceID + "/state-versions", "/api/v1/runs"} {
		resp := a.API(t, token, http.MethodGet, p, "")
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", p, body)
		scan.blob("api", p, []byte(body))
	}
	doc := webtest.ReadBody(t, a.API(t, token, http.MethodGet, "/api/v1/runs/"+r.ID+"/evidence", ""))
	require.Contains(t, doc, `"access_note":"(sensitive)"`, "the API's evidence shows the input masked")

	// The database, in clear (the sealed values are ciphertext in it), and the cloud,
	// which holds the bucket with its digest label but never the note.
	dump := pgDump(t, a.DSN)
	require.Contains(t, string(dump), "variables_ciphertext", "the dump holds the sealed inputs' column")
	scan.blob("database", "pg_dump", dump)
	noteOnly.tree("cloud", a.cloudDir)
	noteOnly.blob("cloud", "log", []byte(a.cloudLog.String()))
	labelled := &leakScanner{t: t, canaries: map[string]string{digest: "digest label"}, seen: map[string]int{}}
	require.True(t, labelled.holdsAny(a.cloudDir), "the cloud never got the digest label: the run did not use the note")

	for _, where := range []string{"workdir", "config_bundle", "plan_json", "plan_log", "apply_log", "verify_log", "state",
		"live_log", "page", "stream", "api", "database", "cloud"} {
		require.Positive(t, scan.seen[where], "nothing was scanned in %s for the sensitive input: the check could not fail", where)
	}
	t.Logf("scanned %v for the sensitive input and its digest", scan.seen)
}

// holdsAny reports whether a file under dir holds one of the canaries.
func (s *leakScanner) holdsAny(dir string) bool {
	s.t.Helper()
	found := false
	require.NoError(s.t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for v := range s.canaries {
			found = found || bytes.Contains(data, []byte(v))
		}
		return nil
	}))
	return found
}

// zipHolds reports whether a member of the zip data (a saved plan) holds s.
func zipHolds(t *testing.T, data []byte, s string) bool {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(t, err, "a saved plan is a zip")
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		member, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		if bytes.Contains(member, []byte(s)) {
			return true
		}
	}
	return false
}
