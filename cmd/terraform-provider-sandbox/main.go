// Command terraform-provider-sandbox is the OpenTofu provider for Gantry's sandbox cloud
// (source address portal.local/sandbox/sandbox, plugin protocol 6). Build it with
//
//	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=0.1.0" \
//	  -o <mirror>/portal.local/sandbox/sandbox/0.1.0/linux_amd64/terraform-provider-sandbox_v0.1.0 \
//	  ./cmd/terraform-provider-sandbox
//
// OpenTofu starts it; it is not meant to be run by hand (except with -debug, for a debugger).
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"gantry/sandbox/provider"
)

// version is set at build time with -ldflags "-X main.version=0.1.0".
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "serve for a debugger and print TF_REATTACH_PROVIDERS")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: provider.Address,
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
