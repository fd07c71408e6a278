// Command k8s is the pinned Kubernetes control plane and node agent of the single-node test
// cluster in one static binary: kube-apiserver, kube-controller-manager, kube-scheduler and
// kubelet, chosen by the name it runs as (argv[0], for symlinks) or by its first argument
// (`k8s kubelet --config ...`). One binary instead of four: a quarter of the link time and disk,
// and one version to check. `k8s version` prints the Kubernetes version the build was stamped
// with (the -X flags of `go tool task k8s:build` and runner/kube/kubecluster.EnsureBinary).
//
// It mirrors upstream's cmd/<component>/<component>.go mains, blank imports included.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // the controller-manager's CronJob time zones

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // the JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// command returns the named component's command, or nil. Only the chosen one is built, so the
// others never register their flags.
func command(name string) *cobra.Command {
	switch name {
	case "kube-apiserver":
		return apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		return controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		return scheduler.NewSchedulerCommand()
	case "kubelet":
		return kubelet.NewKubeletCommand(context.Background())
	}
	return nil
}

func main() {
	args := os.Args
	name := filepath.Base(args[0])
	cmd := command(name)
	if cmd == nil && len(args) > 1 {
		name, args = args[1], args[1:]
		cmd = command(name)
	}
	if name == "version" {
		fmt.Println(version.Get().GitVersion)
		return
	}
	if cmd == nil {
		fmt.Fprintln(os.Stderr, "usage: k8s kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|version [flags]")
		os.Exit(2)
	}
	// cobra reads os.Args[1:]: drop the component name when it came as the first argument.
	os.Args = args
	os.Exit(cli.Run(cmd))
}
