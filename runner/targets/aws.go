package targets

import "gantry/models/environment"

// aws is AWS web identity federation, or an S3-compatible store with STS: the phase
// gets the standard variables every AWS SDK's default credential chain reads
// (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), so the provider exchanges the token
// itself with AssumeRoleWithWebIdentity, and reads the file again for each exchange.
// A plan or verification assumes the read role, an apply the write role.
type aws struct {
	audience string
	cfg      environment.AWSTarget
}

func (a aws) Audience() string { return a.audience }

func (a aws) Handout(p Phase) (Handout, error) {
	return Handout{Env: env(map[string]string{
		"AWS_ROLE_ARN":                pick(p.Scope, a.cfg.ReadRoleARN, a.cfg.WriteRoleARN),
		"AWS_WEB_IDENTITY_TOKEN_FILE": p.tokenPath(),
		"AWS_ROLE_SESSION_NAME":       p.Session,
		"AWS_REGION":                  a.cfg.Region,
		"AWS_DEFAULT_REGION":          a.cfg.Region,
		"AWS_STS_REGIONAL_ENDPOINTS":  "regional",
		// The overrides an S3-compatible store needs (SDKs read them since 2023).
		"AWS_ENDPOINT_URL_STS": a.cfg.STSEndpoint,
		"AWS_ENDPOINT_URL_S3":  a.cfg.S3Endpoint,
		// Nothing may reach for a shared credentials file or the instance metadata
		// service instead: the web identity is the phase's only way in.
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_CONFIG_FILE":             "/dev/null",
	})}, nil
}
