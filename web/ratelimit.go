package web

// Rate limits on what is worth flooding: failing to sign in (each return from the provider
// exchanges a code with it and checks a signed token), failing to authenticate an API call
// (each wrong token costs a hash and a database read) and deciding (approve, reject,
// override: a script gone wrong, or a stolen session, rubber-stamping runs). Honest work
// is not counted where abuse is the failure: a sign-in that succeeds, a right token. Over a
// limit the request is refused before any of its work, with 429 RATE_LIMITED and
// Retry-After: a page saying when to try again, or a problem document on the API. The
// buckets are in the database (models/ratelimit), shared by every replica.
//
// When the buckets cannot be read (the database does not answer) the request is refused
// as a server error: every limit fails closed. Each limited route's own work needs the
// same database (a sign-in's return writes a session, a token is looked up in it, a
// decision is its transaction), so a check that cannot reach it stands for a request that could not
// be served anyway; failing open would only let a flood past the limit at the moment the
// database struggles under it.

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/models/authz"
	"gantry/models/errs"
	"gantry/models/ratelimit"
	"gantry/models/run"
	"gantry/views/paths"
)

// The default limits (docs/api.md says them, with these reasons).
var (
	// A person's sign-in fails rarely (a sign-in left open too long, a back button, a
	// provider's error page), and a whole office behind one NAT fails a few times a morning;
	// 10 at once and 10 a minute from one address is far beyond that, while replayed or
	// forged callbacks, each an exchange with the provider, stall. A sign-in that succeeds
	// counts nothing, and starting one writes nothing (loginflow.go), so neither is limited.
	defaultFailedSignInLimit = ratelimit.Rate{PerMinute: 10, Burst: 10}
	// A right API token counts nothing. A pipeline whose token was revoked or expired fails
	// each call until someone replaces it: 20 at once (a fan-out of jobs) and then one every
	// 6 s still shows each its 401, while guessing tokens from one address, each guess a
	// hash and a database read, stalls.
	defaultFailedTokenLimit = ratelimit.Rate{PerMinute: 10, Burst: 20}
	// A person reads a review before deciding: 10 decisions at once (an inbox cleared in
	// a row) and then one every 2 s is beyond any reviewer, and slows a script or a stolen
	// session approving everything in sight to a pace someone can notice.
	defaultDecisionLimit = ratelimit.Rate{PerMinute: 30, Burst: 10}
	// Per address, twice one session's: two busy people behind one NAT, or a pipeline with
	// a few tokens, still decide at full speed; many sessions from one host do not.
	defaultDecisionLimitPerIP = ratelimit.Rate{PerMinute: 60, Burst: 20}
)

// RateLimiter holds the buckets (models/ratelimit.Store, built by the composition root):
// Allow takes one request from every key's bucket, or from none when any is empty, and
// answers 0 or how long until all of them hold a request again.
type RateLimiter interface {
	Allow(ctx context.Context, keys ...ratelimit.Key) (time.Duration, error)
}

// RateLimits are the limits a Server applies. A zero field of a Rate takes its default
// (above), a negative PerMinute is no limit.
type RateLimits struct {
	// FailedSignIn counts, per client address, the returns from the provider that sign
	// no one in (an unknown, expired or replayed sign-in, a code the provider refuses, an
	// ID token that does not verify); FailedToken the API calls whose bearer token is
	// wrong. Over either, the address's next tries are refused before any work.
	FailedSignIn, FailedToken ratelimit.Rate
	// Decision counts the decisions (approve, reject, override; pages and API alike) of
	// one session or API token; DecisionPerIP those from one client address, over every
	// session and token behind it.
	Decision, DecisionPerIP ratelimit.Rate
	// Now is the limits' clock for tests, which move it by hand (the composition root
	// hands it to the buckets); nil, as in production, is the database's clock, the one
	// every replica shares.
	Now func() time.Time
}

func (l RateLimits) withDefaults() RateLimits {
	l.FailedSignIn = orDefault(l.FailedSignIn, defaultFailedSignInLimit)
	l.FailedToken = orDefault(l.FailedToken, defaultFailedTokenLimit)
	l.Decision = orDefault(l.Decision, defaultDecisionLimit)
	l.DecisionPerIP = orDefault(l.DecisionPerIP, defaultDecisionLimitPerIP)
	return l
}

// orDefault fills r's zero fields from def.
func orDefault(r, def ratelimit.Rate) ratelimit.Rate {
	if r.PerMinute == 0 {
		r.PerMinute = def.PerMinute
	}
	if r.Burst == 0 {
		r.Burst = def.Burst
	}
	return r
}

