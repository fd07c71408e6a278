package environment_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db/dbtest"
	"gantry/models/environment"
	"gantry/models/errs"
	"gantry/models/org"
)

func kubeTarget(server, ca string) *environment.Target {
	return &environment.Target{Kind: environment.TargetKubernetes, Kubernetes: &environment.KubernetesTarget{Server: server, CA: ca}}
}

// TestEnvironmentTarget: an environment provisions into the sandbox cloud unless an admin
// names a target; a named target is checked field by field (nothing stored when one is
// wrong), stored with only its kind's settings, read by every read (the runner's
// Directory.Target too), kept by an edit that does not name one, and audited before and
// after with the CA as its fingerprint. Another organization's environment is not found,
// and only an admin changes a target.
func TestEnvironmentTarget(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	log := audit.New(gdb)
	orgs := org.NewService(gdb, log)
	ctx := context.Background()
	a, err := orgs.EnsureOrganization(ctx, "a", "A")
	require.NoError(t, err)
	b, err := orgs.EnsureOrganization(ctx, "b", "B")
	require.NoError(t, err)
	as := func(orgID string, role authz.Role) context.Context {
		return authz.WithSubject(ctx, authz.Subject{UserID: "usr-" + string(role), Name: string(role), OrganizationID: orgID, Role: role})
	}
	asA, asB := as(a.ID, authz.RoleAdmin), as(b.ID, authz.RoleAdmin)
	svc := environment.NewService(gdb, log, nil)
	dir := environment.NewDirectory(gdb)
	ca := testCA(t)
	counts := func() [2]int64 {
		var envs, events int64
		require.NoError(t, gdb.Table("environments").Count(&envs).Error)
		require.NoError(t, gdb.Table("audit_events").Count(&events).Error)
		return [2]int64{envs, events}
	}

	plain, err := svc.Create(asA, environment.Input{Name: "plain", Tier: "development"})
	require.NoError(t, err)
	require.Equal(t, environment.Target{Kind: environment.TargetSandbox}, plain.Target)
	got, err := dir.Target(ctx, a.ID, plain.ID)
	require.NoError(t, err)
	require.Equal(t, environment.TargetSandbox, got.Kind)

	// A wrong setting is a message on its field, and nothing is stored.
	before := counts()
	for name, tc := range map[string]struct {
		target *environment.Target
		field  string
	}{
		"bad URL":    {kubeTarget("k8s.example.com", ca), "target_kubernetes_server"},
		"no CA":      {kubeTarget("https://k8s.example.com:6443", ""), "target_kubernetes_ca"},
		"NUL in CA":  {kubeTarget("https://k8s.example.com:6443", ca+"\x00"), "target_kubernetes_ca"},
		"CA 70 KiB":  {kubeTarget("https://k8s.example.com:6443", strings.Repeat(ca, 70<<10/len(ca)+1)), "target_kubernetes_ca"},
		"bad kind":   {&environment.Target{Kind: "ftp"}, "target_kind"},
		"bad region": {&environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{ReadRoleARN: "arn:aws:iam::123456789012:role/r", WriteRoleARN: "arn:aws:iam::123456789012:role/w", Region: "Mars"}}, "target_aws_region"},
	} {
		_, err := svc.Create(asA, environment.Input{Name: "kube", Tier: "staging", Target: tc.target})
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%s: %v", name, err)
		require.Contains(t, v.Fields, tc.field, name)
		_, err = svc.Update(asA, plain.ID, environment.Input{Name: "plain", Tier: "development", Target: tc.target})
		v, ok = errs.AsValidation(err)
		require.True(t, ok, "%s: %v", name, err)
		require.Contains(t, v.Fields, tc.field, name)
	}
	require.Equal(t, before, counts(), "a refused target stores nothing")
	got, err = dir.Target(ctx, a.ID, plain.ID)
	require.NoError(t, err)
	require.Equal(t, environment.TargetSandbox, got.Kind)

	// A good one is stored with only its kind's settings.
	typed := kubeTarget("https://k8s.example.com:6443", ca)
	typed.Audience = "kube.gantry"
	typed.AWS = &environment.AWSTarget{Region: "left over from another kind"}
	kube, err := svc.Create(asA, environment.Input{Name: "kube", Tier: "staging", Target: typed})
	require.NoError(t, err)
	want := environment.Target{Kind: environment.TargetKubernetes, Audience: "kube.gantry",
		Kubernetes: &environment.KubernetesTarget{Server: "https://k8s.example.com:6443", CA: ca}}
	require.Equal(t, want, kube.Target)
	for _, read := range []func() (environment.Target, error){
		func() (environment.Target, error) { e, err := svc.Get(asA, kube.ID); return e.Target, err },
		func() (environment.Target, error) { return dir.Target(ctx, a.ID, kube.ID) },
		func() (environment.Target, error) {
			envs, err := svc.List(asA)
			for _, e := range envs {
				if e.ID == kube.ID {
					return e.Target, err
				}
			}
			return environment.Target{}, err
		},
		func() (environment.Target, error) {
			envs, _, err := svc.AllOf(ctx, a.ID)
			for _, e := range envs {
				if e.ID == kube.ID {
					return e.Target, err
				}
			}
			return environment.Target{}, err
		},
	} {
		got, err := read()
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	var created audit.Event
	require.NoError(t, gdb.Where("target_id = ? AND action = 'environment.created'", kube.ID).Take(&created).Error)
	require.NotContains(t, string(created.Data), "BEGIN CERTIFICATE", "the CA is audited as its fingerprint")
	require.Contains(t, string(created.Data), environment.CAFingerprints(ca)[0])

	// An edit without a target keeps it; naming the same one changes nothing.
	mid := counts()
	kept, err := svc.Update(asA, kube.ID, environment.Input{Name: "kube", Tier: "staging"})
	require.NoError(t, err)
	require.Equal(t, want, kept.Target)
	same := want
	_, err = svc.Update(asA, kube.ID, environment.Input{Name: "kube", Tier: "staging", Target: &same})
	require.NoError(t, err)
	require.Equal(t, mid, counts(), "an edit that changes nothing audits nothing")

	// Another kind, audited before and after.
	aws := &environment.Target{Kind: environment.TargetAWS, AWS: &environment.AWSTarget{ReadRoleARN: "arn:aws:iam::123456789012:role/gantry-read",
		WriteRoleARN: "arn:aws:iam::123456789012:role/gantry-write", Region: "eu-west-1", STSEndpoint: "http://127.0.0.1:8333"}}
	moved, err := svc.Update(asA, kube.ID, environment.Input{Name: "kube", Tier: "staging", Target: aws})
	require.NoError(t, err)
	require.Equal(t, *aws, moved.Target)
	var updated audit.Event
	require.NoError(t, gdb.Where("target_id = ? AND action = 'environment.updated'", kube.ID).Take(&updated).Error)
	var data struct {
		Before, After struct {
			Target map[string]any `json:"target"`
		}
	}
	require.NoError(t, json.Unmarshal(updated.Data, &data))
	require.Equal(t, "kubernetes", data.Before.Target["kind"])
	require.Equal(t, map[string]any{"server": "https://k8s.example.com:6443", "ca_sha256": []any{environment.CAFingerprints(ca)[0]}}, data.Before.Target["kubernetes"])
	require.Equal(t, "aws", data.After.Target["kind"])
	require.Equal(t, "arn:aws:iam::123456789012:role/gantry-write", data.After.Target["aws"].(map[string]any)["write_role_arn"])

	// Another organization's environment is not found, by the service and the runner's read.
	_, err = svc.Update(asB, kube.ID, environment.Input{Name: "kube", Tier: "staging", Target: &environment.Target{Kind: environment.TargetSandbox}})
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, err = dir.Target(ctx, b.ID, kube.ID)
	require.ErrorIs(t, err, errs.ErrNotFound)
	_, err = dir.Target(ctx, a.ID, "env-nosuch")
	require.ErrorIs(t, err, errs.ErrNotFound)

	// Only an admin (or owner) changes a target.
	for _, role := range []authz.Role{authz.RoleViewer, authz.RoleOperator, authz.RoleAuditor} {
		_, err := svc.Update(as(a.ID, role), kube.ID, environment.Input{Name: "kube", Tier: "staging", Target: &environment.Target{Kind: environment.TargetSandbox}})
		require.ErrorIs(t, err, errs.ErrForbidden, role)
		_, err = svc.Create(as(a.ID, role), environment.Input{Name: "mine", Tier: "staging", Target: kubeTarget("https://k8s.example.com", ca)})
		require.ErrorIs(t, err, errs.ErrForbidden, role)
	}
	got, err = dir.Target(ctx, a.ID, kube.ID)
	require.NoError(t, err)
	require.Equal(t, *aws, got)
}

