package main

import (
	"context"
	"fmt"
	"log/slog"

	"gantry/runner/tofu"
)

// providerMirrorHelp is --provider-mirror's help: docs/configuration.md and `gantry serve
// --help` show it.
const providerMirrorHelp = "where jobs install providers other than the sandbox provider from, checked at start: a `directory|URL` (a filesystem mirror, as \"tofu providers mirror DIR\" fills one, or an https:// network mirror), or \"registry\" (the providers' registries). Default: only the built-in offline mirror (the sandbox provider; in dev also the third-party providers already built from the source tree). Whatever the source, tofu installs only what a template's .terraform.lock.hcl pins, with its hashes (docs/provider-mirror.md)"

// operatorMirror is the --provider-mirror setting, checked: a directory that exists and
// can be read, or an https URL.
func (s systemFlags) operatorMirror() (tofu.ProviderMirror, error) {
	m, err := tofu.ParseProviderMirror(s.providerMirror)
	if err != nil {
		return tofu.ProviderMirror{}, fmt.Errorf("--provider-mirror: %w", err)
	}
	return m, nil
}

// builtThirdParties are the third-party providers gantry dev publishes into the built-in
// mirror: those already built from the source tree (`go tool task provider:kubernetes`).
// None is built here: a first start would otherwise spend minutes on a provider no template
// of the developer's may use.
func builtThirdParties(ctx context.Context, root string, logger *slog.Logger) []tofu.ThirdParty {
	var out []tofu.ThirdParty
	for _, p := range tofu.ThirdParties {
		if p.Built(ctx, root) != "" {
			out = append(out, p)
			continue
		}
		logger.Info("a third-party provider is not built, so the built-in mirror does not hold it; `go tool task provider:kubernetes` builds it", "provider", p.Source, "version", p.Version)
	}
	return out
}
