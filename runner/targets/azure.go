package targets

import "gantry/models/environment"

// azure is Azure workload identity federation: the azurerm and azuread providers'
// OIDC variables (ARM_USE_OIDC, ARM_OIDC_TOKEN_FILE_PATH) and the Azure SDKs' workload
// identity ones (AZURE_FEDERATED_TOKEN_FILE), both naming the token file, which they
// read again for each exchange. A plan or verification signs in as the read
// application, an apply as the write one. Not exercised against the real cloud here:
// unit tests check the variables (docs/targets.md).
type azure struct {
	audience string
	cfg      environment.AzureTarget
}

func (z azure) Audience() string { return z.audience }

func (z azure) Handout(p Phase) (Handout, error) {
	client := pick(p.Scope, z.cfg.ReadClientID, z.cfg.WriteClientID)
	return Handout{Env: env(map[string]string{
		"ARM_USE_OIDC":               "true",
		"ARM_OIDC_TOKEN_FILE_PATH":   p.tokenPath(),
		"ARM_CLIENT_ID":              client,
		"ARM_TENANT_ID":              z.cfg.TenantID,
		"ARM_SUBSCRIPTION_ID":        z.cfg.SubscriptionID,
		"ARM_USE_CLI":                "false",
		"ARM_USE_MSI":                "false",
		"AZURE_FEDERATED_TOKEN_FILE": p.tokenPath(),
		"AZURE_CLIENT_ID":            client,
		"AZURE_TENANT_ID":            z.cfg.TenantID,
	})}, nil
}
