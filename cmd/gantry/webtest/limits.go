package webtest

import (
	"gantry/models/ratelimit"
	"gantry/web"
)

// rateLimits puts Options.RateLimits into cfg. Without them a test's portal has no rate
// limits: every test client comes from 127.0.0.1 and signs in and decides faster than
// any person, so the defaults would refuse tests that are about something else.
func rateLimits(opts Options, cfg web.Config) web.Config {
	if opts.RateLimits == nil {
		off := ratelimit.Rate{PerMinute: -1}
		cfg.RateLimits = web.RateLimits{SignIn: off, Decision: off, DecisionPerIP: off}
		return cfg
	}
	cfg.RateLimits = *opts.RateLimits
	return cfg
}
