//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"gantry/web/devidp"
)

// runDevOIDC serves the development OpenID Provider that `gantry dev` embeds, on its own:
// a `gantry serve` elsewhere (in a Kubernetes cluster, on another host) discovers it at
// start, so the provider must run apart from the portal and at an address both the
// portal and the browser reach under the same issuer URL.
func runDevOIDC(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	var addr, issuer, clientID, secret, redirects, usersFile string
	f := newFlags("dev-oidc", "Run the development OpenID Provider of gantry dev on its own, for a gantry serve that runs\nelsewhere (a Kubernetes cluster). Development only: its login page shows the demo users'\npasswords, and it keeps everything in memory (a restart ends every session).", stdout)
	f.str(&addr, "addr", "GANTRY_DEV_OIDC_ADDR", "127.0.0.1:5556", "address to listen on")
	f.str(&issuer, "issuer", "GANTRY_DEV_OIDC_ISSUER", "", "issuer URL as the portal and the browser reach it, without a trailing slash (default: http:// + the address listened on)")
	f.str(&clientID, "client-id", "GANTRY_DEV_OIDC_CLIENT_ID", devClientID, "the one client's id (the portal's --oidc-client-id)")
	f.str(&secret, "client-secret", "GANTRY_DEV_OIDC_CLIENT_SECRET", "", "the client's secret (the portal's GANTRY_OIDC_CLIENT_SECRET; prefer the environment variable; default: a random one, printed at start)")
	f.str(&redirects, "redirect-uris", "GANTRY_DEV_OIDC_REDIRECT_URIS", "http://127.0.0.1:8080/auth/callback", "comma-separated redirect URIs the client may use (the portal's base URL + /auth/callback)")
	f.str(&usersFile, "users", "GANTRY_DEV_OIDC_USERS", "", "JSON file with the users who may sign in: [{\"subject\", \"email\", \"name\", \"password\", \"note\", \"groups\"}] (default: gantry dev's demo users)")
	if err := f.parse(args); err != nil {
		return err
	}
	users := devUsers()
	if usersFile != "" {
		var err error
		if users, err = readDevOIDCUsers(usersFile); err != nil {
			return err
		}
	}
	var uris []string
	for _, u := range strings.Split(redirects, ",") {
		if u = strings.TrimSpace(u); u != "" {
			uris = append(uris, u)
		}
	}
	generated := secret == ""
	if generated {
		secret = randomHex(16)
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s for the development OpenID Provider: %w", addr, err)
	}
	defer ln.Close()
	if issuer == "" {
		issuer = "http://" + ln.Addr().String()
	}
	idp, err := devidp.New(devidp.Config{
		Issuer:  issuer,
		Clients: []devidp.Client{{ID: clientID, Secret: secret, RedirectURIs: uris}},
		Users:   users,
		Logger:  logger,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "development OpenID Provider: %s (listening on %s)\n  client: %s, redirect URIs: %s\n  users: %d (the login page lists them)\n",
		issuer, ln.Addr(), clientID, strings.Join(uris, " "), len(users))
	if generated {
		// Printed because nothing else knows it: the portal needs it as GANTRY_OIDC_CLIENT_SECRET.
		fmt.Fprintf(stdout, "  client secret (generated; give it to gantry serve as GANTRY_OIDC_CLIENT_SECRET): %s\n", secret)
	}
	fmt.Fprintln(stdout, "Press Ctrl-C to stop.")
	if err := serveUntilDone(ctx, ln, idp); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// devOIDCUser is one entry of the --users file.
type devOIDCUser struct {
	Subject  string   `json:"subject"`
	Email    string   `json:"email"`
	Name     string   `json:"name"`
	Password string   `json:"password"`
	Note     string   `json:"note"`
	Groups   []string `json:"groups"`
}

// readDevOIDCUsers reads the --users file; an unknown key is refused, so a misspelt one
// does not silently drop a user's groups or name.
func readDevOIDCUsers(path string) ([]devidp.User, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --users: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var in []devOIDCUser
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("parsing --users %s: %w", path, err)
	}
	out := make([]devidp.User, 0, len(in))
	for _, u := range in {
		out = append(out, devidp.User{Subject: u.Subject, Email: u.Email, Name: u.Name, Password: u.Password, Note: u.Note, Groups: u.Groups})
	}
	return out, nil
}
