package kube

// Where things are in the runner image and its pods: the Job's spec and gantry-phase's
// defaults use the same constants.
const (
	ImageTofu      = "/bin/tofu"
	ImagePhase     = "/bin/gantry-phase"
	ImageMirror    = "/tofu/mirror"
	ImageCLIConfig = "/tofu/tofurc.hcl"
	ImagePlugins   = "/tofu/plugins" // the read-only plugin cache (tofu.PluginCache.Root)
	// SecretMount is where the per-Job Secret is mounted, read-only.
	SecretMount = "/run/gantry"
	// WorkMount is the pod's only writable directory (an emptyDir).
	WorkMount = "/work"
	// RunnerUID is the uid and gid the pods run as (named "runner" in the image).
	RunnerUID = 65532
)

// The pod's environment (no secret is ever in it).
const (
	EnvPhaseURL      = "GANTRY_PHASE_URL" // the phase's URL on the phase endpoint
	EnvCloudEndpoint = "SANDBOX_ENDPOINT" // the cloud as the pod reaches it
)
