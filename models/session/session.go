// Package session stores browser sessions server-side. The cookie carries a random
// token; the database keeps only its sha256, the signed-in user, the current
// organization, the CSRF token and a little JSON (flash messages, when the person last
// authenticated). A sign-in in progress is not here: it lives in the browser until the
// provider sends the person back (web/loginflow.go), so only a sign-in makes a row.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/errs"
)

// Flash is a one-time message shown on the next page.
type Flash struct {
	Kind    string `json:"kind"` // "success" | "error" | "info"
	Message string `json:"message"`
}

// Data is the session's JSON column.
type Data struct {
	Flashes []Flash `json:"flashes,omitempty"`
	// AuthTime is when the identity provider last authenticated the person (the ID
	// token's auth_time), for decisions that need a fresh sign-in.
	AuthTime *time.Time `json:"auth_time,omitempty"`
}

// Session is one row of sessions.
type Session struct {
	IDHash         []byte `gorm:"primaryKey"`
	UserID         *string
	OrganizationID *string
	CSRFToken      string
	Data           Data `gorm:"serializer:json;type:jsonb"`
	CreatedAt      time.Time
	LastSeenAt     time.Time
	ExpiresAt      time.Time
}

// SignedIn reports whether a user is attached.
func (s Session) SignedIn() bool { return s.UserID != nil }

// Store reads and writes sessions.
type Store struct {
	db       *gorm.DB
	Idle     time.Duration // a session unused this long is over
	Lifetime time.Duration // a session is over this long after it began, used or not
}

// NewStore returns a store with the given idle timeout and absolute lifetime.
func NewStore(gdb *gorm.DB, idle, lifetime time.Duration) *Store {
	return &Store{db: gdb, Idle: idle, Lifetime: lifetime}
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Create starts an anonymous session and returns the cookie token.
func (st *Store) Create(ctx context.Context, data Data) (string, Session, error) {
	token := randomToken()
	s := Session{
		IDHash:     hashToken(token),
		CSRFToken:  randomToken(),
		Data:       data,
		LastSeenAt: time.Now(),
		ExpiresAt:  time.Now().Add(st.Lifetime),
	}
	if err := db.Conn(ctx, st.db).Create(&s).Error; err != nil {
		return "", Session{}, fmt.Errorf("creating session: %w", err)
	}
	return token, s, nil
}

// DeleteOver deletes every session past its lifetime or idle timeout. Load refuses
// them anyway; this keeps the table from growing with abandoned sessions.
func (st *Store) DeleteOver(ctx context.Context) (int64, error) {
	res := db.Conn(ctx, st.db).Where("expires_at < now() OR last_seen_at < now() - make_interval(secs => ?)", st.Idle.Seconds()).
		Delete(&Session{})
	if res.Error != nil {
		return 0, fmt.Errorf("deleting over sessions: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// Load returns the live session for token. An unknown, expired or idle session is
// ErrNotFound (and an over one is deleted on the way).
func (st *Store) Load(ctx context.Context, token string) (Session, error) {
	if token == "" {
		return Session{}, errs.ErrNotFound
	}
	var s Session
	conn := db.Conn(ctx, st.db)
	if err := conn.Where("id_hash = ?", hashToken(token)).Take(&s).Error; err != nil {
		return Session{}, fmt.Errorf("loading session: %w", db.Translate(err))
	}
	now := time.Now()
	if now.After(s.ExpiresAt) || now.Sub(s.LastSeenAt) > st.Idle {
		conn.Where("id_hash = ?", s.IDHash).Delete(&Session{})
		return Session{}, fmt.Errorf("session over: %w", errs.ErrNotFound)
	}
	// Touch at most once a minute: the idle clock needs minute precision, not a write
	// per request.
	if now.Sub(s.LastSeenAt) > time.Minute {
		s.LastSeenAt = now
		if err := conn.Model(&Session{}).Where("id_hash = ?", s.IDHash).Update("last_seen_at", now).Error; err != nil {
			return Session{}, fmt.Errorf("touching session: %w", err)
		}
	}
	return s, nil
}

// SaveData replaces the session's JSON data.
func (st *Store) SaveData(ctx context.Context, s Session) error {
	err := db.Conn(ctx, st.db).Model(&Session{}).Where("id_hash = ?", s.IDHash).
		Update("data", s.Data).Error
	if err != nil {
		return fmt.Errorf("saving session: %w", err)
	}
	return nil
}

// SignIn ends the browser's session old (if any: a zero Session is none) and starts a
// signed-in one with a new token and a new CSRF token, so a token planted before login
// (session fixation) is useless.
func (st *Store) SignIn(ctx context.Context, old Session, userID string, orgID *string) (string, Session, error) {
	var token string
	var s Session
	err := db.Tx(ctx, st.db, func(ctx context.Context) error {
		if err := db.Conn(ctx, st.db).Where("id_hash = ?", old.IDHash).Delete(&Session{}).Error; err != nil {
			return fmt.Errorf("ending anonymous session: %w", err)
		}
		var err error
		token, s, err = st.Create(ctx, Data{})
		if err != nil {
			return err
		}
		s.UserID, s.OrganizationID = &userID, orgID
		return db.Conn(ctx, st.db).Model(&Session{}).Where("id_hash = ?", s.IDHash).
			Updates(map[string]any{"user_id": userID, "organization_id": orgID}).Error
	})
	if err != nil {
		return "", Session{}, fmt.Errorf("signing in: %w", err)
	}
	return token, s, nil
}

// SetOrganization switches the session's current organization.
func (st *Store) SetOrganization(ctx context.Context, s Session, orgID string) error {
	err := db.Conn(ctx, st.db).Model(&Session{}).Where("id_hash = ?", s.IDHash).
		Update("organization_id", orgID).Error
	if err != nil {
		return fmt.Errorf("switching organization: %w", err)
	}
	return nil
}

// Delete ends the session.
func (st *Store) Delete(ctx context.Context, s Session) error {
	if err := db.Conn(ctx, st.db).Where("id_hash = ?", s.IDHash).Delete(&Session{}).Error; err != nil {
		return fmt.Errorf("ending session: %w", err)
	}
	return nil
}

// EndAllOf ends every session of user userID at once, in whichever organization it is
// (a session is the person's, and switches organizations): the browser's next request
// finds no session and asks for a sign-in. It returns how many it ended.
func (st *Store) EndAllOf(ctx context.Context, userID string) (int64, error) {
	res := db.Conn(ctx, st.db).Where("user_id = ?", userID).Delete(&Session{})
	if res.Error != nil {
		return 0, fmt.Errorf("ending %s's sessions: %w", userID, res.Error)
	}
	return res.RowsAffected, nil
}
