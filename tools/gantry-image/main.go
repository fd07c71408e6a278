// Command gantry-image builds the `gantry serve` container image as an OCI image layout tar
// (`go tool task image:gantry`): push it to a registry with any OCI tool, or import it into
// a node's containerd (`ctr -n k8s.io images import`). Nothing is pulled or downloaded.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"gantry/deploy/portalimage"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/tofu"
)

func main() {
	out := flag.String("o", ".data/images/gantry.tar", "where to write the image layout tar")
	tag := flag.String("tag", "", "the image's tag (default: the chart's appVersion, the tag it installs)")
	imp := flag.Bool("import", false, "also import the image into the machine's running test cluster (/var/lib/gantry/k8s) (go tool task k8s:up)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *tag, *imp); err != nil {
		fmt.Fprintln(os.Stderr, "gantry-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, tag string, imp bool) error {
	root, err := tofu.RepoRoot(".")
	if err != nil {
		return err
	}
	if tag == "" {
		if tag, err = portalimage.ChartAppVersion(root); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	binary, err := portalimage.BuildBinary(ctx, root, filepath.Dir(out))
	if err != nil {
		return err
	}
	img, err := portalimage.Image(binary, portalimage.CABundle, tag)
	if err != nil {
		return err
	}
	digest, err := img.WriteLayoutFile(out)
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Printf("%s (manifest %s) written to %s\n", img.Name, digest, out)
	if !imp {
		return nil
	}
	// Only a cluster that runs: importing never starts one.
	// The machine's test cluster, which task k8s:up and the tests use.
	_, cluster, err := kubecluster.Status(ctx, kubecluster.DefaultDir())
	if err != nil {
		return fmt.Errorf("importing into the test cluster (start it with go tool task k8s:up): %w", err)
	}
	if err := cluster.Import(ctx, out); err != nil {
		return err
	}
	fmt.Printf("imported %s into the test cluster's containerd (use it with image.pullPolicy=Never)\n", img.Name)
	return nil
}
