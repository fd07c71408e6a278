package tofu

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// A configuration's .terraform.lock.hcl pins its providers: their versions and the hashes of
// their packages. Jobs run `tofu init -lockfile=readonly`, so tofu installs nothing the lock
// file does not pin and no package whose hash it does not list, and stops before any plan.
// Its own words for the first case do not name the provider ("Provider dependency changes
// detected ... the lock file is read-only"), so Refusals says, for the phase log, which
// provider was refused and why.

// Refusal is a provider `tofu init -lockfile=readonly` refused, and why.
type Refusal struct {
	Provider string // its full address: "registry.opentofu.org/hashicorp/kubernetes"
	Version  string // the version concerned ("" when the lock file pins none)
	Why      string
}

func (r Refusal) String() string {
	if r.Version == "" {
		return fmt.Sprintf("provider %s refused: %s", r.Provider, r.Why)
	}
	return fmt.Sprintf("provider %s %s refused: %s", r.Provider, r.Version, r.Why)
}

// Why a provider is refused.
const (
	WhyNotPinned    = "the configuration requires it but the lock file (.terraform.lock.hcl) does not pin it; only providers the lock file pins, with their hashes, are installed"
	WhyHashMismatch = "its package in the provider mirror does not match any hash the lock file (.terraform.lock.hcl) pins for it"
)

var (
	// providerRe finds the providers in `tofu providers`' tree: "provider[ADDRESS] CONSTRAINTS".
	providerRe = regexp.MustCompile(`provider\[([^\]\s]+)\]`)
	// installRe finds a package tofu refused for its checksum, in init's output with its line
	// breaks undone: "Error while installing hashicorp/kubernetes v1.13.4: the current
	// package for ... doesn't match any of the checksums ..." (the local, network, OCI and
	// registry sources word the reason differently; each mentions a checksum).
	installRe = regexp.MustCompile(`Error while installing (\S+) v(\S+): ([^│]*?)(?:Error:|$)`)
)

// RequiredProviders reads the provider addresses in the output of `tofu providers` (those the
// configuration and the state require), each once, in order.
func RequiredProviders(out string) []string {
	var addrs []string
	for _, m := range providerRe.FindAllStringSubmatch(out, -1) {
		if !slices.Contains(addrs, m[1]) {
			addrs = append(addrs, m[1])
		}
	}
	return addrs
}

// Refusals explains a failed `tofu init -lockfile=readonly`: each provider required (the
// addresses from RequiredProviders) that locks does not pin, then each whose package tofu
// refused for its checksum (from initOut, init's output). Empty when neither explains it.
func Refusals(locks []Lock, required []string, initOut string) []Refusal {
	var out []Refusal
	for _, addr := range required {
		if !slices.ContainsFunc(locks, func(l Lock) bool { return l.Source == addr }) {
			out = append(out, Refusal{Provider: addr, Why: WhyNotPinned})
		}
	}
	text := strings.Join(strings.Fields(initOut), " ")
	for _, m := range installRe.FindAllStringSubmatch(text, -1) {
		if !strings.Contains(m[3], "checksum") {
			continue
		}
		r := Refusal{Provider: fullAddress(m[1]), Version: m[2], Why: WhyHashMismatch}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// fullAddress is a provider address as tofu shows it ("hashicorp/kubernetes": the default
// registry's host left out) with its host.
func fullAddress(addr string) string {
	if strings.Count(addr, "/") == 1 {
		return "registry.opentofu.org/" + addr
	}
	return addr
}
