// Package apitoken holds API tokens (DESIGN §10): bearer credentials for the JSON API,
// each held by a member (a person's personal token, or a service account's), narrowed
// to scopes (authz.Scope), expiring, revocable and stored as a sha256 only. A request
// with a token acts as its holder with the token's scopes: it does what both the
// holder's role and a scope allow (authz.Subject.Can), and never decides a risk-3 run.
package apitoken

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bearer"
	"gantry/models/db"
	"gantry/models/errs"
)

// Prefix starts every token, so a leaked one is recognisable (and scanners find it).
const Prefix = "gantry_"

// Lifetimes of a token.
const (
	DefaultLifetime = 30 * 24 * time.Hour
	MaxLifetime     = 365 * 24 * time.Hour
	// UseRecorded is how often a token's use of the API is written to the audit log: its
	// first use, and the first after each such stretch (every mutating call is audited
	// anyway, by the service it reaches, with the token named).
	UseRecorded = time.Minute
)

// Token is one row of api_tokens. The secret itself is never stored.
type Token struct {
	ID             string
	OrganizationID string
	UserID         string
	Name           string
	Scopes         []authz.Scope `gorm:"serializer:json;type:jsonb"`
	SecretHash     []byte
	ExpiresAt      time.Time
	LastUsedAt     *time.Time
	RevokedAt      *time.Time
	RevokedBy      *string
	CreatedBy      string
	CreatedAt      time.Time
}

// TableName: gorm would say "tokens".
func (Token) TableName() string { return "api_tokens" }

// LogValue names a token by id only.
func (t Token) LogValue() slog.Value { return slog.StringValue(t.ID) }

// ErrBadToken is every refused token alike: unknown, wrong secret, expired, revoked, or
// its holder no longer a member (401).
var ErrBadToken = fmt.Errorf("invalid, expired or revoked API token: %w", errs.ErrUnauthenticated)

// Members is what tokens need of memberships (org.Service): the holder's role now, and
// who they are.
type Members interface {
	Holder(ctx context.Context, orgID, userID string) (Holder, error)
}

// Holder is a token's holder as the rules see them.
type Holder struct {
	Name           string
	Role           authz.Role
	ServiceAccount bool
}

// Service issues, lists, revokes and authenticates tokens.
type Service struct {
	db      *gorm.DB
	audit   *audit.Log
	members Members
}

// NewService returns the token service.
func NewService(gdb *gorm.DB, log *audit.Log, members Members) *Service {
	return &Service{db: gdb, audit: log, members: members}
}

func (s *Service) conn(ctx context.Context) *gorm.DB { return db.Conn(ctx, s.db) }

// Issue is what a person submits to make a token: for themselves, or (an admin) for a
// service account of the organization.
type Issue struct {
	Name     string
	Scopes   []string
	Lifetime time.Duration // 0: DefaultLifetime
	// HolderID is the service account to issue it to ("": the person asking).
	HolderID string
}

// check validates the request on its own: field messages.
func (in Issue) check() (*errs.Validation, []authz.Scope) {
	v := &errs.Validation{}
	name := strings.TrimSpace(in.Name)
	switch {
	case name == "":
		v.Add("name", "Name the token after what uses it, e.g. deploy-pipeline.")
	case len([]rune(name)) > 100:
		v.Add("name", "Use at most 100 characters.")
	case strings.ContainsRune(name, 0):
		v.Add("name", "The name holds a character that cannot be stored.")
	}
	var scopes []authz.Scope
	for _, raw := range in.Scopes {
		sc := authz.Scope(strings.TrimSpace(raw))
		if !sc.Valid() {
			v.Add("scopes", fmt.Sprintf("%q is not a scope: choose among read, plan, apply, decide, admin and audit.", raw))
			continue
		}
		if !slices.Contains(scopes, sc) {
			scopes = append(scopes, sc)
		}
	}
	if len(in.Scopes) == 0 {
		v.Add("scopes", "Choose at least one scope.")
	}
	if in.Lifetime < 0 || in.Lifetime > MaxLifetime || (in.Lifetime != 0 && in.Lifetime < time.Hour) {
		v.Add("lifetime", fmt.Sprintf("A token lives 1 hour to %d days.", int(MaxLifetime.Hours()/24)))
	}
	slices.SortFunc(scopes, func(a, b authz.Scope) int { return slices.Index(authz.Scopes, a) - slices.Index(authz.Scopes, b) })
	return v, scopes
}

// Issued is a new token with its secret: shown once.
type Issued struct {
	Token
	Secret string
}

