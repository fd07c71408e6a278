package webtest

import (
	"gantry/models/ratelimit"
	"gantry/web"
)

// rateLimits puts Options.RateLimits and Options.TrustedProxies into cfg. Without limits
// a test's portal has none: every test client comes from 127.0.0.1 and fails to sign in
// and decides faster than any person, so the defaults would refuse tests that are about
// something else.
func rateLimits(opts Options, cfg web.Config) web.Config {
	cfg.TrustedProxies = opts.TrustedProxies
	if opts.RateLimits == nil {
		off := ratelimit.Rate{PerMinute: -1}
		cfg.RateLimits = web.RateLimits{FailedSignIn: off, FailedToken: off, Decision: off, DecisionPerIP: off}
		return cfg
	}
	cfg.RateLimits = *opts.RateLimits
	return cfg
}
