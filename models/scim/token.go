package scim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/bearer"
	"gantry/models/db"
	"gantry/models/errs"
)

// TokenPrefix starts every SCIM token: it is no API token (apitoken.Prefix is
// "gantry_", and an API token's id never holds "scim"), and an API token is no SCIM token.
const TokenPrefix = "gantryscim_"

// ErrBadToken is every refused SCIM token alike (401).
var ErrBadToken = fmt.Errorf("invalid SCIM token: %w", errs.ErrUnauthenticated)

// TokenStatus is what an owner sees of the organization's token: never the secret.
type TokenStatus struct {
	Exists    bool
	CreatedAt time.Time
	CreatedBy string
}

// Issued is a new SCIM token with its secret: shown once.
type Issued struct {
	Secret string
}

// String keeps the secret out of %v and logs.
func (Issued) String() string { return "[scim token redacted]" }

type tokenRow struct {
	OrganizationID string
	ID             string
	SecretHash     []byte
	CreatedBy      string
	CreatedAt      time.Time
}

func (tokenRow) TableName() string { return "scim_tokens" }

// Token returns the organization's token status, for an owner.
func (s *Service) Token(ctx context.Context) (TokenStatus, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return TokenStatus{}, err
	}
	if !CanManageToken(subject) {
		return TokenStatus{}, errs.Explain(errs.ErrForbidden, "Only an owner manages the directory's SCIM token.")
	}
	var row tokenRow
	err = s.conn(ctx).Where("organization_id = ?", subject.OrganizationID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return TokenStatus{}, nil
	}
	if err != nil {
		return TokenStatus{}, fmt.Errorf("reading SCIM token: %w", err)
	}
	return TokenStatus{Exists: true, CreatedAt: row.CreatedAt, CreatedBy: row.CreatedBy}, nil
}

// Rotate makes the organization's SCIM token, ending the one before at once (an owner).
func (s *Service) Rotate(ctx context.Context) (Issued, error) {
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return Issued{}, err
	}
	if !CanManageToken(subject) {
		return Issued{}, errs.Explain(errs.ErrForbidden, "Only an owner manages the directory's SCIM token.")
	}
	encoded, hash, err := bearer.New()
	if err != nil {
		return Issued{}, err
	}
	row := tokenRow{OrganizationID: subject.OrganizationID, ID: db.NewID("scimtok"), SecretHash: hash, CreatedBy: subject.Name}
	err = db.Tx(ctx, s.db, func(ctx context.Context) error {
		var replaced int64
		res := s.conn(ctx).Where("organization_id = ?", row.OrganizationID).Delete(&tokenRow{})
		if res.Error != nil {
			return fmt.Errorf("ending the SCIM token: %w", res.Error)
		}
		replaced = res.RowsAffected
		if err := s.conn(ctx).Create(&row).Error; err != nil {
			return fmt.Errorf("storing SCIM token: %w", db.Translate(err))
		}
		return s.audit.Record(ctx, audit.Entry{Action: "scim.token_rotated", TargetType: "scim_token", TargetID: row.ID,
			Data: map[string]any{"replaced": replaced > 0}})
	})
	if err != nil {
		return Issued{}, err
	}
	return Issued{Secret: TokenPrefix + strings.TrimPrefix(row.ID, "scimtok-") + "." + encoded}, nil
}

// Authenticate turns a bearer SCIM token into the directory it speaks for. Every
// refusal is ErrBadToken, and costs what a known token does.
func (s *Service) Authenticate(ctx context.Context, raw string) (Client, error) {
	idPart, secret, ok := bearer.Parse(raw, TokenPrefix)
	if !ok {
		return Client{}, ErrBadToken
	}
	var row tokenRow
	err := s.conn(ctx).Where("id = ?", "scimtok-"+idPart).Take(&row).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return Client{}, fmt.Errorf("reading SCIM token: %w", db.Translate(err))
	}
	if !bearer.Matches(secret, row.SecretHash) || row.ID == "" {
		return Client{}, ErrBadToken
	}
	return Client{OrganizationID: row.OrganizationID, TokenID: row.ID}, nil
}
