package mock_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"gantry/models/bundle"
	"gantry/models/secret"
	"gantry/runner"
	"gantry/runner/mock"
)

// noteSecret is the value of the sensitive root variable in these tests.
const noteSecret = "canary-note-7f3a9d21e4"

// notedBundle is a config bundle as Gantry generates one for a template with a
// sensitive input: a sensitive root variable passed to the module as var.note, which
// the module uses only through sha256 in a label. extraRoot is appended to main.tf.
func notedBundle(t *testing.T, extraRoot string) []byte {
	t.Helper()
	main := `terraform {
  required_providers {
    sandbox = { source = "portal.local/sandbox/sandbox", version = "0.1.0" }
  }
}

provider "sandbox" {}

variable "note" {
  type      = string
  sensitive = true
}

module "noted" {
  source = "./modules/noted"
  name   = "logs"
  note   = var.note
}

output "url" {
  value = module.noted.url
}
` + extraRoot
	module := `variable "name" {
  type = string
}

variable "note" {
  type = string
}

resource "sandbox_bucket" "this" {
  name           = var.name
  region         = "eu-west"
  versioning     = true
  retention_days = 30
  public         = false
  labels = {
    managed_by = "gantry"
    key_digest = sha256(var.note)
  }
  lifecycle {
    precondition {
      condition     = length(var.note) >= 12
      error_message = "The access note must be at least 12 characters."
    }
  }
}

output "url" {
  value = sandbox_bucket.this.url
}

output "digest" {
  value = sandbox_bucket.this.labels["key_digest"]
}
`
	tarball, _, err := bundle.Bundle{Files: map[string][]byte{"main.tf": []byte(main), ".terraform.lock.hcl": []byte("# lock\n"),
		"modules/noted/main.tf": []byte(module)}}.Tar()
	require.NoError(t, err)
	return tarball
}

func planWith(t *testing.T, config, prior []byte, vars secret.Variables) (runner.PlanResult, error) {
	t.Helper()
	return mock.New().Plan(context.Background(), runner.PlanRequest{RunID: "run-1", WorkspaceID: workspace, Kind: runner.KindApply,
		Config: config, PriorState: prior, Variables: vars})
}

