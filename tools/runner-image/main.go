// Command runner-image builds the tofu/kubernetes executor's runner image (`go tool task
// k8s:image`): the pinned tofu and the sandbox provider built from the source tree (bin/tofu
// is reused), gantry-phase, the provider mirror and the plugin cache of the catalog's lock
// files, as an OCI image layout tar named gantry.local/runner:<content tag>. It prints the
// name to give gantry as --kube-image. With -import it also imports the image into the
// machine's running test cluster (/var/lib/gantry/k8s); nothing is pulled or pushed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	catalogfiles "gantry/catalog"
	"gantry/runner/kube"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/tofu"
)

func main() {
	out := flag.String("o", ".data/images/runner.tar", "where to write the image layout tar")
	imp := flag.Bool("import", false, "also import the image into the machine's running test cluster (/var/lib/gantry/k8s) (go tool task k8s:up)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *imp); err != nil {
		fmt.Fprintln(os.Stderr, "runner-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, imp bool) error {
	root, err := tofu.RepoRoot(".")
	if err != nil {
		return err
	}
	work := filepath.Join(root, ".data", "images", "runner-build")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	tc, _, err := tofu.Build{Root: root, Dir: filepath.Join(work, "toolchain"), Log: os.Stderr}.Run(ctx)
	if err != nil {
		return err
	}
	phase, err := kube.BuildPhase(ctx, root, work)
	if err != nil {
		return err
	}
	locks, err := kube.CatalogLocks(catalogfiles.FS)
	if err != nil {
		return err
	}
	img, err := kube.RunnerImage(tc, phase, locks)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
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
	_, cluster, err := kubecluster.Status(ctx, kubecluster.DefaultDir())
	if err != nil {
		return fmt.Errorf("importing into the test cluster (start it with go tool task k8s:up): %w", err)
	}
	if err := cluster.Import(ctx, out); err != nil {
		return err
	}
	if err := cluster.WaitListed(ctx, img.Name); err != nil { // the executor's health looks there
		return err
	}
	fmt.Printf("imported %s into the test cluster's containerd: gantry serve --kube-image %s\n", img.Name, img.Name)
	return nil
}
