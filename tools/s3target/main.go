// Command s3target builds the pinned SeaweedFS (tools/seaweedfs), the S3-compatible store with
// STS that the live tests of the AWS-style web identity integration run against
// (runner/targets/seaweed), into the user cache, and prints its path:
//
//	go run ./tools/s3target build     # task s3:build
//
// The tests build it the same way when it is missing; this lets CI start the build early, beside
// other steps, as it does for Kubernetes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"gantry/runner/targets/seaweed"
	"gantry/runner/tofu"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] != "build" {
		fmt.Fprintln(stderr, "usage: s3target build")
		return 2
	}
	root, err := tofu.RepoRoot(".")
	if err != nil {
		fmt.Fprintf(stderr, "s3target: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	path, err := seaweed.EnsureBinary(ctx, root, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "s3target: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s (commit %s)\n", path, seaweed.BinaryVersion(ctx, path))
	return 0
}