// String keeps the secret out of %v and logs.
func (Issued) String() string { return "[api token redacted]" }

// Issue makes a token. A person makes their own; an admin (members.manage) makes a
// service account's. A scope the holder's role could never use is refused, so a token
// never promises what it cannot do. Bad input is *errs.Validation; nothing is written.
func (s *Service) Issue(ctx context.Context, in Issue) (Issued, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Issued{}, err
	}
	if subject.TokenID != "" {
		return Issued{}, errs.Explain(errs.ErrForbidden, "A token does not make tokens: sign in to make one.")
	}
	holderID := subject.UserID
	if in.HolderID != "" && in.HolderID != subject.UserID {
		if _, err := authz.Require(ctx, authz.PermMembersManage); err != nil {
			return Issued{}, err
		}
		holderID = in.HolderID
	}
	v, scopes := in.check()
	holder, err := s.members.Holder(ctx, subject.OrganizationID, holderID)
	if err != nil {
		return Issued{}, err
	}
	if holderID != subject.UserID && !holder.ServiceAccount {
		return Issued{}, errs.Explain(errs.ErrForbidden, "Tokens are made for yourself or for a service account, never for another person.")
	}
	for _, sc := range scopes {
		probe := authz.Subject{UserID: holderID, OrganizationID: subject.OrganizationID, Role: holder.Role, TokenID: "probe", Scopes: []authz.Scope{sc}}
		if sc != authz.ScopeRead && !slices.ContainsFunc(sc.Permissions(), func(p authz.Permission) bool { return p != authz.PermOrgRead && probe.Can(p) }) {
			v.Add("scopes", fmt.Sprintf("Scope %s gives a %s nothing: leave it out.", sc, holder.Role))
		}
	}
	if err := v.Err(); err != nil {
		return Issued{}, err
	}
	lifetime := in.Lifetime
	if lifetime == 0 {
		lifetime = DefaultLifetime
	}
	encoded, hash, err := bearer.New()
	if err != nil {
		return Issued{}, err
	}
	t := Token{ID: db.NewID("tok"), OrganizationID: subject.OrganizationID, UserID: holderID, Name: strings.TrimSpace(in.Name),
		Scopes: scopes, SecretHash: hash, CreatedBy: subject.UserID}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		if err := s.conn(ctx).Raw("SELECT now() + make_interval(secs => ?)", lifetime.Seconds()).Scan(&t.ExpiresAt).Error; err != nil {
			return fmt.Errorf("computing expiry: %w", err)
		}
		if err := s.conn(ctx).Create(&t).Error; err != nil {
			return fmt.Errorf("storing token: %w", db.Translate(err))
		}
		return s.audit.Record(ctx, audit.Entry{Action: "api_token.issued", TargetType: "api_token", TargetID: t.ID,
			Data: map[string]any{"name": t.Name, "holder_id": holderID, "holder": holder.Name, "scopes": scopes,
				"expires_at": t.ExpiresAt.UTC(), "service_account": holder.ServiceAccount}})
	})
	if err != nil {
		return Issued{}, err
	}
	return Issued{Token: t, Secret: Prefix + strings.TrimPrefix(t.ID, "tok-") + "." + encoded}, nil
}

// View is a token with its holder's name, for lists.
type View struct {
	Token
	Holder         string
	ServiceAccount bool
}

// seesAll reports whether subject sees every token of the organization: admins, who
// manage them, and auditors, who read what was granted (never a secret: none is kept).
func seesAll(subject authz.Subject) bool {
	return subject.Can(authz.PermMembersManage) || subject.Can(authz.PermAuditRead)
}

// List lists the subject's own tokens, and for admins and auditors every token of the
// organization, newest first.
func (s *Service) List(ctx context.Context) ([]View, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return nil, err
	}
	q := s.conn(ctx).Table("api_tokens t").Select("t.*, u.name AS holder, u.service_account").Joins("JOIN users u ON u.id = t.user_id").
		Where("t.organization_id = ?", subject.OrganizationID)
	if !seesAll(subject) {
		q = q.Where("t.user_id = ?", subject.UserID)
	}
	var out []View
	if err := q.Order("t.created_at DESC, t.id").Limit(500).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	return out, nil
}