// TestTargetFields: the form's fields round-trip a target, a browser's CRLF in the CA
// becomes LF, and a kind's settings exist only when one of its fields is filled in.
func TestTargetFields(t *testing.T) {
	t.Parallel()
	ca := testCA(t)
	target := environment.Target{Kind: environment.TargetGCP, Audience: "aud",
		GCP: &environment.GCPTarget{Provider: "projects/1/locations/global/workloadIdentityPools/pool1/providers/prov1", ReadServiceAccount: "reader@p1.iam.gserviceaccount.com"}}
	fields := target.Fields()
	require.Equal(t, "gcp", fields["target_kind"])
	require.Equal(t, "reader@p1.iam.gserviceaccount.com", fields["target_gcp_read_service_account"])
	require.Empty(t, fields["target_kubernetes_server"])
	require.Nil(t, target.Kubernetes, "reading the fields changes nothing")
	require.Equal(t, target, environment.TargetFromFields(func(f string) string { return fields[f] }))

	form := map[string]string{"target_kind": "kubernetes", "target_kubernetes_server": " https://k8s.example.com ",
		"target_kubernetes_ca": strings.ReplaceAll(ca, "\n", "\r\n")}
	got := environment.TargetFromFields(func(f string) string { return form[f] })
	require.Equal(t, environment.Target{Kind: environment.TargetKubernetes, Kubernetes: &environment.KubernetesTarget{Server: "https://k8s.example.com", CA: ca}}, got)
	require.Nil(t, got.AWS)
	require.Empty(t, targetErrors(got))
}

