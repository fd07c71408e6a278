//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu).

package web_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/artifact"
	"gantry/models/authz"
	"gantry/models/bundle"
	"gantry/models/run"
	"gantry/runner/targets"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
	"gantry/runner/tofurun"
	"gantry/sandbox/client"
	"gantry/sandbox/cloud"
)

// canaryCloudAdmin is the sandbox cloud's break-glass token in TestSecretsNeverLeak.
const canaryCloudAdmin = "admin-canary-token"

// TestSecretsNeverLeak (DESIGN.md §6, "Apply identity"): static cloud keys set as
// staging's write and read credentials, every workload token and state password minted for
// the jobs of a staging run (static keys), a development run (workload identity) and a
// drift check, and the credentials of a break-glass window (shown once, used by hand),
// appear in no generated file, plan file (unzipped), plan JSON, log, state version, page,
// database dump or sandbox cloud file or log; nor does a sensitive template input, but in
// its run's saved plan (requireSensitiveInputsNeverLeak).
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	app := startCanary(t)
	ctx := t.Context()
	admin := app.LoggedIn(t, "admin@acme.test")
	operator := app.LoggedIn(t, "operator@acme.test")
	orgID := app.Orgs["acme"]
	staging := app.OrgEnvironmentID(t, "acme", "staging")
	dev := app.OrgEnvironmentID(t, "acme", "development")

	// Static keys in the sandbox cloud, set as staging's write and read credentials through
	// the edit form.
	cloudAdmin, err := client.New(app.cloudURL, canaryCloudAdmin)
	require.NoError(t, err)
	key := createCloudKey(t, app.cloudURL, cloud.KeyRequest{Organization: orgID, Environment: staging, Scope: "write", Reason: "TestSecretsNeverLeak"})
	readKey := createCloudKey(t, app.cloudURL, cloud.KeyRequest{Organization: orgID, Environment: staging, Scope: "read", Reason: "TestSecretsNeverLeak"})
	setCredentialsThroughForm(t, app.App, admin, staging, url.Values{"cloud_credential": {key.Secret}, "cloud_read_credential": {readKey.Secret}})
	page := webtest.ReadBody(t, app.Get(t, admin, "/environments/"+staging))
	require.Contains(t, page, `data-testid="standing-credential-finding"`)
	require.Contains(t, html.UnescapeString(tags.ReplaceAllString(page, "")),
		"Standing credential: this environment's jobs use a long-lived static credential instead of short-lived workload identity tokens.")
	require.Contains(t, page, "Applies use a static write credential since")
	require.Contains(t, page, "Plans and verifications use a static read credential since")
	require.Contains(t, page, `name="cloud_credential" value=""`, "the password field is always empty")
	require.Contains(t, page, `name="cloud_read_credential" value=""`, "the password field is always empty")
	require.NotContains(t, webtest.ReadBody(t, app.Get(t, admin, "/environments/"+dev)), `data-testid="standing-credential-finding"`)
	list := webtest.ReadBody(t, app.Get(t, admin, "/environments"))
	require.Equal(t, 1, strings.Count(list, `data-testid="standing-credential-badge"`), "only staging has the badge")

	// A staging run (approved by the admin) uses the static keys (the read key to plan and
	// verify, the write key to apply); a development run (self-service) uses workload tokens.
	bucket := func(env, name string) url.Values {
		return url.Values{"template": {"bucket"}, "environment": {env}, "workspace": {name}, "kind": {"apply"},
			"inputs.name": {name}, "inputs.retention_days": {"30"}}
	}
	stagingRun := waitForState(t, app.App, app.App.RequestRun(t, operator, bucket(staging, "canary-static")), run.PendingApproval)
	approve(t, app.App, admin, stagingRun)
	stagingRun = waitForState(t, app.App, stagingRun.ID, run.Succeeded)
	devRun := waitForState(t, app.App, app.App.RequestRun(t, operator, bucket(dev, "canary-dev")), run.Succeeded)
	// A break-glass window on the development workspace: its credentials (two issues) change
	// the bucket by hand, and the drift check at its end reads who did.
	window := askWindow(t, app.App, operator, devRun.WorkspaceID, "TestSecretsNeverLeak: a change by hand", 15)
	status, body := windowAct(t, app.App, admin, window, "approve", url.Values{"terms": {windowOf(t, app.App, window).TermsDigest}})
	require.Equal(t, http.StatusSeeOther, status, body)
	var glassTokens []string
	for _, action := range []string{"open", "credentials"} {
		status, body = windowAct(t, app.App, operator, window, action, nil)
		require.Equal(t, http.StatusOK, status, body)
		glassTokens = append(glassTokens, strings.TrimSpace(html.UnescapeString(tokenArea.FindStringSubmatch(body)[1])))
	}
	glass, err := client.New(app.cloudURL, glassTokens[1])
	require.NoError(t, err)
	bucketObj := cloudObjectOf(t, ctx, cloudAdmin, "bucket", devRun.WorkspaceID)
	attrs := configurable(t, "bucket", bucketObj.Attributes)
	attrs["retention_days"] = 7
	_, err = glass.Update(ctx, "bucket", bucketObj.ID, attrs)
	require.NoError(t, err)
	status, body = windowAct(t, app.App, operator, window, "end", nil)
	require.Equal(t, http.StatusSeeOther, status, body)
	driftRun := waitForState(t, app.App, *windowOf(t, app.App, window).DriftCheckRunID, run.Planned)
	require.Equal(t, run.DriftExpected, driftRun.DriftStatus)
	runs := []run.Run{stagingRun, devRun}

	// Each job got what its environment holds for its phase: the read key to plan and
	// verify in staging and the write key to apply, workload tokens (JWTs) in development;
	// and the cloud saw the write key act for staging.
	canaries := app.exec.canaries(t, key.Secret, readKey.Secret)
	app.exec.requireCredentialsPerRun(t, app.App, map[string]phaseKeys{
		stagingRun.ID: {plan: readKey.Secret, apply: key.Secret, verify: readKey.Secret}, devRun.ID: {}, driftRun.ID: {}})
	objs, err := cloudAdmin.AdminList(ctx, "bucket")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	for _, o := range objs {
		if o.Namespace.Env == staging {
			require.Equal(t, cloud.AnyWorkspace, o.Namespace.Workspace)
			require.Equal(t, "key", o.LastChange.By)
		} else {
			require.Equal(t, devRun.WorkspaceID, o.Namespace.Workspace)
			require.Equal(t, "breakglass", o.LastChange.By, "last changed by hand, through the window")
		}
	}

	for i, tok := range glassTokens {
		canaries[tok] = fmt.Sprintf("break-glass token #%d", i+1)
		canaries[tok[strings.LastIndex(tok, ".")+1:]] = fmt.Sprintf("break-glass token #%d's signature", i+1)
	}
	scan := &leakScanner{t: t, canaries: canaries, seen: map[string]int{}}

	// Generated files: every file left in a job's working directory after each command.
	for _, f := range app.exec.files() {
		scan.blob("workdir", f.name, f.data)
	}
	// Every artifact, decrypted: config bundles untarred, plan files unzipped.
	scan.artifacts(app.App, runs)
	// Every chunk of the runs' live logs, decrypted.
	scan.liveLogs(app.App, runs)
	// Every rendered page of the runs, as the admin and the operator, and what their live
	// streams send.
	scan.pages(app.App, admin, adminPages(runs, staging, dev))
	scan.pages(app.App, operator, append(operatorPages(append(runs, driftRun)), "/breakglass/"+window, "/breakglass", "/drift"))
	scan.streams(app.App, operator, append(runs, driftRun))
	// The database, dumped in clear.
	dump := pgDump(t, app.DSN)
	require.Contains(t, string(dump), "environment.static_credential_set", "the dump holds the audit log")
	scan.blob("database", "pg_dump", dump)
	// The sandbox cloud's files and log.
	scan.tree("cloud", app.cloudDir)
	require.Contains(t, app.cloudLog.String(), key.ID, "the cloud logs which key acted")
	scan.blob("cloud", "log", []byte(app.cloudLog.String()))

	for _, where := range []string{"workdir", "config_bundle", "plan_file member", "plan_json", "plan_log", "apply_log",
		"verify_log", "state", "live_log", "page", "stream", "database", "cloud"} {
		require.Positive(t, scan.seen[where], "nothing was scanned in %s: the check could not fail", where)
	}
	t.Logf("scanned %v for %d canaries", scan.seen, len(canaries))

	// A sensitive template input, through a run of its own (canary_inputs_test.go).
	app.requireSensitiveInputsNeverLeak(t, admin, staging)
}