// Revoke ends token id at once: its holder's, or any of the organization's for an
// admin. Another organization's token is not found.
func (s *Service) Revoke(ctx context.Context, id string) error {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return err
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		var t Token
		err := s.conn(ctx).Clauses(clause.Locking{Strength: "UPDATE"}).Where("organization_id = ? AND id = ?", subject.OrganizationID, id).Take(&t).Error
		if err != nil {
			return fmt.Errorf("token %s: %w", id, db.Translate(err))
		}
		if t.UserID != subject.UserID && !subject.Can(authz.PermMembersManage) {
			if seesAll(subject) {
				return fmt.Errorf("token %s: %w", id, errs.ErrForbidden) // an auditor sees it, and acts on none
			}
			return fmt.Errorf("token %s: %w", id, errs.ErrNotFound) // another member's token is none of theirs
		}
		if t.RevokedAt != nil {
			return nil
		}
		if err := s.conn(ctx).Exec("UPDATE api_tokens SET revoked_at = now(), revoked_by = ? WHERE id = ?", subject.UserID, t.ID).Error; err != nil {
			return fmt.Errorf("revoking token: %w", err)
		}
		return s.audit.Record(ctx, audit.Entry{Action: "api_token.revoked", TargetType: "api_token", TargetID: t.ID,
			Data: map[string]any{"name": t.Name, "holder_id": t.UserID}})
	})
}

// Authenticate turns a bearer token into the subject it acts as: its holder, with the
// holder's role now and the token's scopes. It records the use (last used, and the audit
// log at most every UseRecorded). Every refusal is ErrBadToken.
func (s *Service) Authenticate(ctx context.Context, raw string) (authz.Subject, error) {
	idPart, secret, ok := bearer.Parse(raw, Prefix)
	if !ok {
		return authz.Subject{}, ErrBadToken
	}
	var t Token
	var now time.Time
	if err := s.conn(ctx).Where("id = ?", "tok-"+idPart).Take(&t).Error; err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return authz.Subject{}, fmt.Errorf("reading token: %w", db.Translate(err))
	}
	if !bearer.Matches(secret, t.SecretHash) || t.ID == "" {
		return authz.Subject{}, ErrBadToken
	}
	if err := s.conn(ctx).Raw("SELECT clock_timestamp()").Scan(&now).Error; err != nil {
		return authz.Subject{}, fmt.Errorf("reading database clock: %w", err)
	}
	if t.RevokedAt != nil || !t.ExpiresAt.After(now) {
		return authz.Subject{}, ErrBadToken
	}
	holder, err := s.members.Holder(ctx, t.OrganizationID, t.UserID)
	if errors.Is(err, errs.ErrNotFound) {
		return authz.Subject{}, ErrBadToken
	}
	if err != nil {
		return authz.Subject{}, err
	}
	subject := authz.Subject{UserID: t.UserID, Name: holder.Name + " (token " + t.Name + ")", OrganizationID: t.OrganizationID,
		Role: holder.Role, TokenID: t.ID, Scopes: t.Scopes}
	return subject, s.used(ctx, t, subject, now)
}

// used records a use of t: its last use, to the minute, and an audit event when the
// last one recorded is older than UseRecorded. Within that minute a use writes nothing:
// a pipeline's reads stay reads (no commit, no row lock shared by every request made
// with the token), and of concurrent uses at the minute's turn the one whose update
// matched records it.
func (s *Service) used(ctx context.Context, t Token, subject authz.Subject, now time.Time) error {
	if t.LastUsedAt != nil && now.Sub(*t.LastUsedAt) < UseRecorded {
		return nil
	}
	return db.Tx(ctx, s.db, func(ctx context.Context) error {
		res := s.conn(ctx).Exec("UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= ?)",
			now, t.ID, now.Add(-UseRecorded))
		if res.Error != nil {
			return fmt.Errorf("recording the token's use: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			return nil
		}
		return s.audit.RecordAs(ctx, subject, audit.Entry{Action: "api_token.used", TargetType: "api_token", TargetID: t.ID,
			Data: map[string]any{"name": t.Name, "scopes": t.Scopes}})
	})
}

// RevokeAllOf revokes at once every live token userID holds in organization orgID, in
// the caller's transaction, as by (who asked: the caller audits it). The tokens' next
// use is ErrBadToken. It returns the ids it revoked.
func (s *Service) RevokeAllOf(ctx context.Context, orgID, userID, by string) ([]string, error) {
	var ids []string
	err := s.conn(ctx).Raw(`UPDATE api_tokens SET revoked_at = now(), revoked_by = ?
	        WHERE organization_id = ? AND user_id = ? AND revoked_at IS NULL RETURNING id`, by, orgID, userID).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("revoking %s's tokens: %w", userID, err)
	}
	slices.Sort(ids)
	return ids, nil
}
