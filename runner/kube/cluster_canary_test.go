//go:build !fast

// Live: needs the machine's Kubernetes test cluster (as root) and live OpenTofu (bin/tofu, built from tools/tofu).

package kube_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/runner/kube"
)

// notedCatalog is the shipped catalog with a test template whose access note is a
// sensitive input (it reaches the bucket only as a digest label, marked sensitive).
func notedCatalog(t testing.TB) fstest.MapFS {
	m := webtest.CatalogWith(t, map[string]string{
		"templates/noted/template.yaml": `name: noted
version: 1.0.0
title: Bucket with an access note
description: A private bucket labelled with the digest of a sensitive access note.
owner: platform-test
inputs:
  - name: name
    label: Bucket name
    type: string
    required: true
    pattern: "^[a-z][a-z0-9-]{2,40}$"
  - name: access_note
    label: Access note
    type: string
    required: true
    sensitive: true
prices:
  sandbox_bucket: 2.3
irreversible: [sandbox_bucket]
rollback: A new run with the previous inputs.
`,
		"templates/noted/module/main.tf": `resource "sandbox_bucket" "this" {
  name           = var.name
  region         = "eu-west"
  versioning     = true
  retention_days = 30
  public         = false
  labels = {
    managed_by = "gantry"
    template   = "noted"
    key_digest = sha256(var.access_note)
  }
}
`,
		"templates/noted/module/variables.tf": "variable \"name\" {\n  type = string\n}\n\nvariable \"access_note\" {\n  type = string\n}\n",
		"templates/noted/module/outputs.tf":   "output \"bucket_id\" {\n  value = sandbox_bucket.this.id\n}\n",
	})
	m["templates/noted/.terraform.lock.hcl"] = m["templates/bucket/.terraform.lock.hcl"]
	m["templates/noted/module/versions.tf"] = m["templates/bucket/module/versions.tf"]
	return m
}

// TestSecretsStayInTheirSecret: a run with a sensitive input, planned, applied and
// verified as Jobs: every phase's credentials (state password, workload token, endpoint
// token) and the sensitive value are in that phase's Secret and in no Job or pod object
// (seen while each pod runs), no stored log or plan JSON, and no page; each Secret is
// gone once its phase ended.
func TestSecretsStayInTheirSecret(t *testing.T) {
	const note = "canary-ACCESS-note-7f3e1a"
	e, ce := startOnCluster(t, envOptions{catalog: notedCatalog(t)})
	var mu sync.Mutex
	var snapshots [][]byte
	snapshot := func(spec kube.PodSpec) {
		mu.Lock()
		defer mu.Unlock()
		snapshots = append(snapshots, ce.objectsJSON(t, false))
		sec, err := ce.client.CoreV1().Secrets(ce.ns).Get(context.Background(), spec.Job, metav1.GetOptions{})
		if err != nil {
			t.Errorf("the Secret of %s while it runs: %v", spec.Job, err)
			return
		}
		if !bytes.Equal(sec.Data[kube.SecretEndpointToken], spec.Secrets[kube.SecretEndpointToken]) {
			t.Errorf("the Secret of %s does not hold its endpoint token", spec.Job)
		}
	}
	for _, phase := range []string{kube.PhasePlan, kube.PhaseApply, kube.PhaseVerify} {
		ce.rec.on(phase, "$ tofu init", snapshot)
	}
	operator := e.LoggedIn(t, "operator@acme.test")
	dev := e.OrgEnvironmentID(t, "acme", "development")
	id := e.App.RequestRun(t, operator, url.Values{"template": {"noted"}, "environment": {dev}, "workspace": {"noted"}, "kind": {"apply"},
		"inputs.name": {"noted-canary"}, "inputs.access_note": {note}})
	r := e.App.WaitForRun(t, id, run.Succeeded, phaseWait)
	ce.requireNothingLeft(t, 30*time.Second)

	specs := ce.rec.launched()
	require.Equal(t, []string{kube.PhasePlan, kube.PhaseApply, kube.PhaseVerify}, phasesOf(specs))
	canaries := map[string]string{"the sensitive input": note}
	for _, s := range specs {
		for name, v := range s.Secrets {
			if name != kube.SecretStateUsername {
				canaries[s.Phase+" "+name] = string(v)
			}
		}
	}
	require.Equal(t, note, string(specs[0].Secrets["var.access_note"]), "the plan's Secret holds the sensitive value")
	require.NotContains(t, specs[1].Secrets, "var.access_note", "an apply gets no variable: the saved plan holds it")
	mu.Lock()
	require.Len(t, snapshots, 3, "the Jobs and pods were seen while each phase ran")
	scanned := bytes.Join(snapshots, nil)
	mu.Unlock()
	scanned = append(scanned, e.App.RunLogs(t, r)...)
	for _, path := range []string{"/runs/" + r.ID, "/runs/" + r.ID + "/plan.json", "/runs/" + r.ID + "/review", "/workspaces/" + r.WorkspaceID} {
		resp := e.Get(t, operator, path)
		body := webtest.ReadBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		scanned = append(scanned, body...)
	}
	for what, v := range canaries {
		require.False(t, bytes.Contains(scanned, []byte(v)), "%s appears in a Job or pod object, a log or a page", what)
	}
	require.True(t, strings.Contains(string(scanned), "noted-canary"), "the scan saw the run")
}