var tags = regexp.MustCompile(`<[^>]*>`)

// canaryApp is Gantry with the live runner behind a recording executor, against a sandbox
// cloud whose log is kept.
type canaryApp struct {
	*webtest.App
	cloudURL string
	cloudDir string
	cloudLog *lockedBuffer
	exec     *recordingExecutor
}

// startCanary is startLiveWith with what the leak check needs: the cloud's URL and log and a
// recording executor.
func startCanary(t *testing.T) canaryApp {
	t.Helper()
	tc := tofutest.Toolchain(t, "..", t.TempDir(), testLogWriter{t})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := canaryApp{cloudDir: t.TempDir(), cloudLog: &lockedBuffer{}}
	sc, err := cloud.New(t.Context(), cloud.Config{DataDir: a.cloudDir, Issuer: "http://" + ln.Addr().String() + "/workload",
		AdminToken: canaryCloudAdmin, Logger: slog.New(slog.NewTextHandler(a.cloudLog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	cloudSrv := httptest.NewServer(sc)
	t.Cleanup(cloudSrv.Close)
	a.cloudURL = cloudSrv.URL
	a.exec = &recordingExecutor{Executor: &tofurun.Process{Tofu: tc.Tofu, CLIConfig: tc.CLIConfig, CloudEndpoint: cloudSrv.URL}}
	a.App = webtest.StartWith(t, webtest.Options{Listener: ln, Runner: tofurun.New(a.exec, t.TempDir(), &tofu.PluginCache{Mirror: tc.Mirror, Root: t.TempDir()}),
		CloudEndpoint: cloudSrv.URL, CatalogFS: notedCatalog(t)})
	return a
}

// createCloudKey creates a static key through the sandbox cloud's admin API.
func createCloudKey(t *testing.T, cloudURL string, in cloud.KeyRequest) cloud.CreatedKey {
	t.Helper()
	body, err := json.Marshal(in)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, cloudURL+"/admin/v1/keys", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+canaryCloudAdmin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var out cloud.CreatedKey
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.True(t, strings.HasPrefix(out.Secret, cloud.KeyPrefix))
	return out
}

// setCredentialsThroughForm posts environment envID's edit form as it stands, plus static
// credentials (creds: cloud_credential, the write key, and cloud_read_credential, the read
// key), as an admin would.
func setCredentialsThroughForm(t *testing.T, app *webtest.App, c *http.Client, envID string, creds url.Values) {
	t.Helper()
	edit := webtest.ReadBody(t, app.Get(t, c, "/environments/"+envID+"/edit"))
	require.True(t, strings.Contains(edit, `name="cloud_credential"`) && strings.Contains(edit, `name="cloud_read_credential"`),
		"the edit form has no cloud credential section: handlers.Environments needs its Credentials (web/server.go, web.Services.Credentials)")
	var env struct {
		Name, Tier, Executor         string
		RequiresApproval, Restricted bool
	}
	require.NoError(t, app.DB.Raw("SELECT name, tier, executor, requires_approval, restricted FROM environments WHERE id = ?", envID).Scan(&env).Error)
	var grants []string
	require.NoError(t, app.DB.Raw("SELECT user_id FROM environment_grants WHERE environment_id = ?", envID).Scan(&grants).Error)
	form := url.Values{"_csrf": {app.CSRF(t, c)}, "name": {env.Name}, "tier": {env.Tier}, "executor": {env.Executor},
		"requires_approval": {"off"}, "grants": grants}
	for field, v := range creds {
		form[field] = v
	}
	if env.RequiresApproval {
		form.Add("requires_approval", "on")
	}
	if env.Restricted {
		form.Set("restricted", "on")
	}
	resp := app.PostForm(t, c, "/environments/"+envID, form)
	body := webtest.ReadBody(t, resp)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	var after struct {
		RequiresApproval     bool
		CredSet, ReadCredSet bool
	}
	require.NoError(t, app.DB.Raw("SELECT requires_approval, cred_set_at IS NOT NULL AS cred_set, read_cred_set_at IS NOT NULL AS read_cred_set FROM environments WHERE id = ?", envID).Scan(&after).Error)
	require.True(t, after.CredSet || creds.Get("cloud_credential") == "", "the write credential was not stored")
	require.True(t, after.ReadCredSet || creds.Get("cloud_read_credential") == "", "the read credential was not stored")
	require.Equal(t, env.RequiresApproval, after.RequiresApproval, "the rest of the environment is unchanged")
}

// recordingExecutor records every credential handed to a tofu command and copies every
// file the command leaves in the job's working directory.
type recordingExecutor struct {
	tofurun.Executor
	mu    sync.Mutex
	calls []recordedCall
	snaps []snapFile
}

type recordedCall struct {
	args                          []string
	stateUser, statePass, cloudTk string
}

type snapFile struct {
	name string
	data []byte
}

func (r *recordingExecutor) Run(ctx context.Context, dir string, c tofurun.Command) (int, string, error) {
	r.mu.Lock()
	r.calls = append(r.calls, recordedCall{args: c.Args, stateUser: c.Secrets["TF_HTTP_USERNAME"],
		statePass: c.Secrets["TF_HTTP_PASSWORD"], cloudTk: cloudTokenOf(c)})
	r.mu.Unlock()
	code, explain, err := r.Executor.Run(ctx, dir, c)
	r.snapshot(dir, strings.Join(c.Args, " "))
	return code, explain, err
}

// cloudTokenOf is the cloud token a command was given: the token file in the job's
// secret directory, whatever the target ("" if none).
func cloudTokenOf(c tofurun.Command) string {
	if c.Files == nil {
		return ""
	}
	b, _ := os.ReadFile(filepath.Join(c.Files.Dir(), targets.TokenFile))
	return string(b)
}

// snapshot copies the regular files of the working directory, except the provider
// binaries tofu installs from the mirror.
func (r *recordingExecutor) snapshot(dir, after string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == filepath.Join(".terraform", "providers") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		r.mu.Lock()
		r.snaps = append(r.snaps, snapFile{name: rel + " (after tofu " + after + ")", data: data})
		r.mu.Unlock()
		return nil
	})
}

func (r *recordingExecutor) files() []snapFile {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]snapFile(nil), r.snaps...)
}

