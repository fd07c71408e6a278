package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"gantry/models/db"
	"gantry/models/environment"
	"gantry/models/identity"
	"gantry/models/keyring"
	"gantry/models/state"
)

// runKeys is "gantry keys rotate": after a new key-encryption key is put first in
// --keys, it re-wraps every artifact's data key (states, plans, bundles, logs) and every
// workload signing key under it, so the older keys can then be removed from the
// configuration. Ciphertexts are not rewritten.
func runKeys(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 || args[0] != "rotate" {
		fmt.Fprintln(stdout, "Usage: gantry keys rotate --database-url URL --keys new-id:KEY,old-id:KEY")
		if len(args) == 0 || args[0] == "--help" || args[0] == "-h" {
			return nil
		}
		return errUsage
	}
	var dsn, spec string
	f := newFlags("keys rotate", "Re-wrap every data key under the first key of --keys (ciphertexts are untouched); afterwards the older keys may be dropped.", stdout)
	f.str(&dsn, "database-url", "GANTRY_DATABASE_URL", "", "PostgreSQL URL")
	f.str(&spec, "keys", "GANTRY_KEYS", "", "key-encryption keys, the new one first: id:base64(32 bytes),old-id:...")
	if err := f.parse(args[1:]); err != nil {
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
	w, err := identity.RewrapKeys(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts, then: %w", n, err)
	}
	e, err := environment.RewrapCredentials(ctx, gdb, keys)
	if err != nil {
		return fmt.Errorf("re-wrapped %d artifacts and %d workload keys, then: %w", n, w, err)
	}
	logger.Info("keys rotated", "artifacts", n, "workload_keys", w, "environment_credentials", e, "key_id", keys.CurrentKeyID())
	fmt.Fprintf(stdout, "re-wrapped %d artifacts, %d workload keys and %d environment credentials under key %s\n", n, w, e, keys.CurrentKeyID())
	return nil
}
