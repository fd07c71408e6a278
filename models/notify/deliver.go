package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gantry/models/words"

	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
)

// HookOptions are the webhook client's settings.
type HookOptions struct {
	// AllowPrivateTargets lets hooks reach loopback, private, link-local and other
	// non-public addresses. Off in production: a hook URL must not become a way to
	// reach the portal's own network (SSRF). Tests and a single-machine dev set it.
	AllowPrivateTargets bool
	// Timeout bounds one attempt (connect, send, answer).
	Timeout time.Duration
	// MaxAttempts is how often a delivery is tried before it is given up.
	MaxAttempts int
	// RetryBase is the wait before the second attempt; each later wait doubles, up to
	// RetryMax.
	RetryBase time.Duration
	RetryMax  time.Duration
	// DisableAfter failed attempts in a row (across deliveries) turn a hook off.
	DisableAfter int
}

func (o HookOptions) withDefaults() HookOptions {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 30 * time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 6 * time.Hour
	}
	if o.DisableAfter <= 0 {
		o.DisableAfter = 20
	}
	return o
}

// RetryAfter is the wait after failed attempt n (1-based): RetryBase doubled n-1
// times, at most RetryMax.
func (o HookOptions) RetryAfter(n int) time.Duration {
	d := o.RetryBase
	for i := 1; i < n && d < o.RetryMax; i++ {
		d *= 2
	}
	return min(d, o.RetryMax)
}

// refusedAddr says why addr may not be a hook target ("" when it may).
func (o HookOptions) refusedAddr(addr netip.Addr) string {
	if o.AllowPrivateTargets {
		return ""
	}
	addr = addr.Unmap()
	switch {
	case addr.IsLoopback():
		return "loopback"
	case addr.IsPrivate():
		return "private"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "link-local"
	case addr.IsUnspecified(), addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return "not a unicast"
	case cgnat.Contains(addr), benchmarking.Contains(addr):
		return "not a public"
	}
	return ""
}

var (
	cgnat        = netip.MustParsePrefix("100.64.0.0/10")
	benchmarking = netip.MustParsePrefix("198.18.0.0/15")
)

// refusedHost says why a hook URL's host is refused at once: an IP literal (or
// "localhost") that is not public. Names are checked again, address by address, when
// each delivery connects (a name can change what it resolves to).
func (o HookOptions) refusedHost(host string) string {
	if o.AllowPrivateTargets {
		return ""
	}
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return "Gantry does not call its own machine (localhost): use a public address."
	}
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if why := o.refusedAddr(addr); why != "" {
			return fmt.Sprintf("%s is a %s address; Gantry only calls public addresses.", addr, why)
		}
	}
	return ""
}

// errRefusedTarget marks a connection the SSRF guard stopped.
var errRefusedTarget = errors.New("refused target")

// hookClient posts deliveries: no redirects followed, every connection's address
// checked after name resolution (so a name that resolves to 127.0.0.1 is refused).
type hookClient struct{ http *http.Client }

func newHookClient(o HookOptions) *hookClient {
	dialer := &net.Dialer{Timeout: o.Timeout, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		addr, err := netip.ParseAddr(host)
		if err != nil {
			return err
		}
		if why := o.refusedAddr(addr); why != "" {
			return fmt.Errorf("%w: %s is a %s address", errRefusedTarget, addr, why)
		}
		return nil
	}}
	transport := &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: o.Timeout, ResponseHeaderTimeout: o.Timeout,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true}
	return &hookClient{http: &http.Client{Transport: transport, Timeout: o.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Signature headers. A receiver recomputes HMAC-SHA256(secret, timestamp + "." + body),
// compares it in constant time with Gantry-Signature's v1 value, and refuses a timestamp
// too far from its clock (replays).
const (
	HeaderEvent     = "Gantry-Event"
	HeaderDelivery  = "Gantry-Delivery"
	HeaderTimestamp = "Gantry-Timestamp"
	HeaderSignature = "Gantry-Signature"
)

// Sign is the Gantry-Signature value of body sent at unix time ts.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "%d.", ts)
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a delivery as a receiver would: the signature over the timestamp and
// body, and the timestamp within tolerance of now.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(h.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		return errors.New("no valid Gantry-Timestamp")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("timestamp %d is %s away from now", ts, d.Round(time.Second))
	}
	if !hmac.Equal([]byte(h.Get(HeaderSignature)), []byte(Sign(secret, ts, body))) {
		return errors.New("signature does not match")
	}
	return nil
}

// answer is what one attempt got.
type answer struct {
	status   int // 0: no HTTP answer
	err      string
	duration time.Duration
	// skipped: nothing was sent (the hook is off); it does not count as a failure.
	skipped bool
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

func (c *hookClient) post(ctx context.Context, target string, headers http.Header, body []byte) answer {
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return answer{err: "bad URL: " + err.Error()}
	}
	req.Header = headers
	resp, err := c.http.Do(req)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, errRefusedTarget) {
			msg = "refused: " + msg[strings.Index(msg, errRefusedTarget.Error())+len(errRefusedTarget.Error())+2:]
		}
		return answer{err: msg, duration: time.Since(start)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	a := answer{status: resp.StatusCode, duration: time.Since(start)}
	if !a.ok() {
		a.err = "the receiver answered " + resp.Status
	}
	return a
}