// canaries are the secrets to look for: the static keys, every workload token (and its
// signature, the part no one else holds) and every state password the jobs were given.
func (r *recordingExecutor) canaries(t *testing.T, staticKeys ...string) map[string]string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for _, k := range staticKeys {
		out[k] = "static cloud key"
	}
	tokens, passwords := 0, 0
	for _, c := range r.calls {
		if c.statePass != "" {
			if _, dup := out[c.statePass]; !dup {
				passwords++
			}
			out[c.statePass] = "state password"
		}
		if parts := strings.Split(c.cloudTk, "."); len(parts) == 3 {
			if _, dup := out[c.cloudTk]; !dup {
				tokens++
			}
			out[c.cloudTk] = "workload token"
			out[parts[2]] = "workload token signature"
		}
	}
	require.GreaterOrEqual(t, tokens, 3, "the development run's plan, apply and verify got workload tokens")
	require.GreaterOrEqual(t, passwords, 6, "every phase of both runs got a state password")
	for v := range out {
		require.GreaterOrEqual(t, len(v), 20, "a canary this short could match by chance")
	}
	return out
}

// phaseKeys are the static keys a run's phases should get ("": a workload token).
type phaseKeys struct{ plan, apply, verify string }

// requireCredentialsPerRun checks, through the state credential each command presented,
// which run and phase each command belonged to, and that each got the static key its
// environment holds for that phase and nothing else, or else a workload token.
func (r *recordingExecutor) requireCredentialsPerRun(t *testing.T, app *webtest.App, want map[string]phaseKeys) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	perRun := map[string]int{}
	for _, c := range r.calls {
		require.NotEmpty(t, c.stateUser, "tofu %v ran without a state credential", c.args)
		var cred struct{ RunID, Phase string }
		require.NoError(t, app.DB.Raw("SELECT run_id, phase FROM state_credentials WHERE id = ?", c.stateUser).Scan(&cred).Error)
		keys, known := want[cred.RunID]
		require.True(t, known, "tofu %v ran for an unexpected run %s", c.args, cred.RunID)
		key := map[string]string{"plan": keys.plan, "apply": keys.apply, "verify": keys.verify}[cred.Phase]
		if key != "" {
			require.True(t, c.cloudTk == key, "tofu %v of run %s (%s) did not get the environment's static key for its phase", c.args, cred.RunID, cred.Phase)
		} else {
			require.True(t, len(strings.Split(c.cloudTk, ".")) == 3 && !strings.HasPrefix(c.cloudTk, cloud.KeyPrefix),
				"tofu %v of run %s (%s) did not get a workload token", c.args, cred.RunID, cred.Phase)
		}
		perRun[cred.RunID]++
	}
	for id := range want {
		require.Positive(t, perRun[id], "no tofu command ran for run %s", id)
	}
}

