package targets

import (
	"encoding/base64"
	"fmt"

	"gantry/models/environment"
)

// kubernetes is an API server that trusts Gantry's issuer (a JWT authenticator mapping
// the token's claims to a user, groups per workspace and scope, and extras the admission
// policy reads: deploy/targets/kubernetes). The phase gets a kubeconfig whose user reads
// its bearer token from the token file: client-go reads that file again every minute,
// so a refreshed token is used without a restart. The kubeconfig holds no secret.
type kubernetes struct {
	audience string
	cfg      environment.KubernetesTarget
}

// KubeconfigFile is the kubeconfig's name in the secret directory.
const KubeconfigFile = "kubeconfig"

func (k kubernetes) Audience() string { return k.audience }

func (k kubernetes) Handout(p Phase) (Handout, error) {
	// JSON is YAML: %q keeps every value one quoted scalar, whatever it holds.
	config := fmt.Sprintf(`{"apiVersion": "v1", "kind": "Config",
  "clusters": [{"name": "target", "cluster": {"server": %q, "certificate-authority-data": %q}}],
  "users": [{"name": "gantry", "user": {"tokenFile": %q}}],
  "contexts": [{"name": "gantry", "context": {"cluster": "target", "user": "gantry"}}],
  "current-context": "gantry"}
`, k.cfg.Server, base64.StdEncoding.EncodeToString([]byte(k.cfg.CA)), p.tokenPath())
	path := p.Dir + "/" + KubeconfigFile
	return Handout{
		Files: map[string][]byte{KubeconfigFile: []byte(config)},
		// KUBE_CONFIG and KUBE_LOAD_CONFIG_FILE are hashicorp/kubernetes 1.x's names,
		// KUBE_CONFIG_PATH 2.x's, KUBECONFIG everyone else's (kubectl, client-go).
		Env: env(map[string]string{"KUBE_CONFIG": path, "KUBE_CONFIG_PATH": path, "KUBECONFIG": path,
			"KUBE_LOAD_CONFIG_FILE": "true", "KUBE_CTX": "gantry"}),
	}, nil
}
