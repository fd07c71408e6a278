package web

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/models/ratelimit"
)

// Failure limits count what fails, per client address: a return from the provider that
// signs no one in, an API call with a wrong token. What succeeds counts nothing, so an
// office behind one NAT signs in and a pipeline calls the API at any pace. A failure is
// known only after the work it should spare (a code exchange, a token lookup), and the
// limiter is asked only by spending; so the failure that goes over a limit is remembered
// (refusals), and the address's next tries are refused before any work until the limit
// lets it again.

// The failure limits' names, in the bucket's key and the log.
const (
	limitFailedSignIn = "failed sign-ins"
	limitFailedToken  = "wrong API tokens"
)

// Why each failure limit refused, as the person or the caller reads it.
const (
	whyFailedSignIn = "Too many sign-ins failed from your network in a short time, so this one was refused."
	whyFailedToken  = "Too many calls with a wrong API token came from your network in a short time, so this one was refused before its token was checked."
)

// maxRefusals bounds the addresses refusals remembers (under 100 bytes each): far above
// the addresses over a failure limit at once on an honest day.
const maxRefusals = 50_000

// refusals remembers, per limit and client address, until when a failure limit refuses
// it. It is only a memory of the limiter's answer, in this process: a replica that has not
// seen it does the work once more, meets the limit and remembers it too. At most max
// entries (those past their time go first; when all are live a new one is not kept, and
// that address's next failure meets the limiter again).
type refusals struct {
	mu    sync.Mutex
	now   func() time.Time
	max   int
	until map[string]time.Time
}

func newRefusals(now func() time.Time, maxKeys int) *refusals {
	if now == nil {
		now = time.Now
	}
	return &refusals{now: now, max: max(maxKeys, 1), until: map[string]time.Time{}}
}

// wait is how long name is still refused (zero: it is not).
func (r *refusals) wait(name string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.until[name]
	if !ok {
		return 0
	}
	wait := until.Sub(r.now())
	if wait <= 0 {
		delete(r.until, name)
		return 0
	}
	return wait
}

// remember refuses name for d from now.
func (r *refusals) remember(name string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if _, ok := r.until[name]; !ok && len(r.until) >= r.max {
		for n, until := range r.until {
			if !until.After(now) {
				delete(r.until, n)
			}
		}
		if len(r.until) >= r.max {
			return
		}
	}
	r.until[name] = now.Add(d)
}

// stillRefused answers 429 when limit refuses ip still (it went over with an earlier
// failure), before the request does any work; nil when it does not.
func (s *Server) stillRefused(c echo.Context, limit, ip, why string) error {
	if wait := s.refusals.wait(limit + " " + ip); wait > 0 {
		return s.rateLimited(c, wait, limit, ip, why)
	}
	return nil
}

// failed counts one failure against limit (at rate) from ip. Within the limit it answers
// nil, and the request answers what failed; over it, 429, and the address is refused
// before any work until the limit lets it again.
func (s *Server) failed(c echo.Context, rate ratelimit.Rate, limit, ip, why string) error {
	name := limit + " " + ip
	wait, err := s.limiter.Allow(c.Request().Context(), ratelimit.Key{Rate: rate, Name: name})
	if err != nil {
		return err
	}
	if wait <= 0 {
		return nil
	}
	s.refusals.remember(name, wait)
	return s.rateLimited(c, wait, limit, ip, why)
}

// limitFailedSignIns guards the provider's return (the callback): an address over its
// failed sign-ins is refused before its sign-in cookie is opened or a code exchanged, and
// a return that signs no one in (the callback's 4xx answers: no sign-in in progress, an
// expired, replayed or forged one, a refused code, a bad ID token) counts one failure.
func (s *Server) limitFailedSignIns(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ip := clientAddress(c)
		if err := s.stillRefused(c, limitFailedSignIn, ip, whyFailedSignIn); err != nil {
			return err
		}
		err := next(c)
		var httpErr *echo.HTTPError
		if errors.As(err, &httpErr) && httpErr.Code >= http.StatusBadRequest && httpErr.Code < http.StatusInternalServerError {
			if over := s.failed(c, s.cfg.RateLimits.FailedSignIn, limitFailedSignIn, ip, whyFailedSignIn); over != nil {
				return over
			}
		}
		return err
	}
}
