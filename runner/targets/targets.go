// Package targets hands a phase what its environment's target needs to trust the
// phase's workload token: one Integration per kind of target (the sandbox cloud,
// Kubernetes, AWS web identity, GCP and Azure workload identity federation), each
// turning the token file into the files and environment variables its providers and
// SDKs read. The token itself is never in them: it stays in its own file in the phase's
// secret directory (TokenFile), which the runner replaces while a long phase runs, and
// every integration points at that file, so each refresh reaches the provider as it
// does for the sandbox. Nothing here is written into the working directory, a plan or
// state: the files live in the secret directory and the variables in the phase's
// environment only (docs/targets.md).
package targets

import (
	"fmt"
	"slices"

	"gantry/models/environment"
	"gantry/models/identity"
)

// TokenFile is the name of the workload token's file in the phase's secret directory.
const TokenFile = "cloud-token"

// Phase is what an integration needs to know of the phase it hands out for.
type Phase struct {
	// Scope is identity.ScopeRead (plans and verifications) or identity.ScopeWrite
	// (applies): it picks the identity a phase assumes where a target has two.
	Scope string
	// Session names the phase in the target's own audit (an AWS role session name):
	// "gantry-<run id>-<phase>".
	Session string
	// Dir is the secret directory as the phase's command sees it (/run/secrets in a
	// container, the host path for a process).
	Dir string
}

// Handout is what a phase's command gets for its target besides the token file: files
// to write into the secret directory (name -> content) and environment variables
// (sorted VAR=value), some naming those files by their path in Dir.
type Handout struct {
	Files map[string][]byte
	Env   []string
}

// Integration hands a phase of one target its credentials' wiring.
type Integration interface {
	// Audience is the aud the phase's tokens are minted for.
	Audience() string
	// Handout is the wiring of phase p.
	Handout(p Phase) (Handout, error)
}

// For is the integration of target t (the sandbox one for an environment without a
// target).
func For(t environment.Target) (Integration, error) {
	t = t.OrSandbox()
	switch t.Kind {
	case environment.TargetSandbox:
		return sandbox{}, nil
	case environment.TargetKubernetes:
		if t.Kubernetes == nil {
			return nil, fmt.Errorf("the Kubernetes target names no API server")
		}
		return kubernetes{t.TokenAudience(), *t.Kubernetes}, nil
	case environment.TargetAWS:
		if t.AWS == nil {
			return nil, fmt.Errorf("the AWS target names no roles")
		}
		return aws{t.TokenAudience(), *t.AWS}, nil
	case environment.TargetGCP:
		if t.GCP == nil {
			return nil, fmt.Errorf("the Google Cloud target names no workload identity provider")
		}
		return gcp{t.TokenAudience(), *t.GCP}, nil
	case environment.TargetAzure:
		if t.Azure == nil {
			return nil, fmt.Errorf("the Azure target names no tenant")
		}
		return azure{t.TokenAudience(), *t.Azure}, nil
	}
	return nil, fmt.Errorf("unknown target kind %q", t.Kind)
}

// pick is read or write by the phase's scope; anything but a write scope reads (a plan
// or verification never gets the writer, whatever it asks).
func pick(scope, read, write string) string {
	if scope == identity.ScopeWrite {
		return write
	}
	return read
}

// tokenPath is the token file's path as the command sees it.
func (p Phase) tokenPath() string { return p.Dir + "/" + TokenFile }

// env is vars as sorted VAR=value lines, without the empty ones (an optional setting
// left unset is not set to "").
func env(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	slices.Sort(out)
	return out
}

// sandbox is Gantry's sandbox cloud: its provider reads the token from
// SANDBOX_TOKEN_FILE again whenever the file changes (SANDBOX_ENDPOINT is the
// executor's: it knows where the cloud is reached from).
type sandbox struct{}

func (sandbox) Audience() string { return identity.DefaultAudience }

func (sandbox) Handout(p Phase) (Handout, error) {
	return Handout{Env: env(map[string]string{"SANDBOX_TOKEN_FILE": p.tokenPath()})}, nil
}
