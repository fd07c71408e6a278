// Command terraform-provider-s3 is Gantry's OpenTofu provider for S3 buckets (source
// address portal.local/gantry/s3, plugin protocol 6; providers/s3). Gantry's toolchain
// builds it into the offline provider mirror beside the sandbox provider (runner/tofu):
//
//	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=0.1.0" \
//	  -o <mirror>/portal.local/gantry/s3/0.1.0/linux_amd64/terraform-provider-s3_v0.1.0 \
//	  ./cmd/terraform-provider-s3
//
// OpenTofu starts it; it is not meant to be run by hand (except with -debug, for a debugger).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"gantry/providers/s3"
)

// version is set at build time with -ldflags "-X main.version=0.1.0".
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "serve for a debugger and print TF_REATTACH_PROVIDERS")
	flag.Parse()
	err := providerserver.Serve(context.Background(), s3.New(version), providerserver.ServeOpts{
		Address: s3.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
