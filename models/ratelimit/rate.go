// Package ratelimit is the token buckets behind Gantry's rate limits (web/ratelimit.go
// says what is limited and why): one bucket per key, kept in PostgreSQL so that every
// portal replica counts against the same buckets. It knows nothing of HTTP.
//
// A bucket is kept as the one instant it is full again (GCRA, the generic cell rate
// algorithm): a request is let through while that instant is at most a burst's worth of
// intervals ahead, and moves it one interval on. One statement per check decides and
// moves every bucket it names (store.go); a bucket full again is a missing row, so the
// rows of idle clients are swept (sweep.go).
package ratelimit

import "time"

// Rate is one limit: Burst requests at once, then PerMinute a minute. A PerMinute of zero
// or less is no limit at all.
type Rate struct {
	PerMinute int
	Burst     int
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.PerMinute <= 0 }

// interval is the time one request takes to come back, to the microsecond (the
// database's resolution): a rate that does not divide a minute comes back a few
// microseconds early, never late.
func (r Rate) interval() time.Duration {
	return (time.Minute / time.Duration(r.PerMinute)).Truncate(time.Microsecond)
}

// slack is how far ahead of now a bucket's full instant may be and still let a request
// through: the burst less the request itself.
func (r Rate) slack() time.Duration { return r.interval() * time.Duration(max(r.Burst, 1)-1) }

// Key names one bucket: whose requests it counts (the caller puts the limit's name in it,
// "decide-ip 203.0.113.7") and at what rate.
type Key struct {
	Rate Rate
	Name string
}

// MaxKeyLength bounds a key's name (the table's check says the same): names are made by
// Gantry from a limit's name and an address, a route or a hash, far shorter than this.
const MaxKeyLength = 512
