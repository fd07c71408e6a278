// Command k8scluster builds, starts, stops and inspects the single-node Kubernetes test
// cluster (runner/kube/kubecluster) for the tasks:
//
//	go run ./tools/k8scluster build     # the pinned binary, into the user cache (task k8s:build)
//	go run ./tools/k8scluster up        # start, or reuse, the machine's cluster (task k8s:up)
//	go run ./tools/k8scluster down      # stop it by its PID files and clean up, once no test uses it (task k8s:down)
//	go run ./tools/k8scluster status    # which components run; exit 1 unless healthy
//
// -dir picks another state directory (default the machine's, /var/lib/gantry/k8s or
// $GANTRY_K8S_DIR: the one the tests of every checkout share, runner/kube/kubecluster/kubetest).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"gantry/runner/kube/kubecluster"
	"gantry/runner/tofu"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("k8scluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "state directory (default: "+kubecluster.DefaultDir()+", the machine's)")
	force := fs.Bool("force", false, "down: stop the cluster even while tests use it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: k8scluster [-dir DIR] [-force] build|up|down|status")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	root, err := tofu.RepoRoot(".")
	if err != nil {
		fmt.Fprintf(stderr, "k8scluster: %v\n", err)
		return 1
	}
	if *dir == "" {
		*dir = kubecluster.DefaultDir()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch fs.Arg(0) {
	case "build":
		path, err := kubecluster.EnsureBinary(ctx, root, stderr)
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "%s (%s)\n", path, kubecluster.BinaryVersion(ctx, path))
	case "up":
		c, err := kubecluster.Start(ctx, kubecluster.Options{Dir: *dir, RepoRoot: root, Log: stderr, Owner: kubecluster.OwnerDeveloper})
		if err != nil {
			return fail(stderr, err)
		}
		if c.Reused {
			fmt.Fprintf(stderr, "the cluster in %s was already running\n", c.Dir())
		}
		fmt.Fprintf(stdout, "export KUBECONFIG=%s\n", c.Kubeconfig())
	case "down":
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if !*force {
			// A test in another process may be using the cluster: wait for it.
			unlock, err := kubecluster.LockUsers(ctx, *dir, true, "k8scluster down", stderr)
			if err != nil {
				return fail(stderr, fmt.Errorf("%w (-force stops it anyway)", err))
			}
			defer unlock()
		}
		if err := kubecluster.Stop(ctx, *dir); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stderr, "stopped the cluster in %s\n", *dir)
	case "status":
		running, c, err := kubecluster.Status(ctx, *dir)
		fmt.Fprintf(stdout, "state directory: %s\nrunning: %v\n", *dir, running)
		if err != nil {
			fmt.Fprintf(stdout, "healthy: no (%v)\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "healthy: yes (node %s at %s)\nexport KUBECONFIG=%s\n", kubecluster.NodeName, c.NodeIP(), c.Kubeconfig())
	default:
		fs.Usage()
		return 2
	}
	return 0
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "k8scluster: %v\n", err)
	return 1
}