// leakScanner looks for the canaries and counts what it looked at per kind of place.
type leakScanner struct {
	t        *testing.T
	canaries map[string]string // value -> what it is; the value is never printed
	seen     map[string]int
}

// blob checks data; a zip (a plan file) is also checked member by member, unzipped, since
// its members are deflated and a raw search proves nothing.
func (s *leakScanner) blob(where, name string, data []byte) {
	s.t.Helper()
	s.seen[where]++
	for v, what := range s.canaries {
		if bytes.Contains(data, []byte(v)) {
			s.t.Errorf("%s %s contains a %s", where, name, what)
		}
	}
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) {
		s.zip(where, name, data)
	}
}

func (s *leakScanner) zip(where, name string, data []byte) {
	s.t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	require.NoError(s.t, err, "%s %s looks like a zip but is not one", where, name)
	require.NotEmpty(s.t, zr.File, "%s %s is an empty zip", where, name)
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(s.t, err)
		member, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(s.t, err)
		s.blob(where+" member", name+"!"+f.Name, member)
	}
}

// artifacts decrypts every artifact in the database and checks it; the runs' own
// artifacts and state versions must be among them.
func (s *leakScanner) artifacts(app *webtest.App, runs []run.Run) {
	s.t.Helper()
	var rows []struct{ ID, OrganizationID, Kind string }
	require.NoError(s.t, app.DB.Raw("SELECT id, organization_id, kind FROM artifacts ORDER BY id").Scan(&rows).Error)
	scanned := map[string]bool{}
	for _, a := range rows {
		data, _, err := app.System.Artifacts.Get(s.t.Context(), a.OrganizationID, a.ID)
		require.NoError(s.t, err)
		if artifact.Kind(a.Kind) == artifact.ConfigBundle {
			b, err := bundle.FromTar(data)
			require.NoError(s.t, err)
			require.NotEmpty(s.t, b.Files)
			for name, body := range b.Files {
				s.blob(a.Kind, a.ID+":"+name, body)
			}
		}
		if artifact.Kind(a.Kind) == artifact.PlanFile {
			require.True(s.t, bytes.HasPrefix(data, []byte("PK\x03\x04")), "plan file %s is not a zip", a.ID)
		}
		s.blob(a.Kind, a.ID, data)
		scanned[a.ID] = true
	}
	for _, r := range runs {
		ids := []*string{&r.ConfigArtifactID, r.PlanArtifactID, r.PlanJSONArtifactID, r.PlanLogArtifactID, r.ApplyLogArtifactID, r.VerifyLogArtifactID}
		for i, id := range ids {
			require.NotNil(s.t, id, "run %s lacks artifact %d", r.ID, i)
			require.True(s.t, scanned[*id], "artifact %s of run %s was not scanned", *id, r.ID)
		}
		var states []string
		require.NoError(s.t, app.DB.Raw("SELECT artifact_id FROM state_versions WHERE workspace_id = ?", r.WorkspaceID).Scan(&states).Error)
		require.NotEmpty(s.t, states, "run %s wrote no state", r.ID)
		for _, id := range states {
			require.True(s.t, scanned[id], "state version %s was not scanned", id)
		}
	}
}

