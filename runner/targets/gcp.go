package targets

import (
	"encoding/json"

	"gantry/models/environment"
)

// gcp is Google Cloud workload identity federation: an external_account credential
// configuration (what `gcloud iam workload-identity-pools create-cred-config` writes)
// whose credential source is the token file, named by GOOGLE_APPLICATION_CREDENTIALS,
// which the google provider and every Google SDK read. The SDK exchanges the token at
// Google's STS for each access token, reading the file again. Not exercised against
// the real cloud here: unit tests check the files (docs/targets.md).
type gcp struct {
	audience string
	cfg      environment.GCPTarget
}

// GCPCredentialsFile is the credential configuration's name in the secret directory.
const GCPCredentialsFile = "gcp-credentials.json"

func (g gcp) Audience() string { return g.audience }

// externalAccount is the credential configuration's JSON.
type externalAccount struct {
	Type             string `json:"type"`
	Audience         string `json:"audience"`
	SubjectTokenType string `json:"subject_token_type"`
	TokenURL         string `json:"token_url"`
	ImpersonationURL string `json:"service_account_impersonation_url,omitempty"`
	CredentialSource source `json:"credential_source"`
	UniverseDomain   string `json:"universe_domain"`
}

type source struct {
	File   string `json:"file"`
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

func (g gcp) Handout(p Phase) (Handout, error) {
	c := externalAccount{Type: "external_account", Audience: "//iam.googleapis.com/" + g.cfg.Provider,
		SubjectTokenType: "urn:ietf:params:oauth:token-type:jwt", TokenURL: "https://sts.googleapis.com/v1/token",
		UniverseDomain: "googleapis.com"}
	if sa := pick(p.Scope, g.cfg.ReadServiceAccount, g.cfg.WriteServiceAccount); sa != "" {
		c.ImpersonationURL = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/" + sa + ":generateAccessToken"
	}
	c.CredentialSource.File = p.tokenPath()
	c.CredentialSource.Format.Type = "text"
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return Handout{}, err
	}
	path := p.Dir + "/" + GCPCredentialsFile
	return Handout{Files: map[string][]byte{GCPCredentialsFile: append(b, '\n')},
		Env: env(map[string]string{"GOOGLE_APPLICATION_CREDENTIALS": path, "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE": path})}, nil
}