// TestIntegrationOf: what each target lets a phase be, and static credentials override
// the federated identity of the scope they serve.
func TestIntegrationOf(t *testing.T) {
	t.Parallel()
	env := environment.Environment{ID: "env-1", OrganizationID: "org-1"}
	i := environment.IntegrationOf(env, environment.Standing{})
	require.Equal(t, environment.TargetSandbox, i.Kind)
	require.Equal(t, "federated", i.Credentials())
	require.Equal(t, environment.Integration{Kind: environment.TargetSandbox, Audience: "sandbox",
		Read: "a workload token of scope read", Write: "a workload token of scope write"}, i)

	env.Target = *kubeTarget("https://k8s.example.com", "x")
	i = environment.IntegrationOf(env, environment.Standing{})
	require.Equal(t, environment.Integration{Kind: environment.TargetKubernetes, Where: "https://k8s.example.com", Audience: "kubernetes",
		Read:  "groups gantry:ws:<workspace>:read, gantry:org:org-1:read (user gantry:org:org-1:env:env-1:ws:<workspace>:run:<run>:phase:<phase>)",
		Write: "groups gantry:ws:<workspace>:write, gantry:org:org-1:write (user gantry:org:org-1:env:env-1:ws:<workspace>:run:<run>:phase:<phase>)"}, i)
	now := time.Now()
	i = environment.IntegrationOf(env, environment.Standing{WriteSetAt: &now, ReadSetAt: &now})
	require.Equal(t, "static", i.Credentials())
	require.Equal(t, "the environment's static read credential (standing access)", i.Read, "a Kubernetes target takes it as a bearer token")

	env.Target = environment.Target{Kind: environment.TargetGCP, GCP: &environment.GCPTarget{Provider: "projects/1/locations/global/workloadIdentityPools/pool1/providers/prov1",
		WriteServiceAccount: "writer@p1.iam.gserviceaccount.com"}}
	i = environment.IntegrationOf(env, environment.Standing{})
	require.Equal(t, "the federated principal principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool1/subject/org:org-1:env:env-1:ws:<workspace>:run:<run>:phase:<phase>", i.Read)
	require.Equal(t, "service account writer@p1.iam.gserviceaccount.com", i.Write)
	require.Equal(t, "https://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool1/providers/prov1", i.Audience)

	i = environment.IntegrationOf(env, environment.Standing{WriteSetAt: &now, ReadSetAt: &now})
	require.Equal(t, "static", i.Credentials())
	require.Equal(t, "none: the environment holds a static read credential, which this target cannot use, so its phases are refused until it is removed", i.Read)
	require.Contains(t, i.Write, "static write credential, which this target cannot use")
}