// pages fetches each path with c, requires a 200, and checks the body.
func (s *leakScanner) pages(app *webtest.App, c *http.Client, paths []string) {
	s.t.Helper()
	for _, p := range paths {
		resp := app.Get(s.t, c, p)
		body := webtest.ReadBody(s.t, resp)
		require.Equal(s.t, http.StatusOK, resp.StatusCode, "GET %s", p)
		s.blob("page", p, []byte(body))
	}
}

func adminPages(runs []run.Run, envIDs ...string) []string {
	paths := []string{"/", "/environments", "/executors", "/workspaces", "/approvals", "/catalog", "/api/v1/environments"}
	for _, id := range envIDs {
		paths = append(paths, "/environments/"+id, "/environments/"+id+"/edit", "/api/v1/environments/"+id)
	}
	return append(paths, operatorPages(runs)...)
}

func operatorPages(runs []run.Run) []string {
	paths := []string{"/", "/workspaces"}
	for _, r := range runs {
		paths = append(paths, "/runs/"+r.ID, "/runs/"+r.ID+"/plan.json", "/workspaces/"+r.WorkspaceID)
	}
	return paths
}

// streams checks what the live stream of each (finished) run sends c at connect: its
// section, its live log section and, last, the navigation's count; the stream stays
// open for the count, so it is read up to that.
func (s *leakScanner) streams(app *webtest.App, c *http.Client, runs []run.Run) {
	s.t.Helper()
	for _, r := range runs {
		ctx, cancel := context.WithCancel(s.t.Context())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, app.URL+"/runs/"+r.ID+"/events", nil)
		require.NoError(s.t, err)
		streaming := *c
		streaming.Timeout = 0
		resp, err := streaming.Do(req)
		require.NoError(s.t, err)
		require.Equal(s.t, http.StatusOK, resp.StatusCode)
		var sent bytes.Buffer
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		count := false
		for sc.Scan() {
			sent.WriteString(sc.Text() + "\n")
			if sc.Text() == "event: inbox-count" {
				count = true
			} else if count && sc.Text() == "" {
				break
			}
		}
		cancel()
		resp.Body.Close()
		require.True(s.t, count, "the stream of run %s never sent the count: %s", r.ID, sent.String())
		s.blob("stream", r.ID, sent.Bytes())
	}
}

