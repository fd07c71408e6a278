package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gantry/models/secret"
	"gantry/runner"
	"gantry/runner/tofu"
	"gantry/runner/tofurun"
)

// The pod's side of a phase (cmd/gantry-phase): fetch the inputs from the phase
// endpoint, run the phase with tofurun.Runner on the process executor, upload the
// outcome once.

// PodConfig is what gantry-phase runs a phase with.
type PodConfig struct {
	// Endpoint is this phase's URL on the phase endpoint: <portal URL>/phase/v1/<job>.
	Endpoint string
	// Secrets is the directory the Job's Secret is mounted at (SecretMount).
	Secrets string
	// WorkRoot is the pod's writable work directory (an emptyDir): the phase's working
	// and secret directories are made in it.
	WorkRoot string
	// Tofu, CLIConfig and CloudEndpoint are the process executor's (tofurun.Process).
	Tofu, CLIConfig, CloudEndpoint string
	// Plugins, when set, is the image's read-only plugin cache (tofu.PluginCache): init
	// links the providers a lock file selects instead of unpacking them.
	Plugins *tofu.PluginCache
	// Cgroup is the root of the pod's cgroup filesystem, where a memory kill is read
	// ("": /sys/fs/cgroup).
	Cgroup string
	// Log receives the phase's log as it comes (the container's standard output, which
	// the portal follows).
	Log io.Writer
	// Client talks to the endpoint (nil: a client with a 5 minute timeout).
	Client *http.Client
	// WatchEvery is how often the pod asks whether its session still exists, and
	// GiveUpAfter how long it goes on without an answer (zero: 5 s and 30 s).
	WatchEvery, GiveUpAfter time.Duration
}

// ErrPortalGone is a phase stopped because the portal no longer holds its session (the
// phase ended for it, or it restarted) or could not be reached for GiveUpAfter: nobody
// would take the outcome, and a dead portal's tofu must not go on alone.
var ErrPortalGone = errors.New("the portal that started this phase is gone")

// RunPhase runs the phase cfg.Endpoint describes and uploads its outcome. It returns an
// error only when the protocol failed (the inputs could not be fetched, the outcome not
// uploaded, the portal went away): the phase's own failure is part of the outcome.
func RunPhase(ctx context.Context, cfg PodConfig) error {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	secrets, err := readSecrets(cfg.Secrets)
	if err != nil {
		return err
	}
	c := &phaseClient{base: strings.TrimRight(cfg.Endpoint, "/"), token: secrets.endpoint, http: cfg.Client}
	if c.http == nil {
		c.http = &http.Client{Timeout: 5 * time.Minute}
	}
	desc, err := c.describe(ctx)
	if err != nil {
		return err
	}
	config, err := c.get(ctx, pathConfig)
	if err != nil {
		return err
	}
	var planFile []byte
	if desc.Phase == PhaseApply {
		if planFile, err = c.get(ctx, pathPlan); err != nil {
			return err
		}
	}
	creds := runner.Credentials{StateUsername: secrets.stateUser, StatePassword: secrets.statePass, CloudToken: secrets.cloud,
		CloudExpires: desc.CloudExpires, Wiring: desc.Wiring}
	if desc.Refreshable {
		creds.Refresh = c.refresh
	}
	ctx, stop := c.watch(ctx, cfg.WatchEvery, cfg.GiveUpAfter)
	defer stop()
	jobs := filepath.Join(cfg.WorkRoot, "jobs")
	exec := &oomExplainer{Executor: &tofurun.Process{Tofu: cfg.Tofu, CLIConfig: cfg.CLIConfig, CloudEndpoint: cfg.CloudEndpoint}, cgroup: cfg.Cgroup}
	r := tofurun.New(exec, jobs, cfg.Plugins)
	var res Result
	var phaseErr error
	switch desc.Phase {
	case PhasePlan:
		var out runner.PlanResult
		out, phaseErr = r.Plan(ctx, runner.PlanRequest{RunID: desc.RunID, WorkspaceID: desc.WorkspaceID, Kind: desc.Kind,
			Config: config, Credentials: creds, Variables: secrets.vars, Log: cfg.Log})
		res = Result{PlanFile: out.PlanFile, PlanJSON: out.PlanJSON, HasChanges: out.HasChanges, Log: out.Log}
	case PhaseApply:
		var out runner.ApplyResult
		out, phaseErr = r.Apply(ctx, runner.ApplyRequest{RunID: desc.RunID, WorkspaceID: desc.WorkspaceID, Config: config,
			PlanFile: planFile, Credentials: creds, Log: cfg.Log})
		res = Result{Outputs: out.Outputs, Log: out.Log}
		if errors.Is(phaseErr, tofurun.ErrStateNotStored) {
			res.Kept = keptState(tofurun.KeptStates(jobs))
		}
	case PhaseVerify:
		var out runner.VerifyResult
		out, phaseErr = r.Verify(ctx, runner.VerifyRequest{RunID: desc.RunID, WorkspaceID: desc.WorkspaceID, Config: config,
			Credentials: creds, Variables: secrets.vars, Log: cfg.Log})
		res = Result{Converged: out.Converged, DriftJSON: out.DriftJSON, Log: out.Log}
	default:
		return fmt.Errorf("the phase endpoint describes an unknown phase %q", desc.Phase)
	}
	if ctx.Err() != nil {
		// Terminated (the pod deleted or evicted) or the portal gone: a phase cut short
		// has no outcome to report, and the portal must not read one into it.
		return context.Cause(ctx)
	}
	res.Error = errorOf(phaseErr)
	return c.upload(ctx, res)
}

