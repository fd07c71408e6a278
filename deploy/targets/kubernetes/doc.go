// Package kubernetes holds the manifests a platform team applies to let a Kubernetes cluster
// trust Gantry's workload tokens (README.md says how), rendered by runner/targets/kubetarget
// for example values. Its test keeps the files equal to what kubetarget renders:
// `go test ./deploy/targets/kubernetes -update` writes them again.
package kubernetes