// liveLogs checks every chunk of the runs' live logs, decrypted.
func (s *leakScanner) liveLogs(app *webtest.App, runs []run.Run) {
	s.t.Helper()
	for _, r := range runs {
		ctx := authz.WithSubject(s.t.Context(), authz.System(r.OrganizationID))
		for _, phase := range []run.JobKind{run.JobPlan, run.JobApply, run.JobVerify} {
			chunks, err := app.System.Runs.Reads.LogChunks(ctx, r.ID, phase, 0, 1000)
			require.NoError(s.t, err)
			require.NotEmpty(s.t, chunks, "run %s has no live %s log", r.ID, phase)
			for _, c := range chunks {
				s.blob("live_log", fmt.Sprintf("%s:%s:%d", r.ID, phase, c.Seq), []byte(c.Text))
			}
		}
	}
}

// tree checks every file under dir.
func (s *leakScanner) tree(where, dir string) {
	s.t.Helper()
	require.NoError(s.t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s.blob(where, rel, data)
		return nil
	}))
}

// pgDump dumps the database at dsn (schema and data, in clear) with pg_dump from $PATH or,
// as on Debian, /usr/lib/postgresql/<version>/bin (the newest, which dumps older servers).
func pgDump(t *testing.T, dsn string) []byte {
	t.Helper()
	bin, err := exec.LookPath("pg_dump")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
		sort.Slice(matches, func(i, j int) bool { return pgVersion(matches[i]) < pgVersion(matches[j]) })
		require.NotEmpty(t, matches, "pg_dump not found in $PATH or /usr/lib/postgresql/*/bin: install postgresql-client")
		bin = matches[len(matches)-1]
	}
	ctx, cancel := bench.Context(t.Context(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--no-password", "--dbname="+dsn)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "pg_dump (%v): %s", context.Cause(ctx), stderr.String())
	require.Contains(t, string(out), "COPY public.environments", "the dump has the data")
	return out
}

func pgVersion(path string) int {
	var v int
	_, _ = fmt.Sscanf(filepath.Base(filepath.Dir(filepath.Dir(path))), "%d", &v)
	return v
}
