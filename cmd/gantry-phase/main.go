// Command gantry-phase is the entrypoint of the tofu/kubernetes executor's pods: it runs
// one phase of a run (plan, apply or verify) as runner/kube.RunPhase describes, and is
// built static into the runner image as /bin/gantry-phase.
//
//	gantry-phase [-secrets /run/gantry] [-work /work] [-tofu /bin/tofu] ...
//
// The phase's URL comes from $GANTRY_PHASE_URL and the cloud's from $SANDBOX_ENDPOINT;
// its credentials are the files of the Job's Secret. It exits 0 once the phase's outcome
// (success or failure) is uploaded; 1 with the reason in the termination log when the
// protocol failed; 143 when it was terminated (the pod deleted or evicted): then it
// uploads nothing, so the portal treats the phase as interrupted. At SIGTERM an apply's
// tofu is interrupted as a terminal's Ctrl-C would (SIGINT to its process group): it
// stops gracefully, storing the state it wrote, within tofurun.StopGrace, well inside
// the pod's termination grace period, or is killed; a plan's or a verification's tofu
// is killed at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"gantry/runner/kube"
	"gantry/runner/tofu"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("gantry-phase", flag.ContinueOnError)
	fl.SetOutput(stderr)
	cfg := kube.PodConfig{Endpoint: os.Getenv(kube.EnvPhaseURL), CloudEndpoint: os.Getenv(kube.EnvCloudEndpoint), Log: stdout}
	var plugins, mirror, termLog string
	fl.StringVar(&cfg.Secrets, "secrets", kube.SecretMount, "directory of the Job's Secret")
	fl.StringVar(&cfg.WorkRoot, "work", kube.WorkMount, "writable work directory")
	fl.StringVar(&cfg.Tofu, "tofu", kube.ImageTofu, "the pinned tofu binary")
	fl.StringVar(&cfg.CLIConfig, "cli-config", kube.ImageCLIConfig, "tofu's CLI configuration (the mirror only)")
	fl.StringVar(&mirror, "mirror", kube.ImageMirror, "the packed provider mirror")
	fl.StringVar(&plugins, "plugin-cache", kube.ImagePlugins, "the prepared plugin cache (\"\": none)")
	fl.StringVar(&termLog, "termination-log", "/dev/termination-log", "where a protocol failure is written for the portal (\"\": nowhere)")
	doProbe := fl.Bool("probe", false, "print what the pod sees (ids, capabilities, writable places, secrets' names, answers from the endpoint and the URLs given as arguments) as JSON instead of running a phase")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *doProbe {
		if err := probe(ctx, cfg, fl.Args(), stdout); err != nil {
			fmt.Fprintln(stderr, "gantry-phase:", err)
			return 1
		}
		return 0
	}
	if cfg.Endpoint == "" {
		fmt.Fprintf(stderr, "gantry-phase: $%s is not set\n", kube.EnvPhaseURL)
		return 2
	}
	if plugins != "" {
		cfg.Plugins = &tofu.PluginCache{Mirror: mirror, Root: plugins}
	}
	err := kube.RunPhase(ctx, cfg)
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil && !errors.Is(err, kube.ErrPortalGone):
		fmt.Fprintln(stderr, "gantry-phase: terminated; no result uploaded")
		return 128 + int(syscall.SIGTERM)
	}
	fmt.Fprintln(stderr, "gantry-phase:", err)
	if termLog != "" {
		_ = os.WriteFile(termLog, []byte(err.Error()), 0o644)
	}
	return 1
}
