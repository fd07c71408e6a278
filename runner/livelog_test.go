package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/keyring"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
)

// credentialPrinter is the mock on a live executor's footing (it is given real
// per-phase credentials) that prints them into its live log before each phase, each
// split across two writes: the worst a careless provider could do.
type credentialPrinter struct {
	runner.Runner
	mu   sync.Mutex
	seen []string // every credential it was given
}

func (*credentialPrinter) Name() string    { return "tofu/process" }
func (*credentialPrinter) Simulated() bool { return false }

func (c *credentialPrinter) leak(w interface{ Write([]byte) (int, error) }, creds runner.Credentials) {
	out := runner.LogTo(w)
	for _, secret := range []string{creds.StatePassword, creds.CloudToken} {
		c.mu.Lock()
		c.seen = append(c.seen, secret)
		c.mu.Unlock()
		half := len(secret) / 2
		fmt.Fprintf(out, "secret: %s", secret[:half])
		fmt.Fprintf(out, "%s (leaked)\n", secret[half:])
	}
}

// Plan and Apply print the credentials to the live log and, as OpenTofu's runner does
// (its log is everything the commands printed), into the log they return.
func (c *credentialPrinter) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	var printed bytes.Buffer
	c.leak(io.MultiWriter(runner.LogTo(req.Log), &printed), req.Credentials)
	res, err := c.Runner.Plan(ctx, req)
	res.Log = append(printed.Bytes(), res.Log...)
	return res, err
}

func (c *credentialPrinter) Apply(ctx context.Context, req runner.ApplyRequest) (runner.ApplyResult, error) {
	var printed bytes.Buffer
	c.leak(io.MultiWriter(runner.LogTo(req.Log), &printed), req.Credentials)
	res, err := c.Runner.Apply(ctx, req)
	res.Log = append(printed.Bytes(), res.Log...)
	return res, err
}

// TestLiveLogChunksOfEveryPhase: a run's phases store their logs as they run, in
// chunks numbered 1, 2, ... without gaps, masked (the credentials a runner printed
// read [masked]) and sealed (the table's bytes hold neither the log nor the
// credentials); together a phase's chunks are its log. Rotating the keys re-wraps them.
func TestLiveLogChunksOfEveryPhase(t *testing.T) {
	t.Parallel()
	printer := &credentialPrinter{Runner: mock.New()}
	h := newHarness(t, harnessOpts{runner: printer})
	h.start()
	r := h.requestBucket("development", "chatty", "chatty-bucket", run.KindApply)
	r = h.waitFor(r.ID, run.Succeeded)
	h.stop()
	printer.mu.Lock()
	secrets := append([]string(nil), printer.seen...)
	printer.mu.Unlock()
	require.Len(t, secrets, 4, "a state password and a workload token for the plan and for the apply")
	for _, s := range secrets {
		require.NotEmpty(t, s)
	}

	reader := h.as("viewer")
	logs := map[run.JobKind]*string{run.JobPlan: r.PlanLogArtifactID, run.JobApply: r.ApplyLogArtifactID, run.JobVerify: r.VerifyLogArtifactID}
	for phase, artifactID := range logs {
		chunks, err := h.sys.Runs.Reads.LogChunks(reader, r.ID, phase, 0, 1000)
		require.NoError(t, err)
		require.NotEmpty(t, chunks, "the %s phase stored its live log", phase)
		var text strings.Builder
		for i, c := range chunks {
			require.Equal(t, i+1, c.Seq, "%s chunks are numbered without gaps", phase)
			require.Equal(t, phase, c.Phase)
			text.WriteString(c.Text)
		}
		full, err := h.sys.Runs.Reads.Artifact(reader, r, artifactID)
		require.NoError(t, err)
		require.True(t, strings.HasSuffix(text.String(), string(full)), "the %s chunks end with the phase's whole log", phase)
		if phase != run.JobVerify {
			require.Equal(t, 2, strings.Count(text.String(), "secret: "+runner.Masked+" (leaked)\n"), "both credentials masked in the %s log", phase)
			require.Equal(t, 2, strings.Count(string(full), "secret: "+runner.Masked+" (leaked)\n"), "and in its stored log")
		}
		for _, s := range secrets {
			require.NotContains(t, text.String(), s[:len(s)/2], "a credential shows in the %s log", phase)
			require.NotContains(t, string(full), s[:len(s)/2], "a credential shows in the stored %s log", phase)
		}
		later, err := h.sys.Runs.Reads.LogChunks(reader, r.ID, phase, len(chunks)-1, 1000)
		require.NoError(t, err)
		require.Len(t, later, 1, "reading resumes after a given chunk")
	}

	var rows []struct{ KeyID, Phase string }
	var stored []byte
	require.NoError(t, h.db.Raw("SELECT key_id, phase FROM run_log_chunks WHERE run_id = ?", r.ID).Scan(&rows).Error)
	require.NoError(t, h.db.Raw(`SELECT string_agg(ciphertext || wrapped_key || nonce, '\x00'::bytea) FROM run_log_chunks WHERE run_id = ?`, r.ID).
		Row().Scan(&stored))
	for _, clear := range append([]string{"SIMULATED", "secret:", "chatty-bucket"}, secrets...) {
		require.NotContains(t, string(stored), clear, "the live log table holds something in clear")
	}

	// Rotation: every chunk is re-wrapped under the new key, which then opens them alone.
	newSpec := keyring.NewKeySpec("k2")
	both, err := keyring.Parse(newSpec + "," + h.spec)
	require.NoError(t, err)
	n, err := run.RewrapLogChunks(context.Background(), h.db, both)
	require.NoError(t, err)
	require.Equal(t, len(rows), n)
	var stale int64
	require.NoError(t, h.db.Raw("SELECT count(*) FROM run_log_chunks WHERE key_id <> 'k2'").Scan(&stale).Error)
	require.Zero(t, stale)
	onlyNew, err := keyring.Parse(newSpec)
	require.NoError(t, err)
	var first struct {
		KeyID                         string
		WrappedKey, Nonce, Ciphertext []byte
	}
	require.NoError(t, h.db.Raw("SELECT key_id, wrapped_key, nonce, ciphertext FROM run_log_chunks WHERE run_id = ? AND phase = 'plan' AND seq = 1", r.ID).
		Scan(&first).Error)
	plain, err := onlyNew.Open(keyring.Sealed{KeyID: first.KeyID, WrappedKey: first.WrappedKey, Nonce: first.Nonce, Ciphertext: first.Ciphertext},
		[]byte("run_log:"+r.OrganizationID+":"+r.ID+":plan:1"))
	require.NoError(t, err, "the first chunk opens with the new key alone, bound to its place")
	require.Contains(t, string(plain), "secret: "+runner.Masked)
}
