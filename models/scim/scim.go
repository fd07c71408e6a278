// Package scim keeps what a company's directory provisions into one organization over
// SCIM 2.0 (RFC 7643, RFC 7644): its users and groups, each organization with its own
// bearer token. A directory user grants nothing by itself: linked to a Gantry person by
// the rule in rules.go, it ends their access when deactivated (deprovision.go), and its
// groups feed the organization's group rules (directory.go, models/org's GroupRules).
package scim

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// Sessions ends a person's browser sessions (session.Store).
type Sessions interface {
	EndAllOf(ctx context.Context, userID string) (int64, error)
}

// Tokens revokes a person's API tokens in one organization (apitoken.Service).
type Tokens interface {
	RevokeAllOf(ctx context.Context, orgID, userID, by string) ([]string, error)
}

// Service is the SCIM side of an organization: its token, users and groups.
type Service struct {
	db       *gorm.DB
	audit    *audit.Log
	sessions Sessions
	tokens   Tokens
	members  Members
	rules    Rules
}

// NewService returns the SCIM service.
func NewService(gdb *gorm.DB, log *audit.Log, members Members, sessions Sessions, tokens Tokens, rules Rules) *Service {
	return &Service{db: gdb, audit: log, members: members, sessions: sessions, tokens: tokens, rules: rules}
}

func (s *Service) conn(ctx context.Context) *gorm.DB { return db.Conn(ctx, s.db) }

// Client is an authenticated directory: the organization whose SCIM token it holds.
type Client struct {
	OrganizationID string
	TokenID        string
}

type clientKey struct{}

// WithClient returns ctx carrying the authenticated directory c.
func WithClient(ctx context.Context, c Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// client is the directory in ctx; none is ErrUnauthenticated. Every method of the
// resources starts here: a SCIM call acts in its token's organization only.
func client(ctx context.Context) (Client, error) {
	c, ok := ctx.Value(clientKey{}).(Client)
	if !ok || c.OrganizationID == "" {
		return Client{}, errs.ErrUnauthenticated
	}
	return c, nil
}

// actor is how the audit log names a directory's changes.
func (c Client) actor() authz.Subject {
	return authz.Subject{UserID: "scim:" + c.TokenID, Name: "Directory (SCIM)", OrganizationID: c.OrganizationID}
}

func (s *Service) record(ctx context.Context, c Client, e audit.Entry) error {
	return s.audit.RecordAs(ctx, c.actor(), e)
}

// ErrConflict is a userName already provisioned in the organization (409 uniqueness).
var ErrConflict = errors.New("already exists")

// Invalid wraps a bad value for the directory to read (400 invalidValue).
func Invalid(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, ErrInvalidValue)...)
}

var errNotFound = errs.ErrNotFound
