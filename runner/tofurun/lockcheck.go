package tofurun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gantry/runner/tofu"
)

// ErrProviderRefused is an init that refused a provider the lock file does not pin, or
// whose package does not match the lock file's hashes: nothing was planned or applied.
var ErrProviderRefused = errors.New("provider refused")

// explainInit follows an init that failed (initErr), whose output was initLog: it says in
// the phase log, and in the error, which provider was refused and why (tofu.Refusals), so
// the run's failure names it: a refused package from init's output, else a provider the lock
// file does not pin from `tofu providers`, which reads the configuration init loaded and
// installs nothing.
func (j *job) explainInit(ctx context.Context, initLog []byte, initErr error) error {
	if !errors.Is(initErr, ErrTofu) {
		return initErr // tofu did not run or was stopped: nothing of its to explain
	}
	var locks []tofu.Lock
	if data, err := readRegular(filepath.Join(j.dir, ".terraform.lock.hcl")); err == nil {
		if locks, err = tofu.ParseLockFile(data); err != nil {
			fmt.Fprintf(j.out, "# the lock file cannot be read: %v\n", err)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(j.out, "# the configuration has no lock file (.terraform.lock.hcl): it pins no provider")
	}
	refusals := tofu.Refusals(locks, nil, string(initLog))
	if len(refusals) == 0 {
		// No package refused: ask which providers the configuration requires (tofu
		// installs a package before it checks the lock file for changes, so after a
		// refused package `tofu providers` would only complain that it is missing).
		if out, err := j.capture(ctx, "providers", "-no-color"); err == nil {
			refusals = tofu.Refusals(locks, tofu.RequiredProviders(string(out)), string(initLog))
		}
	}
	if len(refusals) == 0 {
		return initErr
	}
	why := make([]string, len(refusals))
	for i, r := range refusals {
		why[i] = r.String()
		fmt.Fprintf(j.out, "# %s: nothing is planned or applied\n", why[i])
	}
	return fmt.Errorf("%s: %w (%w)", strings.Join(why, "; "), ErrProviderRefused, initErr)
}
