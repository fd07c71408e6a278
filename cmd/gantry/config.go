package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gantry/models/signin"
)

// errUsage marks a bad command line; the flag package has already said why.
var errUsage = errors.New("usage")

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// flags is a FlagSet whose defaults come from environment variables, named in the help.
type flags struct{ *flag.FlagSet }

func newFlags(name, summary string, out io.Writer) flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: gantry %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return flags{fs}
}

func (f flags) str(p *string, name, env, def, help string) {
	f.StringVar(p, name, envOr(env, def), help+" ($"+env+")")
}

func (f flags) dur(p *time.Duration, name, env string, def time.Duration, help string) {
	f.DurationVar(p, name, envDuration(env, def), help+" ($"+env+")")
}

func (f flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if f.NArg() > 0 {
		fmt.Fprintf(f.Output(), "gantry %s: unexpected argument %q\n", f.Name(), f.Arg(0))
		return errUsage
	}
	return nil
}

// parseOne parses flags given before or after exactly one positional argument and
// returns it; with none or several it says missing and is a usage error.
func (f flags) parseOne(args []string, missing string) (string, error) {
	var got []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", err
			}
			return "", errUsage
		}
		if f.NArg() == 0 {
			break
		}
		got, args = append(got, f.Arg(0)), f.Args()[1:]
	}
	if len(got) != 1 {
		fmt.Fprintf(f.Output(), "gantry %s: %s\n", f.Name(), missing)
		return "", errUsage
	}
	return got[0], nil
}

// webFlags are the settings serve and dev share.
type webFlags struct {
	addr            string
	metricsAddr     string
	baseURL         string
	sessionIdle     time.Duration
	sessionLifetime time.Duration
	trustedProxies  string
	groupsClaim     string
	verifiedDomains string
}

// oidcDomains is --oidc-verified-domains, checked.
func (w webFlags) oidcDomains() ([]string, error) {
	d, err := signin.ParseDomains(w.verifiedDomains)
	if err != nil {
		return nil, fmt.Errorf("--oidc-verified-domains: %w", err)
	}
	return d, nil
}

// printClaims says at start how sign-ins are read: the groups claim, and which domains
// verify an address for the issuer (a setting that admits people is never silent).
func (w webFlags) printClaims(out io.Writer, issuer string, domains []string) {
	claim := w.groupsClaim
	if claim == "" {
		claim = signin.DefaultGroupsClaim
	}
	trusted := "none (only email_verified or Entra's xms_edov verify an address)"
	if len(domains) > 0 {
		trusted = strings.Join(domains, ", ") + " (when the provider sends no email_verified)"
	}
	fmt.Fprintf(out, "Sign-ins from %s: groups claim %q; trusted e-mail domains: %s\n", issuer, claim, trusted)
}

// proxies is --trusted-proxies as the web layer takes it (nil: none).
func (w webFlags) proxies() []string {
	var out []string
	for _, p := range strings.Split(w.trustedProxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (w *webFlags) register(f flags, defAddr, defMetricsAddr, defBaseURL string) {
	f.str(&w.addr, "addr", "GANTRY_ADDR", defAddr, "address to listen on")
	f.str(&w.metricsAddr, "metrics-addr", "GANTRY_METRICS_ADDR", defMetricsAddr, "address serving Prometheus /metrics, apart from the portal (\"\": none)")
	f.str(&w.baseURL, "base-url", "GANTRY_BASE_URL", defBaseURL, "public URL of Gantry; https makes cookies Secure")
	f.dur(&w.sessionIdle, "session-idle", "GANTRY_SESSION_IDLE", 30*time.Minute, "a session unused this long ends")
	f.dur(&w.sessionLifetime, "session-lifetime", "GANTRY_SESSION_LIFETIME", 12*time.Hour, "a session ends this long after sign-in")
	f.str(&w.groupsClaim, "oidc-groups-claim", "GANTRY_OIDC_GROUPS_CLAIM", signin.DefaultGroupsClaim, "name of the claim holding a person's groups, a list or one string, e.g. cognito:groups or roles (docs/identity.md)")
	f.str(&w.verifiedDomains, "oidc-verified-domains", "GANTRY_OIDC_VERIFIED_DOMAINS", "", "comma-separated e-mail domains of the OpenID Provider's organisation, e.g. acme.example: an address there counts as verified when the provider sends no email_verified at all, as Microsoft Entra ID (never when it says false; docs/identity.md)")
	f.str(&w.trustedProxies, "trusted-proxies", "GANTRY_TRUSTED_PROXIES", "", "comma-separated networks (CIDR) of the reverse proxies whose X-Forwarded-For names the client, for the per-IP rate limits and the access log, e.g. your ingress controller's pod network (default: none, the client is the connection's peer: set it behind a proxy, or every client counts as the proxy)")
}