// rateLimitedRoutes are the API operations registered as rate limited (openapi.Op), by
// method and route: the decisions' calls, which limitDecisions counts.
func rateLimitedRoutes(ops []openapi.Op) map[string]bool {
	routes := map[string]bool{}
	for _, op := range ops {
		if op.RateLimited {
			routes[op.Method+" "+op.Path] = true
		}
	}
	return routes
}

// ipExtractor reads the client's address believing X-Forwarded-For only from the proxies
// it is given (Config.TrustedProxies), never from anyone else: echo's fallback without an
// extractor believes any X-Forwarded-For, and its own default believes any loopback,
// link-local or private peer, so a client on a private network could name a new address
// with each request and never meet a per-IP limit (or write any address into the access
// log). No proxies (or the one word none): the connection's peer.
func ipExtractor(trusted []string) (echo.IPExtractor, error) {
	if len(trusted) == 0 || len(trusted) == 1 && trusted[0] == "none" {
		return echo.ExtractIPDirect(), nil
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, cidr := range trusted {
		_, network, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("trusted proxies: %q is not a network in CIDR notation (or the one word none)", cidr)
		}
		opts = append(opts, echo.TrustIPRange(network))
	}
	return echo.ExtractIPFromXFFHeader(opts...), nil
}

// clientAddress is whom a per-IP limit counts: the client's address, an IPv6 one by its
// /64 (a host is usually given the whole /64, and counting single addresses would let it
// step around the limit).
func clientAddress(c echo.Context) string {
	addr, err := netip.ParseAddr(c.RealIP())
	if err != nil {
		return c.RealIP()
	}
	if addr = addr.Unmap(); addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// limitDecisions limits the decisions on runs, per session or API token and per client
// address, both at once (a request refused by one spends nothing of the other). It runs
// after requireMember, so only members' decisions are counted, and before idempotent,
// so a refused decision opens no transaction and keeps no key.
func (s *Server) limitDecisions(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !s.isDecision(c) {
			return next(c)
		}
		ip := clientAddress(c)
		wait, err := s.limiter.Allow(c.Request().Context(), ratelimit.Key{Rate: s.cfg.RateLimits.Decision, Name: "decide " + caller(c)},
			ratelimit.Key{Rate: s.cfg.RateLimits.DecisionPerIP, Name: "decide-ip " + ip})
		if err != nil {
			return err
		}
		if wait > 0 {
			return s.rateLimited(c, wait, "decisions", ip,
				"Too many decisions came from this session or your network in a short time, so this one was not recorded.")
		}
		return next(c)
	}
}

// isDecision reports whether c approves, rejects or overrides: a review page's form
// (one route for every action on a run) or an API operation registered as rate limited.
func (s *Server) isDecision(c echo.Context) bool {
	if c.Request().Method != http.MethodPost {
		return false
	}
	if c.Path() == paths.RouteRunAction {
		switch run.Action(c.Param("action")) {
		case run.ActionApprove, run.ActionReject, run.ActionOverride:
			return true
		}
		return false
	}
	return s.limitedOps[c.Request().Method+" "+c.Path()]
}

// caller names who makes a request for per-session limits: the API token, else the
// session (by the hash of its cookie, which is what the store keeps).
func caller(c echo.Context) string {
	if viaToken(c) {
		subject, _ := authz.SubjectFrom(c.Request().Context())
		return "token " + subject.TokenID
	}
	return "session " + hex.EncodeToString(sessionOf(c).sess.IDHash)
}

// rateLimited refuses the request: Retry-After in whole seconds, a log line (its request
// id from the context; the address, never a cookie or token) and the 429 the central
// error handler draws with why and when to try again.
func (s *Server) rateLimited(c echo.Context, wait time.Duration, limit, ip, why string) error {
	secs := int(math.Ceil(wait.Seconds()))
	c.Response().Header().Set("Retry-After", fmt.Sprint(secs))
	s.cfg.Logger.WarnContext(c.Request().Context(), "rate limited", slog.String("limit", limit), slog.String("route", c.Path()),
		slog.String("remote_ip", ip), slog.Int("retry_after_seconds", secs))
	when := "1 second"
	if secs != 1 {
		when = fmt.Sprintf("%d seconds", secs)
	}
	return errs.Explain(errs.ErrRateLimited, why+" Try again in "+when+".")
}