// Deliver makes attempt number attempt (1-based, counted by the job that carries it) at
// delivery id; the attempt numbered HookOptions.MaxAttempts is the last. A failed
// attempt returns an error so the queue retries it after RetryAfter, unless it was the
// last or the hook is now off; either way the attempt is in the hook's log.
func (s *Service) Deliver(ctx context.Context, id string, attempt int) error {
	final := attempt >= s.hooks.MaxAttempts
	var d Delivery
	if err := db.Conn(ctx, s.db).Where("id = ?", id).Take(&d).Error; err != nil {
		return fmt.Errorf("reading delivery %s: %w", id, db.Translate(err))
	}
	if d.Status == DeliveryDelivered || d.Status == DeliveryFailed {
		return nil // done by an earlier run of this job
	}
	h, err := s.hook(ctx, d.OrganizationID, d.WebhookID, false)
	if err != nil {
		return err
	}
	if !h.Enabled {
		return s.finish(ctx, d, answer{err: "not sent: the webhook is turned off", skipped: true}, true)
	}
	secret, err := s.keys.Open(h.sealed(), hookAAD(h.OrganizationID, h.ID))
	if err != nil {
		return fmt.Errorf("opening webhook %s secret: %w", h.ID, err)
	}
	ts := time.Now().Unix()
	headers := http.Header{}
	headers.Set("Content-Type", "application/json")
	headers.Set("User-Agent", "Gantry-Webhook/1")
	headers.Set(HeaderEvent, string(d.Event))
	headers.Set(HeaderDelivery, d.ID)
	headers.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	headers.Set(HeaderSignature, Sign(string(secret), ts, d.Payload))
	a := s.client.post(ctx, h.URL, headers, d.Payload)
	if err := s.finish(ctx, d, a, final); err != nil {
		return err
	}
	if !a.ok() && !final {
		return fmt.Errorf("delivery %s to webhook %s: %s", d.ID, h.ID, a.err)
	}
	return nil
}

// finish records attempt a of delivery d and what it means: delivered, retrying or
// failed; the hook's run of failures, and turning it off after too many.
func (s *Service) finish(ctx context.Context, d Delivery, a answer, final bool) error {
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		var cur Delivery
		if err := conn.Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", d.ID).Take(&cur).Error; err != nil {
			return fmt.Errorf("locking delivery %s: %w", d.ID, db.Translate(err))
		}
		if cur.Status == DeliveryDelivered || cur.Status == DeliveryFailed {
			return nil
		}
		n := cur.Attempts + 1
		var code *int
		if a.status != 0 {
			code = &a.status
		}
		if err := conn.Create(&Attempt{DeliveryID: d.ID, Attempt: n, StatusCode: code, Error: a.err,
			DurationMS: int(a.duration / time.Millisecond)}).Error; err != nil {
			return fmt.Errorf("recording attempt: %w", err)
		}
		up := map[string]any{"attempts": n, "last_status_code": code, "last_error": a.err}
		switch {
		case a.ok():
			up["status"], up["finished_at"] = DeliveryDelivered, gormNow
		case final:
			up["status"], up["finished_at"] = DeliveryFailed, gormNow
		default:
			up["status"] = DeliveryRetrying
		}
		if err := conn.Model(&Delivery{}).Where("id = ?", d.ID).Updates(up).Error; err != nil {
			return fmt.Errorf("updating delivery: %w", err)
		}
		if a.skipped {
			return nil
		}
		return s.countFailure(ctx, d, a.ok())
	})
}

var gormNow = clause.Expr{SQL: "now()"}

// countFailure keeps the hook's run of failed attempts and turns it off (audited) when
// the run reaches DisableAfter.
func (s *Service) countFailure(ctx context.Context, d Delivery, ok bool) error {
	conn := db.Conn(ctx, s.db)
	h, err := s.hook(ctx, d.OrganizationID, d.WebhookID, true)
	if err != nil {
		return err
	}
	if ok {
		if h.ConsecutiveFailures == 0 {
			return nil
		}
		return conn.Model(&Hook{}).Where("id = ?", h.ID).Update("consecutive_failures", 0).Error
	}
	failures := h.ConsecutiveFailures + 1
	up := map[string]any{"consecutive_failures": failures}
	turnOff := h.Enabled && failures >= s.hooks.DisableAfter
	if turnOff {
		up["enabled"], up["disabled_reason"] = false, "turned off by Gantry after "+words.Count(failures, "failed attempt", "failed attempts")+" in a row"
	}
	if err := conn.Model(&Hook{}).Where("id = ?", h.ID).Updates(up).Error; err != nil {
		return fmt.Errorf("counting webhook failures: %w", err)
	}
	if !turnOff {
		return nil
	}
	return s.audit.RecordAs(ctx, authz.System(h.OrganizationID), audit.Entry{Action: "webhook.disabled", TargetType: "webhook", TargetID: h.ID,
		Data: map[string]any{"name": h.Name, "reason": up["disabled_reason"], "failures": failures}})
}
