// Package idempotency makes a mutating request take effect once (DESIGN §3): each form
// carries a fresh random key; the first request with a key runs and records its
// response, a repeat with the same key and the same values gets that response again
// without running anything, and the same key with other values is refused.
package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Field is the form field that carries the key.
const Field = "idempotency_key"

// MaxKeyLength bounds a key (NewKey makes 22 characters).
const MaxKeyLength = 128

// TTL is how long a key is remembered; older rows are swept.
const TTL = 24 * time.Hour

// DefaultWait bounds how long a request waits for another one in flight with the same
// key before it gives up with a conflict.
const DefaultWait = 10 * time.Second

// NewKey returns a fresh key: 128 random bits, base64url.
func NewKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err)) // crypto/rand never fails on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Fingerprint is the request hash a key is bound to: sha256 over the method, the path
// and the form fields sorted by name, leaving out the CSRF token (it changes with the
// session, not with the request) and the key itself.
func Fingerprint(method, path string, form url.Values) string {
	fields := url.Values{}
	for k, vs := range form {
		if k == "_csrf" || k == Field {
			continue
		}
		fields[k] = vs
	}
	// Encode sorts by name and escapes, so the text is unambiguous.
	sum := sha256.Sum256([]byte(method + " " + path + "\n" + fields.Encode()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Header is the API's request header that carries the key (forms use Field).
const Header = "Idempotency-Key"

// MaxBody bounds a recorded API answer: a larger one is answered but its key is not
// kept, so a repeat runs again rather than replaying half an answer.
const MaxBody = 1 << 20

// FingerprintBody is the request hash of an API call: sha256 over the method, the path
// with its query, the content type and the body.
func FingerprintBody(method, target, contentType string, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n%s\n", method, target, contentType)
	h.Write(body)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Request is one keyed request: the key its form (or API header) carried and its
// Fingerprint.
type Request struct {
	Key  string
	Hash string
	// API: the key came in the Idempotency-Key header (messages name it), not a form.
	API bool
}

// field is what a refusal's message is attached to.
func (r Request) field() string {
	if r.API {
		return Header
	}
	return Field
}

// Outcome is the response a keyed request gave and a repeat gets again: for a form a
// redirect to Location with status Status and the flash message Flash (of FlashKind,
// "success" when empty); for the API the status, Location, content type and body.
type Outcome struct {
	Status      int
	Location    string
	Flash       string
	FlashKind   string
	ContentType string
	Body        []byte
}

// record is one row of idempotency_keys.
type record struct {
	OrganizationID string `gorm:"primaryKey"`
	UserID         string `gorm:"primaryKey"`
	Key            string `gorm:"primaryKey"`
	RequestHash    string
	Status         *int
	Location       *string
	Flash          *string
	FlashKind      *string
	ContentType    *string
	Body           []byte
	CreatedAt      time.Time
}

func (record) TableName() string { return "idempotency_keys" }

// Store keeps the keys of each member of each organization.
type Store struct {
	db *gorm.DB
	// Wait bounds how long a request waits for another one in flight with its key.
	Wait time.Duration
}

// NewStore returns a store that waits DefaultWait for a request in flight.
func NewStore(gdb *gorm.DB) *Store { return &Store{db: gdb, Wait: DefaultWait} }

// Do runs fn once per key of the subject in ctx and returns its outcome, or the
// recorded outcome of an earlier request with the same key and hash (replayed is true
// then, and fn does not run). The key is reserved, fn runs and its outcome is recorded
// in one transaction that fn's service calls join (db.Tx), so the decision and its key
// commit together: when fn fails nothing is recorded and the key stays usable.
//
// A second request with a key whose first request is still in flight waits for it
// (its INSERT waits on the first transaction's uncommitted row): if the first commits,
// the second replays its outcome; if it fails, the second runs itself. The wait is
// bounded by s.Wait, after which the second gets a conflict (409).
//
// A missing or overlong key and a key used with other values are validation errors
// (422) on the key's field.
func (s *Store) Do(ctx context.Context, req Request, fn func(ctx context.Context) (Outcome, error)) (out Outcome, replayed bool, err error) {
	subject, ok := authz.SubjectFrom(ctx)
	if !ok || subject.OrganizationID == "" || subject.UserID == "" {
		return Outcome{}, false, errs.ErrUnauthenticated
	}
	if err := checkKey(req); err != nil {
		return Outcome{}, false, err
	}
	if err := s.sweep(ctx, subject); err != nil {
		return Outcome{}, false, err
	}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		conn := db.Conn(ctx, s.db)
		reserved, err := s.reserve(conn, subject, req)
		if err != nil {
			return err
		}
		if !reserved {
			out, err = s.recorded(conn, subject, req)
			replayed = err == nil
			return err
		}
		if out, err = fn(ctx); err != nil {
			if db.MustCommit(err) {
				// The request failed but changed what must stay (a late decision expired
				// its run): that commits, the reservation does not: the key stays usable.
				if derr := conn.Exec("DELETE FROM idempotency_keys WHERE organization_id = ? AND user_id = ? AND key = ?",
					subject.OrganizationID, subject.UserID, req.Key).Error; derr != nil {
					return fmt.Errorf("releasing idempotency key: %w", derr)
				}
			}
			return err // otherwise the rollback takes the reservation with it
		}
		res := conn.Model(&record{}).Where("organization_id = ? AND user_id = ? AND key = ?", subject.OrganizationID, subject.UserID, req.Key).
			Updates(map[string]any{"status": out.Status, "location": out.Location, "flash": out.Flash, "flash_kind": out.FlashKind,
				"content_type": out.ContentType, "body": out.Body})
		if res.Error != nil {
			return fmt.Errorf("recording idempotency key: %w", res.Error)
		}
		return nil
	})
	if err != nil {
		return Outcome{}, false, err
	}
	return out, replayed, nil
}

func checkKey(req Request) error {
	v := &errs.Validation{}
	switch {
	case req.Key == "" && req.API:
		v.Add(Header, "Every call that changes something carries an Idempotency-Key header: a fresh random value per intended change, sent again with a retry.")
	case req.Key == "":
		v.Add(Field, "This request carries no idempotency key. Every Gantry form sends one: reload the page and submit it again.")
	case len(req.Key) > MaxKeyLength:
		v.Add(req.field(), fmt.Sprintf("The idempotency key is longer than %d characters.", MaxKeyLength))
	case strings.ContainsFunc(req.Key, func(r rune) bool { return r < 0x21 || r > 0x7e }):
		v.Add(req.field(), "The idempotency key holds characters other than visible ASCII.")
	}
	return v.Err()
}

// sweep forgets the subject's keys older than TTL. It runs before (not in) the
// decision's transaction, so the rows it deletes are not locked while a decision runs.
func (s *Store) sweep(ctx context.Context, subject authz.Subject) error {
	err := db.Conn(ctx, s.db).Exec("DELETE FROM idempotency_keys WHERE organization_id = ? AND user_id = ? AND created_at < now() - make_interval(secs => ?)",
		subject.OrganizationID, subject.UserID, TTL.Seconds()).Error
	if err != nil {
		return fmt.Errorf("sweeping idempotency keys: %w", err)
	}
	return nil
}

// reserve inserts the key's row and reports whether this request did; false means
// another request with the key committed first. An uncommitted insert of the same key
// makes this one wait (the unique index waits for that transaction to end), bounded by
// lock_timeout for this statement only: the decision's own row locks keep their usual
// behaviour.
func (s *Store) reserve(conn *gorm.DB, subject authz.Subject, req Request) (bool, error) {
	var previous string
	if err := conn.Raw("SELECT current_setting('lock_timeout')").Scan(&previous).Error; err != nil {
		return false, fmt.Errorf("reading lock_timeout: %w", err)
	}
	wait := fmt.Sprintf("%dms", max(s.Wait, time.Millisecond).Milliseconds())
	if err := conn.Exec("SELECT set_config('lock_timeout', ?, true)", wait).Error; err != nil {
		return false, fmt.Errorf("setting lock_timeout: %w", err)
	}
	res := conn.Exec(`INSERT INTO idempotency_keys (organization_id, user_id, key, request_hash) VALUES (?, ?, ?, ?)
		ON CONFLICT (organization_id, user_id, key) DO NOTHING`, subject.OrganizationID, subject.UserID, req.Key, req.Hash)
	if res.Error != nil {
		if db.IsLockNotAvailable(res.Error) {
			return false, errs.Explain(errs.ErrConflict, "This form is still being submitted by another request. Wait a moment, then reload the page.")
		}
		return false, fmt.Errorf("reserving idempotency key: %w", db.Translate(res.Error))
	}
	if err := conn.Exec("SELECT set_config('lock_timeout', ?, true)", previous).Error; err != nil {
		return false, fmt.Errorf("restoring lock_timeout: %w", err)
	}
	return res.RowsAffected == 1, nil
}

// recorded is the outcome stored for the key, if req is the same request.
func (s *Store) recorded(conn *gorm.DB, subject authz.Subject, req Request) (Outcome, error) {
	var r record
	if err := conn.Where("organization_id = ? AND user_id = ? AND key = ?", subject.OrganizationID, subject.UserID, req.Key).Take(&r).Error; err != nil {
		return Outcome{}, fmt.Errorf("reading idempotency key: %w", db.Translate(err))
	}
	if r.RequestHash != req.Hash {
		v := &errs.Validation{}
		if req.API {
			v.Add(Header, "This Idempotency-Key was already used for another request: use a fresh key for a new change.")
		} else {
			v.Add(Field, "This form was already submitted with other values; reload the page.")
		}
		return Outcome{}, v
	}
	if r.Status == nil || r.Location == nil {
		// Rows are written with their outcome in one transaction: another request never
		// sees a bare reservation. Say "conflict" rather than replay nothing.
		return Outcome{}, fmt.Errorf("idempotency key without an outcome: %w", errs.ErrConflict)
	}
	out := Outcome{Status: *r.Status, Location: *r.Location}
	if r.Flash != nil {
		out.Flash = *r.Flash
	}
	if r.FlashKind != nil {
		out.FlashKind = *r.FlashKind
	}
	if r.ContentType != nil {
		out.ContentType = *r.ContentType
	}
	out.Body = r.Body
	return out, nil
}
