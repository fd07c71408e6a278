package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/org"
)

// runOrg handles `gantry org invite`: the bootstrap path for a real deployment, where
// nobody can sign in to grant the first owner a role.
func runOrg(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 || args[0] != "invite" {
		fmt.Fprintln(stdout, "Usage: gantry org invite --org SLUG [--name NAME] --email ADDRESS --role ROLE")
		if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
			return nil
		}
		return errUsage
	}
	var dsn, slug, name, email, role string
	f := newFlags("org invite", "Create the organization if needed and invite an e-mail address with a role. The first\nsign-in with that address, verified by the OpenID Provider, becomes the membership.", stdout)
	f.str(&dsn, "database-url", "GANTRY_DATABASE_URL", "", "PostgreSQL URL")
	f.StringVar(&slug, "org", "", "organization slug (lower-case letters, digits, hyphens)")
	f.StringVar(&name, "name", "", "organization display name when it is created (default: the slug)")
	f.StringVar(&email, "email", "", "e-mail address to invite")
	f.StringVar(&role, "role", "owner", "role: viewer, operator, admin, owner or auditor")
	if err := f.parse(args[1:]); err != nil {
		return err
	}
	if dsn == "" || slug == "" || email == "" {
		return errors.New("--database-url, --org and --email are required")
	}
	if name == "" {
		name = slug
	}
	email = strings.ToLower(strings.TrimSpace(email))
	if err := migrateDatabase(ctx, dsn); err != nil {
		return err
	}
	gdb, err := db.Open(ctx, dsn)
	if err != nil {
		return err
	}
	orgs := org.NewService(gdb, audit.New(gdb))
	o, err := orgs.EnsureOrganization(ctx, slug, name)
	if err != nil {
		return err
	}
	if err := orgs.Invite(ctx, o.ID, email, authz.Role(role)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Invited %s as %s of %s (%s).\n", email, role, o.Name, o.ID)
	return nil
}
