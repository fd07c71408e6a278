package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"gantry/models/audit"
	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/models/org"
	runmodel "gantry/models/run"
	"gantry/models/state"
)

const keysUsage = `Usage:
  gantry keys rotate --database-url URL --keys new-id:KEY,old-id:KEY [--new-signing-keys]
  gantry keys list   --database-url URL [--org SLUG]`

// runKeys is "gantry keys rotate" and "gantry keys list".
func runKeys(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) > 0 {
		switch args[0] {
		case "rotate":
			return runKeysRotate(ctx, args[1:], stdout, logger)
		case "list":
			return runKeysList(ctx, args[1:], stdout)
		}
	}
	fmt.Fprintln(stdout, keysUsage)
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
		return nil
	}
	return errUsage
}

// runKeysRotate: after a new key-encryption key is put first in --keys, it re-wraps
// every artifact's data key (states, plans, bundles, logs), every live log chunk's,
// every workload signing key and every audit signing key under it, so the older keys
// can then be removed from the configuration. Ciphertexts are not rewritten. With --new-signing-keys it also gives
// every organization a new audit signing key; the old ones stay published, so what
// they signed still verifies.
func runKeysRotate(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	var dsn, spec string
	var newSigning bool
	f := newFlags("keys rotate", "Re-wrap every data key under the first key of --keys (ciphertexts are untouched); afterwards the older keys may be dropped.", stdout)
	f.str(&dsn, "database-url", "GANTRY_DATABASE_URL", "", "PostgreSQL URL")
	f.str(&spec, "keys", "GANTRY_KEYS", "", "key-encryption keys, the new one first: id:base64(32 bytes),old-id:...")
	f.BoolVar(&newSigning, "new-signing-keys", false, "also replace every organization's audit signing key (the old public keys stay published)")
	if err := f.parse(args); err != nil {
		return err
	}
	if dsn == "" || spec == "" {
		return errors.New("--database-url and --keys (or $GANTRY_DATABASE_URL and $GANTRY_KEYS) are required")
	}
	keys, err := keyring.Parse(spec)
	if err != nil {
		return fmt.Errorf("--keys: %w", err)
	}
	gdb, err := db.Open(ctx, dsn)
	if err != nil {
		return err
	}
	n, err := state.RotateKeys(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts, then: %w", n, err)
	}
	c, err := runmodel.RewrapLogChunks(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts and %d live log chunks, then: %w", n, c, err)
	}
	v, err := runmodel.RewrapRunVariables(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts, %d live log chunks and %d runs' sensitive inputs, then: %w", n, c, v, err)
	}
	w, err := identity.RewrapKeys(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts, then: %w", n, err)
	}
	e, err := environment.RewrapCredentials(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts and %d workload keys, then: %w", n, w, err)
	}
	s, err := audit.RewrapSigningKeys(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts, %d workload keys and %d environment credentials, then: %w", n, w, e, err)
	}
	logger.Info("keys rotated", "artifacts", n, "live_log_chunks", c, "run_variables", v, "workload_keys", w, "environment_credentials", e,
		"audit_signing_keys", s, "key_id", keys.CurrentKeyID())
	fmt.Fprintf(stdout, "re-wrapped %d artifacts, %d live log chunks, %d runs' sensitive inputs, %d workload keys, %d environment credentials and %d audit signing keys under key %s\n",
		n, c, v, w, e, s, keys.CurrentKeyID())
	if newSigning {
		replaced, err := audit.NewKeys(gdb, keys).RotateSigning(ctx)
		if err != nil {
			return fmt.Errorf("replacing audit signing keys: %w", err)
		}
		logger.Info("audit signing keys replaced", "organizations", replaced)
		fmt.Fprintf(stdout, "replaced the audit signing key of %d organizations; the old public keys stay published (gantry keys list)\n", replaced)
	}
	return nil
}

// runKeysList prints every organization's audit signing keys: what an auditor pins
// out of band to verify exports and attestations (gantry audit verify --key).
func runKeysList(ctx context.Context, args []string, stdout io.Writer) error {
	var dsn, slug string
	f := newFlags("keys list", "Print the organizations' audit signing keys (public halves): key id, fingerprint, created, retired.", stdout)
	f.str(&dsn, "database-url", "GANTRY_DATABASE_URL", "", "PostgreSQL URL")
	f.StringVar(&slug, "org", "", "only this organization (slug)")
	if err := f.parse(args); err != nil {
		return err
	}
	if dsn == "" {
		return errors.New("--database-url (or $GANTRY_DATABASE_URL) is required")
	}
	gdb, err := db.Open(ctx, dsn)
	if err != nil {
		return err
	}
	orgs, err := org.NewService(gdb, audit.New(gdb)).Organizations(ctx)
	if err != nil {
		return err
	}
	sets, err := audit.NewKeys(gdb, nil).OrganizationKeys(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORGANIZATION\tKEY ID\tFINGERPRINT\tCREATED\tSTATUS")
	found := false
	for _, o := range orgs {
		if slug != "" && o.Slug != slug {
			continue
		}
		found = true
		set := sets[o.ID]
		if len(set.Keys) == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\tno key yet (made at the first export)\n", o.Slug)
		}
		for _, k := range set.Keys {
			status := "current"
			if k.RetiredAt != nil {
				status = "retired " + k.RetiredAt.UTC().Format("2006-01-02 15:04Z")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.Slug, k.KeyID, k.Fingerprint, k.CreatedAt.UTC().Format("2006-01-02 15:04Z"), status)
		}
	}
	if slug != "" && !found {
		return fmt.Errorf("no organization %q", slug)
	}
	return tw.Flush()
}
