package runner

import (
	"context"
	"fmt"
	"io"
	"time"

	"gantry/models/identity"
)

// A phase longer than its workload token's life (15 minutes at most) would fail half-way
// when the cloud starts refusing the token. So while a phase runs, its runner keeps the
// token fresh: the job reads the token from a file (SANDBOX_TOKEN_FILE, which the
// sandbox provider reads again whenever it changes), and the refresher replaces the
// file's token with a newly minted one before the current one expires.
const (
	// refreshAt is the part of a token's remaining life after which the next one is
	// minted: the token a job reads always has a third of its life left.
	refreshAt = 2.0 / 3
	// refreshFloor is the least wait between two mints (a token that is already expired,
	// or an issuer that answers with one, must not make the refresher spin).
	refreshFloor = time.Second
	// retryEvery bounds the wait after a failed mint or write.
	retryEvery = 5 * time.Second
)

// Masker is a phase log that masks secrets learnt while the phase runs (the worker's
// LiveLog): every token the refresher mints is added before the job gets it.
type Masker interface{ AddSecret(secret string) }

// KeepFresh keeps a phase's workload token fresh until ctx ends (see Refresher). It
// returns at once when c's token is not refreshed (a static credential).
func KeepFresh(ctx context.Context, c Credentials, log io.Writer, write func(token string) error) {
	Refresher{Credentials: c, Log: log, Write: write}.Run(ctx)
}

// Refresher mints the next workload token of a phase through Credentials.Refresh once
// two thirds of the current one's remaining life have passed, adds it to Mask's masks,
// hands it to Write (which replaces the token the job reads,
// atomically) and says so in Log. A failed mint or write is said in Log and tried again
// (every few seconds, sooner as the expiry nears); once the token has expired the cloud
// refuses it and the phase fails in its own words.
type Refresher struct {
	Credentials Credentials
	Log         io.Writer // where refreshes and failures are said; nil: nowhere
	Mask        Masker    // nil: Log, when it is a Masker (the worker's LiveLog)
	Write       func(token string) error
	// Now and After are the clock (nil: time.Now and time.After); tests move it.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
}

// Run refreshes until ctx ends; it returns at once when the credentials have no Refresh
// or no expiry (a static credential is not refreshed).
func (r Refresher) Run(ctx context.Context) {
	c := r.Credentials
	if c.Refresh == nil || c.CloudExpires.IsZero() || r.Write == nil {
		return
	}
	now, after := r.Now, r.After
	if now == nil {
		now = time.Now
	}
	if after == nil {
		after = time.After
	}
	log := LogTo(r.Log)
	masker := r.Mask
	if masker == nil {
		masker, _ = r.Log.(Masker)
	}
	expires, failed := c.CloudExpires, false
	for {
		wait := max(time.Duration(float64(expires.Sub(now()))*refreshAt), refreshFloor)
		if failed {
			wait = min(wait, retryEvery)
		}
		select {
		case <-ctx.Done():
			return
		case <-after(wait):
		}
		token, next, err := c.Refresh(ctx)
		if err == nil {
			if masker != nil {
				masker.AddSecret(token)
			}
			err = r.Write(token)
		}
		if ctx.Err() != nil {
			return // the phase is over: whatever happened to this token no longer matters
		}
		if failed = err != nil; failed {
			fmt.Fprintf(log, "# refreshing the workload token failed (the current one expires at %s); trying again: %v\n",
				expires.UTC().Format(time.RFC3339), err)
			continue
		}
		expires = next
		fmt.Fprintf(log, "# the workload token was refreshed; the new one expires at %s\n", expires.UTC().Format(time.RFC3339))
	}
}

// refreshable lets a phase outlive its workload token: a token this issuer minted (not
// an environment's static credential, whatever cloudToken chose) gets its expiry and a
// Refresh that mints the next one for the same run and phase, with the same claims.
func (j jobCredentials) refreshable(c Credentials, claims identity.Claims) Credentials {
	expires, ok := j.identity.MintedExpiry(c.CloudToken)
	if !ok {
		return c
	}
	c.CloudExpires = expires
	c.Refresh = func(ctx context.Context) (string, time.Time, error) { return j.identity.Mint(ctx, claims) }
	return c
}
