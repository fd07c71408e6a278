//go:build !fast

// Live: needs live OpenTofu (bin/tofu, built from tools/tofu), the pinned SeaweedFS (tools/seaweedfs, built into the user cache the first time) and PostgreSQL.

package s3_test

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"gantry/models/db/dbtest"
	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/runner/targets"
	"gantry/runner/targets/seaweed"
	"gantry/runner/tofu"
	"gantry/runner/tofu/tofutest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// TestBucketTemplateThroughSTS is the S3 acceptance with the real pieces: Gantry's workload
// issuer (keys in PostgreSQL) served over TLS, SeaweedFS whose STS trusts it, the bucket-s3
// template's module and its lock file, the S3 provider built into the toolchain's offline
// mirror, and the pinned tofu. Each phase gets exactly what runner/targets hands an AWS phase
// (the token in a 0400 file, the variables naming it) and nothing else: a plan's read token
// plans, an apply's write token creates the bucket, a verification's read token sees no
// changes, a read token cannot apply a change (the store answers 403), an apply whose approval
// covered no delete cannot destroy the bucket, and one that covered a delete does. No token is
// in any file tofu left, in a plan, in state or in what tofu printed.
func TestBucketTemplateThroughSTS(t *testing.T) {
	root, err := tofu.RepoRoot(".")
	require.NoError(t, err)
	tc := tofutest.Toolchain(t, root, t.TempDir(), t.Output())
	lock, ok := tc.LockOf(tofu.S3ProviderSource)
	require.True(t, ok, "the toolchain's mirror holds the S3 provider: %v", tc.Locks)
	templateLock, err := os.ReadFile(filepath.Join(root, "catalog", "templates", "bucket-s3", ".terraform.lock.hcl"))
	require.NoError(t, err)
	require.Equal(t, string(tofu.LockFile(lock)), string(templateLock), "the template pins the provider this toolchain built")

	weed, err := seaweed.EnsureBinary(t.Context(), root, t.Output())
	require.NoError(t, err)
	iss := newIssuer(t)
	ws := "ws-" + randomHex(t)
	write, read := seaweed.GantryRoles(ws, "gantry", map[string]string{"gantry_ws": ws})
	var storeLog lockedBuffer
	srv, err := seaweed.Start(t.Context(), seaweed.Options{Binary: weed, Log: &storeLog, Dir: t.TempDir(),
		Providers: []seaweed.Provider{{Name: "gantry", Issuer: iss.url, Audiences: []string{seaweed.Audience}, CAPEM: iss.caPEM}},
		Roles:     []seaweed.Role{write, read}})
	require.NoError(t, err, "server log:\n%s", storeLog.String())
	t.Cleanup(func() { require.NoError(t, srv.Stop()) })
	target := environment.Target{Kind: environment.TargetAWS, Audience: seaweed.Audience, AWS: &environment.AWSTarget{
		ReadRoleARN: srv.RoleARNs[read.Name], WriteRoleARN: srv.RoleARNs[write.Name], Region: seaweed.Region,
		STSEndpoint: srv.URL, S3Endpoint: srv.URL}}

	work := workspace(t, root, ws, true)
	r := &runner{t: t, tc: tc, dir: work, iss: iss, target: target, ws: ws}
	bucket := "gantry-" + ws + "-data"

	r.ok(identity.PhasePlan, nil, "init", "-input=false", "-no-color", "-lockfile=readonly")
	out := r.ok(identity.PhasePlan, nil, "plan", "-input=false", "-no-color", "-out=create.tfplan")
	require.Contains(t, out, "1 to add, 0 to change, 0 to destroy")
	out = r.ok(identity.PhaseApply, []string{identity.ChangeCreate}, "apply", "-input=false", "-no-color", "create.tfplan")
	require.Contains(t, out, "Apply complete! Resources: 1 added")
	require.Equal(t, "Enabled", r.versioning(bucket), "the bucket exists, versioned")

	// The verification's read token reads the bucket back and finds nothing to change.
	out = r.ok(identity.PhaseVerify, nil, "plan", "-input=false", "-no-color", "-detailed-exitcode")
	require.Contains(t, out, "No changes.")

	// A change planned by a read token and applied with a read token: the read role may not
	// change the bucket, and the store says so.
	require.NoError(t, copyModule(root, work, ws, false)) // versioning off
	out = r.ok(identity.PhasePlan, nil, "plan", "-input=false", "-no-color", "-out=change.tfplan")
	require.Contains(t, out, "1 to change")
	out = r.fails(identity.PhasePlan, nil, "apply", "-input=false", "-no-color", "change.tfplan")
	require.Contains(t, out, `Cannot change the versioning of S3 bucket "`+bucket+`"`)
	require.Contains(t, out, "S3 PutBucketVersioning failed: AccessDenied (HTTP 403)")
	require.Equal(t, "Enabled", r.versioning(bucket), "nothing changed")

	// The destroy: an apply whose approval covered no delete is refused by the store's policy,
	// one whose approval covered the delete removes the bucket.
	r.ok(identity.PhasePlan, nil, "plan", "-destroy", "-input=false", "-no-color", "-out=destroy.tfplan")
	out = r.fails(identity.PhaseApply, []string{identity.ChangeCreate, identity.ChangeUpdate}, "apply", "-input=false", "-no-color", "destroy.tfplan")
	require.Contains(t, out, `Cannot delete S3 bucket "`+bucket+`"`)
	require.Contains(t, out, "S3 DeleteBucket failed: AccessDenied (HTTP 403)")
	require.Equal(t, "Enabled", r.versioning(bucket), "the bucket is still there")
	out = r.ok(identity.PhasePlan, nil, "plan", "-destroy", "-input=false", "-no-color", "-out=destroy.tfplan")
	require.Contains(t, out, "1 to destroy")
	out = r.ok(identity.PhaseApply, []string{identity.ChangeDelete}, "apply", "-input=false", "-no-color", "destroy.tfplan")
	require.Contains(t, out, "Resources: 0 added, 0 changed, 1 destroyed")
	require.Equal(t, "NotFound", r.versioning(bucket), "the bucket is gone")

	// The canary: no token in any file tofu left (plans unpacked), in its output or in the
	// store's log.
	require.NotEmpty(t, r.tokens)
	for _, tok := range r.tokens {
		sig := tok[strings.LastIndex(tok, ".")+1:]
		for _, needle := range []string{tok, sig} {
			require.NotContains(t, r.output.String(), needle)
			require.NotContains(t, storeLog.String(), needle)
			require.NoError(t, filepath.WalkDir(work, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				for name, data := range fileContents(t, path) {
					require.False(t, bytes.Contains(data, []byte(needle)), "a token in %s", name)
				}
				return nil
			}))
		}
	}
}

