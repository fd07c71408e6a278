// Command gantry is the self-service provisioning portal for OpenTofu.
//
//	gantry serve     run the portal against a PostgreSQL URL and an OpenID Provider
//	gantry dev       run everything embedded: private PostgreSQL, dev OpenID Provider, demo data
//	gantry dev-oidc  run the development OpenID Provider on its own (for a portal in a cluster)
//	gantry migrate   apply the database migrations and exit
//	gantry org       invite people to organizations (bootstrap of a real deployment)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"gantry/telemetry"
)

const usage = `Gantry: self-service provisioning for OpenTofu, where the reviewed plan is the applied plan.

Usage:
  gantry <command> [flags]

Commands:
  serve     Run the portal against any PostgreSQL database and any OpenID Provider.
  dev       Run the portal with everything embedded: a private PostgreSQL cluster under
            .data/, a development OpenID Provider with demo users, and demo data.
  dev-oidc  Run gantry dev's development OpenID Provider on its own, for a gantry serve
            elsewhere (a Kubernetes cluster): flags set its address, issuer, client and users.
            (dev and dev-oidc are left out of a build with -tags nodev: the production image.)
  migrate   Apply pending database migrations and exit.
  org       "gantry org invite": create an organization and invite its first owner by e-mail.
  keys      "gantry keys rotate": re-wrap every data key under the first key of --keys;
            "gantry keys list": the organizations' audit signing keys (public halves).
  audit     "gantry audit verify FILE": check a signed audit export or attestation offline;
            "gantry audit export": save a signed export over the API.
  request   Request a run over the API and, with --wait, wait for its outcome (exit 0 applied,
            2 still waiting after --timeout, 1 rejected, blocked, failed, expired or stale).
  runs      List runs over the API.
  review    Show what deciding a run binds to; --json -o review.json saves the evidence you read.
  approve   Approve the plan you reviewed over the API: --evidence review.json, as gantry review
            saved it (risk 2 at most; without it, nothing is approved).
  reject    Reject the plan you reviewed over the API: --evidence review.json --reason TEXT.
  help      Show this help, or "gantry help <command>" for a command's flags.

The API commands read GANTRY_URL (the portal's address) and GANTRY_TOKEN (an API token).

Every flag can also be set by the environment variable shown in its help text.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is a subcommand's entry point.
type command func(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error

// commands maps each subcommand to its entry point. The development commands come from
// devcommands.go (the default build) or nodev.go (-tags nodev, the production image).
var commands = map[string]command{
	"serve":    runServe,
	"dev":      devCommands.dev,
	"dev-oidc": devCommands.oidc,
	"migrate":  runMigrate,
	"org":      runOrg,
	"keys":     runKeys,
	"audit":    runAudit,
	"request":  runRequest,
	"runs":     runRuns,
	"review":   runReview,
	"approve":  runApprove,
	"reject":   runReject,
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" && len(args) == 1 {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] == "help" {
		args = []string{args[1], "--help"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "gantry: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := newLogger(stderr, envOr("GANTRY_LOG_LEVEL", "info"))
	slog.SetDefault(logger)
	err := cmd(ctx, args[1:], stdout, logger)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		if err != errUsage {
			fmt.Fprintf(stderr, "gantry %s: %v\n", args[0], err)
		}
		return 2
	case errors.Is(err, errStillWaiting):
		return 2
	case errors.As(err, new(*apiProblem)):
		// The portal refused: its words are the message, not a failure to log.
		fmt.Fprintf(stderr, "gantry %s: refused: %v\n", args[0], err)
		return 1
	case errors.Is(err, errVerdict):
		return 1
	}
	logger.Error("gantry "+args[0]+" failed", "error", err.Error())
	fmt.Fprintf(stderr, "gantry %s: %v\n", args[0], err)
	return 1
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	// Lines logged with a request's or a job's context carry its ids (telemetry.WithLog).
	return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})))
}
