package environment

import "strings"

// A target's form fields carry Validate's names (target_kind, target_audience and
// target_<kind>_<setting>), so a refused setting's message lands beside its field. Every
// kind's fields are on the form at once (it works without JavaScript); only the chosen
// kind's are kept (Normal).

// TargetCAField is the one multi-line target field: the Kubernetes CA's PEM.
const TargetCAField = "target_kubernetes_ca"

// targetSetting is one setting: its field and where it is in a Target (get allocates
// the kind's settings when they are missing).
type targetSetting struct {
	field string
	get   func(*Target) *string
}

var targetSettings = []targetSetting{
	{"target_kubernetes_server", func(t *Target) *string { return &ensure(&t.Kubernetes).Server }},
	{TargetCAField, func(t *Target) *string { return &ensure(&t.Kubernetes).CA }},
	{"target_aws_read_role_arn", func(t *Target) *string { return &ensure(&t.AWS).ReadRoleARN }},
	{"target_aws_write_role_arn", func(t *Target) *string { return &ensure(&t.AWS).WriteRoleARN }},
	{"target_aws_region", func(t *Target) *string { return &ensure(&t.AWS).Region }},
	{"target_aws_sts_endpoint", func(t *Target) *string { return &ensure(&t.AWS).STSEndpoint }},
	{"target_aws_s3_endpoint", func(t *Target) *string { return &ensure(&t.AWS).S3Endpoint }},
	{"target_gcp_provider", func(t *Target) *string { return &ensure(&t.GCP).Provider }},
	{"target_gcp_read_service_account", func(t *Target) *string { return &ensure(&t.GCP).ReadServiceAccount }},
	{"target_gcp_write_service_account", func(t *Target) *string { return &ensure(&t.GCP).WriteServiceAccount }},
	{"target_azure_tenant_id", func(t *Target) *string { return &ensure(&t.Azure).TenantID }},
	{"target_azure_subscription_id", func(t *Target) *string { return &ensure(&t.Azure).SubscriptionID }},
	{"target_azure_read_client_id", func(t *Target) *string { return &ensure(&t.Azure).ReadClientID }},
	{"target_azure_write_client_id", func(t *Target) *string { return &ensure(&t.Azure).WriteClientID }},
}

func ensure[T any](p **T) *T {
	if *p == nil {
		*p = new(T)
	}
	return *p
}

// Fields are t's settings by form field name (empty for the settings t has not), with
// target_kind and target_audience.
func (t Target) Fields() map[string]string {
	out := map[string]string{"target_kind": string(t.Kind), "target_audience": t.Audience}
	c := t // get allocates in c only; an existing kind's settings are read, never written
	for _, s := range targetSettings {
		out[s.field] = *s.get(&c)
	}
	return out
}

// TargetFromFields reads a target from form fields as a browser sends them: one-line
// fields trimmed, the CA's line breaks as LF. A kind's settings are set only when one
// of its fields is filled in.
func TargetFromFields(value func(field string) string) Target {
	t := Target{Kind: TargetKind(strings.TrimSpace(value("target_kind"))), Audience: strings.TrimSpace(value("target_audience"))}
	for _, s := range targetSettings {
		v := strings.TrimSpace(value(s.field))
		if s.field == TargetCAField && v != "" {
			v = strings.ReplaceAll(v, "\r\n", "\n") + "\n"
		}
		if v != "" {
			*s.get(&t) = v
		}
	}
	return t
}
