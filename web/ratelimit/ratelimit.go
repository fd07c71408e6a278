// Package ratelimit is the token buckets behind Gantry's rate limits (web/ratelimit.go
// says what is limited and why): one bucket per key, kept in memory with a bounded number
// of keys. It knows nothing of HTTP; its clock is given, so tests move time instead of
// waiting for it.
//
// A bucket is kept as the one instant it is full again (GCRA, the generic cell rate
// algorithm): a request is let through while that instant is at most a burst's worth of
// intervals ahead, and moves it one interval on. Integer durations only, so waits are
// exact, and a bucket full again is recognisable at a glance (evicted as idle).
//
// The buckets are per process: with several portal replicas each counts on its own, so
// a client spread over n replicas gets up to n times a limit. The limits guard against
// floods, not single requests, and that margin is accepted rather than a shared store.
package ratelimit

import (
	"container/list"
	"sync"
	"time"
)

// Rate is one limit: Burst requests at once, then PerMinute a minute. A PerMinute of zero
// or less is no limit at all.
type Rate struct {
	PerMinute int
	Burst     int
}

// Off reports whether r limits nothing.
func (r Rate) Off() bool { return r.PerMinute <= 0 }

// interval is the time one request takes to come back.
func (r Rate) interval() time.Duration { return time.Minute / time.Duration(r.PerMinute) }

// slack is how far ahead of now a bucket's full instant may be and still let a request
// through: the burst less the request itself.
func (r Rate) slack() time.Duration { return r.interval() * time.Duration(max(r.Burst, 1)-1) }

// Key names one bucket: whose requests it counts (the caller puts the limit's name in it,
// "decide-ip 203.0.113.7") and at what rate.
type Key struct {
	Rate Rate
	Name string
}

// Limiter holds the buckets. The zero value is not usable: call New.
type Limiter struct {
	mu  sync.Mutex
	now func() time.Time
	max int
	// lru orders the buckets by last use, most recent first: the oldest are the first to
	// be full again (evicted as idle) and the first to go when max is reached.
	lru     *list.List // of *bucket
	buckets map[string]*list.Element
}

type bucket struct {
	name string
	full time.Time // the instant the bucket holds its whole burst again
}

// New returns a limiter reading time from now (nil: time.Now, whose monotonic reading
// never goes back) and keeping at most maxKeys buckets.
func New(now func() time.Time, maxKeys int) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, max: max(maxKeys, 1), lru: list.New(), buckets: map[string]*list.Element{}}
}

// Allow takes one request from the bucket of every key, or from none when any of them is
// empty: a request refused by one limit does not use up another. It answers 0 when the
// request may go ahead, else how long until every bucket holds a request again.
func (l *Limiter) Allow(keys ...Key) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.evictIdle(now)
	var wait time.Duration
	held := make([]*bucket, len(keys))
	for i, k := range keys {
		if k.Rate.Off() {
			continue
		}
		held[i] = l.bucket(k.Name, now)
		wait = max(wait, held[i].full.Sub(now)-k.Rate.slack())
	}
	if wait > 0 {
		return wait
	}
	for i, b := range held {
		if b != nil {
			b.full = later(b.full, now).Add(keys[i].Rate.interval())
		}
	}
	return 0
}

// Len is the number of buckets held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// bucket returns the bucket named name, a full one if it is new, and marks it the most
// recently used.
func (l *Limiter) bucket(name string, now time.Time) *bucket {
	if e, ok := l.buckets[name]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*bucket)
	}
	// At the cap, the least recently used client loses its count (it starts afresh) rather
	// than memory growing with every address a flood comes from. The cap is far above
	// the clients an honest day brings within a bucket's refill time.
	if len(l.buckets) >= l.max {
		l.remove(l.lru.Back())
	}
	b := &bucket{name: name, full: now}
	l.buckets[name] = l.lru.PushFront(b)
	return b
}

// evictIdle drops the buckets that are full again: such a bucket answers exactly as a
// new one would, so forgetting it changes no answer. It walks from the least recently
// used and stops at the first still refilling (amortised: each bucket is removed once);
// one of a slower rate may shelter faster ones behind it until it goes, which the cap
// bounds anyway.
func (l *Limiter) evictIdle(now time.Time) {
	for e := l.lru.Back(); e != nil; e = l.lru.Back() {
		if e.Value.(*bucket).full.After(now) {
			return
		}
		l.remove(e)
	}
}

func (l *Limiter) remove(e *list.Element) {
	delete(l.buckets, e.Value.(*bucket).name)
	l.lru.Remove(e)
}