// runner runs tofu commands as Gantry's phases do: each with a new token of its phase in a
// 0400 file of its own secret directory, and an environment of tofu.Env and the target's
// handout only.
type runner struct {
	t      *testing.T
	tc     tofu.Toolchain
	dir    string
	iss    issuer
	target environment.Target
	ws     string
	tokens []string
	output bytes.Buffer // everything tofu printed
	n      int
}

func (r *runner) run(phase identity.Phase, approved []string, args ...string) (string, error) {
	t := r.t
	t.Helper()
	r.n++
	in, err := targets.For(r.target)
	require.NoError(t, err)
	c := identity.Claims{OrganizationID: "org-s3", EnvironmentID: "env-s3", WorkspaceID: r.ws, RunID: fmt.Sprintf("run-%d", r.n),
		Phase: phase, Audience: in.Audience()}
	if phase == identity.PhaseApply {
		c.PlanDigest, c.Lease, c.Approved = "sha256:"+strings.Repeat("cd", 32), 1, approved
	}
	token, _, err := r.iss.Mint(t.Context(), c)
	require.NoError(t, err)
	r.tokens = append(r.tokens, token)
	secrets := filepath.Join(t.TempDir(), "secrets")
	require.NoError(t, os.Mkdir(secrets, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(secrets, targets.TokenFile), []byte(token), 0o400))
	h, err := in.Handout(targets.Phase{Scope: phase.Scope(), Session: "gantry-" + c.RunID + "-" + string(phase), Dir: secrets})
	require.NoError(t, err)
	require.Empty(t, h.Files)
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), r.tc.Tofu, args...)
	cmd.Dir = r.dir
	cmd.Env = append(tofu.Env(r.tc.CLIConfig, home), h.Env...)
	out, err := cmd.CombinedOutput()
	r.output.Write(out)
	return string(out), err
}

func (r *runner) ok(phase identity.Phase, approved []string, args ...string) string {
	r.t.Helper()
	out, err := r.run(phase, approved, args...)
	require.NoError(r.t, err, "tofu %s (%s):\n%s", args[0], phase, out)
	return out
}

