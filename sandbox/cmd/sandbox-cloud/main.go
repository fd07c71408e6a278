// Command sandbox-cloud runs the sandbox cloud on its own (Gantry's dev mode can also embed
// gantry/sandbox/cloud directly). It listens on TCP and/or a unix socket:
//
//	SANDBOX_ADMIN_TOKEN=... sandbox-cloud -data ./sandbox-data -issuer http://127.0.0.1:8080 \
//	    -listen 127.0.0.1:8790 -socket /run/sandbox/cloud.sock
//
// The admin token (for the break-glass /admin/v1 API) comes from SANDBOX_ADMIN_TOKEN or the file
// named by -admin-token-file; without one the admin API is disabled.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gantry/sandbox/cloud"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-cloud:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:8790", "TCP address to listen on (empty: none)")
	socket := flag.String("socket", "", "unix socket to listen on as well (empty: none)")
	dataDir := flag.String("data", "", "data directory (required)")
	issuer := flag.String("issuer", "", "workload identity issuer URL (required)")
	audience := flag.String("audience", "sandbox", "audience the tokens must carry")
	adminFile := flag.String("admin-token-file", "", "file holding the admin token (default: $SANDBOX_ADMIN_TOKEN)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	admin := os.Getenv("SANDBOX_ADMIN_TOKEN")
	if *adminFile != "" {
		b, err := os.ReadFile(*adminFile)
		if err != nil {
			return err
		}
		admin = strings.TrimSpace(string(b))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := cloud.New(ctx, cloud.Config{DataDir: *dataDir, Issuer: *issuer, Audience: *audience, AdminToken: admin, Logger: log})
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	var listeners []net.Listener
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		listeners = append(listeners, ln)
	}
	if *socket != "" {
		_ = os.Remove(*socket)
		ln, err := net.Listen("unix", *socket)
		if err != nil {
			return err
		}
		listeners = append(listeners, ln)
	}
	if len(listeners) == 0 {
		return errors.New("nothing to listen on: set -listen or -socket")
	}
	errs := make(chan error, len(listeners))
	for _, ln := range listeners {
		log.Info("sandbox cloud listening", "address", ln.Addr().String(), "admin_api", admin != "")
		go func() { errs <- hs.Serve(ln) }()
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}