// podSecrets are the Secret's values.
type podSecrets struct {
	stateUser, statePass, cloud, endpoint string
	vars                                  secret.Variables
}

// readSecrets reads the mounted Secret. A Secret volume shows each key as a link into
// a hidden, atomically swapped directory ("..data"): the links are followed, the hidden
// entries skipped.
func readSecrets(dir string) (podSecrets, error) {
	var s podSecrets
	ents, err := os.ReadDir(dir)
	if err != nil {
		return s, fmt.Errorf("reading the phase's secrets: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return s, fmt.Errorf("reading the phase's secret %s: %w", name, err)
		}
		v := string(data)
		switch {
		case name == SecretStateUsername:
			s.stateUser = v
		case name == SecretStatePassword:
			s.statePass = v
		case name == SecretCloudToken:
			s.cloud = v
		case name == SecretEndpointToken:
			s.endpoint = v
		case strings.HasPrefix(name, secretVarPrefix):
			if s.vars == nil {
				s.vars = secret.Variables{}
			}
			s.vars[strings.TrimPrefix(name, secretVarPrefix)] = v
		}
	}
	if s.endpoint == "" {
		return s, fmt.Errorf("the phase's secrets in %s hold no %s", dir, SecretEndpointToken)
	}
	return s, nil
}

// keptState is the state file tofurun kept in dir (nil: none).
func keptState(dir string) *KeptStateUp {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range ents {
		if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && e.Type().IsRegular() {
			return &KeptStateUp{Name: e.Name(), Data: data}
		}
	}
	return nil
}

// phaseClient is the pod's client of its phase's endpoint.
type phaseClient struct {
	base, token string
	http        *http.Client
}

// do sends one request with the endpoint token and returns the body of a 2xx answer.
func (c *phaseClient) do(ctx context.Context, method, resource string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+resource, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode/100 == 2:
		return data, nil
	case resp.StatusCode == http.StatusNotFound && resource == "":
		return nil, errNoSession
	}
	return nil, fmt.Errorf("%s %s: %s: %s", method, "phase endpoint"+resource, resp.Status, strings.TrimSpace(string(data)))
}

func (c *phaseClient) describe(ctx context.Context) (Description, error) {
	data, err := c.do(ctx, http.MethodGet, "", nil)
	if err != nil {
		return Description{}, fmt.Errorf("reading the phase's description: %w", err)
	}
	var d Description
	if err := json.Unmarshal(data, &d); err != nil {
		return Description{}, fmt.Errorf("reading the phase's description: %w", err)
	}
	return d, nil
}

func (c *phaseClient) get(ctx context.Context, resource string) ([]byte, error) {
	data, err := c.do(ctx, http.MethodGet, resource, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the phase's %s: %w", strings.TrimPrefix(resource, "/"), err)
	}
	return data, nil
}

// refresh is the phase's Credentials.Refresh: the endpoint mints the next token.
func (c *phaseClient) refresh(ctx context.Context) (string, time.Time, error) {
	data, err := c.do(ctx, http.MethodPost, pathToken, []byte("{}"))
	if err != nil {
		return "", time.Time{}, err
	}
	var a TokenAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return "", time.Time{}, fmt.Errorf("reading the fresh token: %w", err)
	}
	return a.Token, a.Expires, nil
}

// upload sends the outcome, trying again for a while when the portal cannot be reached
// (the outcome exists only in this pod). A refusal is final.
func (c *phaseClient) upload(ctx context.Context, res Result) error {
	body, err := json.Marshal(res)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	wait := 500 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+pathResult, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.http.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			return fmt.Errorf("uploading the phase's result: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("uploading the phase's result: %w", err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// watch ends the returned context (cause ErrPortalGone) when the endpoint says the
// session is gone or has not answered for giveUp: the pod's equivalent of the process
// executor's Pdeathsig.
func (c *phaseClient) watch(ctx context.Context, every, giveUp time.Duration) (context.Context, func()) {
	if every <= 0 {
		every = 5 * time.Second
	}
	if giveUp <= 0 {
		giveUp = 30 * time.Second
	}
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		answered := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, min(every*2, giveUp))
			_, err := c.do(rctx, http.MethodGet, "", nil)
			rcancel()
			switch {
			case err == nil:
				answered = time.Now()
			case errors.Is(err, errNoSession):
				cancel(fmt.Errorf("%w: its session is over", ErrPortalGone))
				return
			case ctx.Err() != nil:
				return
			case time.Since(answered) > giveUp:
				cancel(fmt.Errorf("%w: no answer for %s (%v)", ErrPortalGone, giveUp, err))
				return
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled); <-done }
}
