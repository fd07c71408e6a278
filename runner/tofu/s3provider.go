package tofu

import "path/filepath"

// Gantry's S3 provider (providers/s3, cmd/terraform-provider-s3): built from the source tree
// like the sandbox provider and published into the built-in mirror beside it (portal.local/*/*
// is installed only from there). No S3 provider can be built from the module proxy, so Gantry
// ships this small one; the bucket-s3 template requires it.
const (
	S3ProviderSource  = "portal.local/gantry/s3"
	S3ProviderVersion = "0.1.0"
	s3ProviderPackage = "./cmd/terraform-provider-s3"
)

// S3ProviderBinaryName is the S3 provider's executable as the toolchain builds it.
const S3ProviderBinaryName = "terraform-provider-s3_v" + S3ProviderVersion

// s3ProviderBuild is the S3 provider's static, reproducible build into dir: the same source
// and Go toolchain give the same binary, so the bucket-s3 template's lock file holds (no
// commit stamped in: a commit that leaves the provider alone leaves its hash alone).
func s3ProviderBuild(repoRoot, dir string) GoBuild {
	return GoBuild{Label: "the S3 provider", Dir: repoRoot, Package: s3ProviderPackage,
		Flags: []string{"-trimpath", "-buildvcs=false", "-ldflags", "-s -w -X main.version=" + S3ProviderVersion, "-o", filepath.Join(dir, S3ProviderBinaryName)}}
}

// S3Provider is the S3 provider's binary at path (a prebuilt one, for Mirroring.Providers).
func S3Provider(path string) ProviderBinary {
	return ProviderBinary{Source: S3ProviderSource, Version: S3ProviderVersion, Path: path}
}