func (r *runner) fails(phase identity.Phase, approved []string, args ...string) string {
	r.t.Helper()
	out, err := r.run(phase, approved, args...)
	require.Error(r.t, err, "tofu %s (%s) should fail:\n%s", args[0], phase, out)
	return out
}

// versioning asks the store, with a fresh read session of the workspace, for the bucket's
// versioning status: "Enabled", "Suspended", "" or the error code ("NotFound").
func (r *runner) versioning(bucket string) string {
	t := r.t
	t.Helper()
	token, _, err := r.iss.Mint(t.Context(), identity.Claims{OrganizationID: "org-s3", EnvironmentID: "env-s3", WorkspaceID: r.ws,
		RunID: "run-check", Phase: identity.PhaseVerify, Audience: seaweed.Audience})
	require.NoError(t, err)
	r.tokens = append(r.tokens, token)
	a := r.target.AWS
	stsClient := sts.New(sts.Options{Region: a.Region, BaseEndpoint: aws.String(a.STSEndpoint)})
	creds := stscreds.NewWebIdentityRoleProvider(stsClient, a.ReadRoleARN, staticToken(token))
	client := awss3.New(awss3.Options{Region: a.Region, BaseEndpoint: aws.String(a.S3Endpoint), UsePathStyle: true,
		Credentials: aws.NewCredentialsCache(creds)})
	if _, err := client.HeadBucket(t.Context(), &awss3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		var api smithy.APIError
		require.True(t, errors.As(err, &api), "%v", err)
		return api.ErrorCode()
	}
	v, err := client.GetBucketVersioning(t.Context(), &awss3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	return string(v.Status)
}

type staticToken string

func (s staticToken) GetIdentityToken() ([]byte, error) { return []byte(s), nil }

// workspace writes the root module a run of the bucket-s3 template has (the template's module
// under modules/, its lock file, a module call with the inputs and the workspace id Gantry
// sets) into a new directory, and returns it.
func workspace(t *testing.T, root, ws string, versioning bool) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, copyModule(root, dir, ws, versioning))
	return dir
}

// copyModule (re)writes dir's configuration: main.tf, modules/bucket-s3 and the lock file.
func copyModule(root, dir, ws string, versioning bool) error {
	tpl := filepath.Join(root, "catalog", "templates", "bucket-s3")
	lock, err := os.ReadFile(filepath.Join(tpl, ".terraform.lock.hcl"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), lock, 0o644); err != nil {
		return err
	}
	mod := filepath.Join(dir, "modules", "bucket-s3")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(tpl, "module", "*.tf"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(mod, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	main := fmt.Sprintf(`terraform {
  required_providers {
    s3 = {
      source  = %q
      version = %q
    }
  }
}

provider "s3" {}

module "bucket-s3" {
  source              = "./modules/bucket-s3"
  name                = "data"
  versioning          = %t
  gantry_workspace_id = %q
}

output "bucket" {
  value = module.bucket-s3.bucket
}
`, tofu.S3ProviderSource, tofu.S3ProviderVersion, versioning, ws)
	return os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644)
}

// fileContents is the file at path, or for a zip (a saved plan) each of its entries.
func fileContents(t *testing.T, path string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string][]byte{path: data}
	if zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err == nil {
		for _, f := range zr.File {
			rc, err := f.Open()
			require.NoError(t, err)
			b, err := io.ReadAll(rc)
			require.NoError(t, err)
			rc.Close()
			out[path+"!"+f.Name] = b
		}
	}
	return out
}

// issuer is Gantry's real workload issuer (keys in a real database, sealed by a real keyring)
// served over TLS, discovery and key set at the issuer URL, as a cloud fetches them.
type issuer struct {
	*identity.Issuer
	url   string
	caPEM []byte
}

func newIssuer(t *testing.T) issuer {
	t.Helper()
	keys, err := keyring.Parse(keyring.NewKeySpec("kek-s3-provider"))
	require.NoError(t, err)
	var iss atomic.Pointer[identity.Issuer]
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(iss.Load().Discovery())
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		b, err := iss.Load().JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	iss.Store(identity.NewIssuer(dbtest.New(t), keys, srv.URL, identity.Options{}))
	return issuer{Issuer: iss.Load(), url: srv.URL, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 4)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// lockedBuffer is the store's log, written by its process's output copiers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