// TestSensitiveRootVariables: the mock takes a sensitive root variable's value from the
// request's Variables, marks it and what derives from it sensitive as tofu does (the
// plan JSON's variables in clear beside the configuration saying they are sensitive,
// after_sensitive and sensitive_values for the derived label, "(sensitive value)" in
// the log, sensitive_attributes in the state), keeps it in the plan file for the apply
// (which is given no variables), and refuses a plan without it.
func TestSensitiveRootVariables(t *testing.T) {
	t.Parallel()
	cfg := notedBundle(t, "")
	sum := sha256.Sum256([]byte(noteSecret))
	digest := hex.EncodeToString(sum[:])

	_, err := planWith(t, cfg, nil, nil)
	require.ErrorContains(t, err, `no value for required variable: the root module input variable "note" is not set`)
	_, err = planWith(t, cfg, nil, secret.Variables{"note": "too-short"})
	require.ErrorContains(t, err, "Resource precondition failed: sandbox_bucket.this: The access note must be at least 12 characters.",
		"a precondition on a sensitive value is checked, and says its message")
	require.NotContains(t, err.Error(), "too-short")

	res, err := planWith(t, cfg, nil, secret.Variables{"note": noteSecret, "undeclared": "ignored"})
	require.NoError(t, err)
	var doc struct {
		Variables map[string]struct {
			Value string `json:"value"`
		} `json:"variables"`
		Configuration struct {
			RootModule struct {
				Variables map[string]struct {
					Sensitive bool `json:"sensitive"`
					Required  bool `json:"required"`
				} `json:"variables"`
			} `json:"root_module"`
		} `json:"configuration"`
		ResourceChanges []struct {
			Change struct {
				After           map[string]any `json:"after"`
				AfterSensitive  map[string]any `json:"after_sensitive"`
				BeforeSensitive any            `json:"before_sensitive"`
			} `json:"change"`
		} `json:"resource_changes"`
		PlannedValues struct {
			RootModule struct {
				ChildModules []struct {
					Resources []struct {
						SensitiveValues map[string]any `json:"sensitive_values"`
					} `json:"resources"`
				} `json:"child_modules"`
			} `json:"root_module"`
		} `json:"planned_values"`
	}
	require.NoError(t, json.Unmarshal(res.PlanJSON, &doc))
	require.Equal(t, noteSecret, doc.Variables["note"].Value, "tofu writes a sensitive variable's value into its plan JSON: Gantry redacts it")
	require.NotContains(t, doc.Variables, "undeclared")
	require.True(t, doc.Configuration.RootModule.Variables["note"].Sensitive)
	require.True(t, doc.Configuration.RootModule.Variables["note"].Required)
	require.Len(t, doc.ResourceChanges, 1)
	ch := doc.ResourceChanges[0].Change
	require.Equal(t, digest, ch.After["labels"].(map[string]any)["key_digest"])
	require.Equal(t, map[string]any{"labels": map[string]any{"key_digest": true}}, ch.AfterSensitive)
	require.Equal(t, false, ch.BeforeSensitive)
	require.Equal(t, map[string]any{"labels": map[string]any{"key_digest": true}}, doc.PlannedValues.RootModule.ChildModules[0].Resources[0].SensitiveValues)
	log := string(res.Log)
	require.NotContains(t, log, noteSecret)
	require.NotContains(t, log, digest, "a value derived from a sensitive one is not printed")
	require.Contains(t, log, "key_digest = (sensitive value)")
	require.Contains(t, string(res.PlanFile), noteSecret, "the saved plan holds the value its apply uses, as tofu's does")

	// The apply is given no variables: the plan file has them.
	out, err := mock.New().Apply(context.Background(), runner.ApplyRequest{RunID: "run-1", WorkspaceID: workspace, Config: cfg, PlanFile: res.PlanFile})
	require.NoError(t, err)
	require.NotContains(t, string(out.State), noteSecret)
	require.Contains(t, string(out.State), digest, "the state holds the derived value, as tofu's does, marked sensitive")
	var st struct {
		Resources []struct {
			Instances []struct {
				SensitiveAttributes json.RawMessage `json:"sensitive_attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	require.NoError(t, json.Unmarshal(out.State, &st))
	require.JSONEq(t, `[[{"type":"get_attr","value":"labels"},{"type":"index","value":{"value":"key_digest","type":"string"}}]]`,
		string(st.Resources[0].Instances[0].SensitiveAttributes))
	require.NotContains(t, string(out.Log), digest)

	// Planned again with the same value: nothing changes, and the prior value is known
	// to be sensitive from the state.
	again, err := planWith(t, cfg, out.State, secret.Variables{"note": noteSecret})
	require.NoError(t, err)
	require.False(t, again.HasChanges)
	require.NoError(t, json.Unmarshal(again.PlanJSON, &doc))
	require.Equal(t, map[string]any{"labels": map[string]any{"key_digest": true}}, doc.ResourceChanges[0].Change.BeforeSensitive)

	// Another value: the label changes, shown sensitive on both sides.
	changed, err := planWith(t, cfg, out.State, secret.Variables{"note": "another-note-value"})
	require.NoError(t, err)
	require.True(t, changed.HasChanges)
	require.Contains(t, string(changed.Log), `~ labels = { key_digest = (sensitive value), managed_by = "gantry" } -> { key_digest = (sensitive value), managed_by = "gantry" }`)
	require.NotContains(t, string(changed.Log), digest)
}

// TestSensitiveValuesNeedSensitiveOutputs: as in tofu, a root output holding a value
// derived from a sensitive one must be declared sensitive, and then shows none of it.
func TestSensitiveValuesNeedSensitiveOutputs(t *testing.T) {
	t.Parallel()
	_, err := planWith(t, notedBundle(t, "\noutput \"digest\" {\n  value = module.noted.digest\n}\n"), nil, secret.Variables{"note": noteSecret})
	require.ErrorContains(t, err, `output "digest": Output refers to sensitive values`)

	res, err := planWith(t, notedBundle(t, "\noutput \"digest\" {\n  value     = module.noted.digest\n  sensitive = true\n}\n"), nil, secret.Variables{"note": noteSecret})
	require.NoError(t, err)
	require.True(t, strings.Contains(string(res.Log), "digest = (sensitive value)"), string(res.Log))
}
