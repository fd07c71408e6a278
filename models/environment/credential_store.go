package environment

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/errs"
)

// SetStaticCredential seals secret as environment envID's static write credential (the
// one applies use), replacing any earlier one. Bad input is an *errs.Validation (field
// "cloud_credential") that never quotes the secret; so is an environment without a read
// credential (set that first: see pairRule). The audit event says that a credential was
// set, never what it is.
func (c *Credentials) SetStaticCredential(ctx context.Context, envID, secret string) error {
	return c.setOne(ctx, Write, envID, secret)
}

// ClearStaticCredential removes environment envID's static write credential: its applies
// use workload identity again. Clearing an environment without one changes nothing and
// audits nothing.
func (c *Credentials) ClearStaticCredential(ctx context.Context, envID string) error {
	return c.Apply(ctx, envID, CredentialChanges{Write: CredentialChange{Remove: true}})
}

// SetStaticReadCredential seals secret as environment envID's static read credential (the
// one plans and verifications use), replacing any earlier one. It is refused (field
// "cloud_read_credential") when it is the environment's write credential.
func (c *Credentials) SetStaticReadCredential(ctx context.Context, envID, secret string) error {
	return c.setOne(ctx, Read, envID, secret)
}

// setOne sets one credential through Apply; an empty secret is refused here, where Apply
// would read it as no change.
func (c *Credentials) setOne(ctx context.Context, k Kind, envID, secret string) error {
	if _, err := authz.Require(ctx, authz.PermEnvironmentsManage); err != nil {
		return err
	}
	v := &errs.Validation{}
	if validateSecret(v, k, secret); v.Err() != nil {
		return v
	}
	ch := CredentialChanges{Write: CredentialChange{Secret: secret}}
	if k == Read {
		ch = CredentialChanges{Read: CredentialChange{Secret: secret}}
	}
	return c.Apply(ctx, envID, ch)
}

// ClearStaticReadCredential removes environment envID's static read credential: its plans
// and verifications use read-scoped workload identity tokens again. It is refused while
// the environment holds a write credential (see pairRule).
func (c *Credentials) ClearStaticReadCredential(ctx context.Context, envID string) error {
	return c.Apply(ctx, envID, CredentialChanges{Read: CredentialChange{Remove: true}})
}

// set seals secret as k's credential. Unless the same edit also sets the other kind's
// (whose new secret Validate compared with this one), secret is refused when it is the
// other kind's stored credential.
func (c *Credentials) set(ctx context.Context, k Kind, envID, secret string, otherToo bool) error {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	v := &errs.Validation{}
	if validateSecret(v, k, secret); v.Err() != nil {
		return v
	}
	s := slots[k]
	return db.Tx(ctx, c.db, func(ctx context.Context) error {
		before, err := c.row(ctx, k, subject.OrganizationID, envID, true)
		if err != nil {
			return err
		}
		// Under the row lock: the other kind cannot change meanwhile.
		if !otherToo {
			if err := c.refuseStored(ctx, k, before.OrganizationID, before.ID, secret); err != nil {
				return err
			}
		}
		sealed, err := c.keys.Seal([]byte(secret), credentialAAD(k, before.OrganizationID, before.ID))
		if err != nil {
			return fmt.Errorf("sealing the %s: %w", s.noun, err)
		}
		err = db.Conn(ctx, c.db).Model(&Environment{}).
			Where("organization_id = ? AND id = ?", before.OrganizationID, before.ID).
			Updates(map[string]any{
				s.col + "key_id": sealed.KeyID, s.col + "wrapped_key": sealed.WrappedKey, s.col + "nonce": sealed.Nonce,
				s.col + "ciphertext": sealed.Ciphertext, s.col + "set_at": gorm.Expr("now()"), "updated_at": gorm.Expr("now()"),
			}).Error
		if err != nil {
			return fmt.Errorf("storing the %s: %w", s.noun, err)
		}
		e := s.set
		e.TargetType, e.TargetID = "environment", before.ID
		e.Data = map[string]any{"replaced": before.set(), "key_id": sealed.KeyID, "finding": "standing_credential"}
		return c.audit.Record(ctx, e)
	})
}

func (c *Credentials) clear(ctx context.Context, k Kind, envID string) error {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return err
	}
	s := slots[k]
	return db.Tx(ctx, c.db, func(ctx context.Context) error {
		before, err := c.row(ctx, k, subject.OrganizationID, envID, true)
		if err != nil || !before.set() {
			return err
		}
		err = db.Conn(ctx, c.db).Model(&Environment{}).
			Where("organization_id = ? AND id = ?", before.OrganizationID, before.ID).
			Updates(map[string]any{
				s.col + "key_id": nil, s.col + "wrapped_key": nil, s.col + "nonce": nil, s.col + "ciphertext": nil,
				s.col + "set_at": nil, "updated_at": gorm.Expr("now()"),
			}).Error
		if err != nil {
			return fmt.Errorf("clearing the %s: %w", s.noun, err)
		}
		e := s.cleared
		e.TargetType, e.TargetID = "environment", before.ID
		e.Data = map[string]any{"set_at": before.CredSetAt.UTC().Format(time.RFC3339)}
		return c.audit.Record(ctx, e)
	})
}

// Standing says which static credentials an environment holds and since when (nil: not
// held). It never holds a secret.
type Standing struct {
	WriteSetAt *time.Time
	ReadSetAt  *time.Time
}

// Any reports whether the environment holds a static credential (a finding).
func (s Standing) Any() bool { return s.WriteSetAt != nil || s.ReadSetAt != nil }

// standingOf maps the environments of orgID that hold a static credential (only envID's
// when it is not empty) to what they hold.
func standingOf(ctx context.Context, gdb *gorm.DB, orgID, envID string) (map[string]Standing, error) {
	q := db.Conn(ctx, gdb).Table("environments").Select("id, cred_set_at, read_cred_set_at").
		Where("organization_id = ? AND (cred_set_at IS NOT NULL OR read_cred_set_at IS NOT NULL)", orgID)
	if envID != "" {
		q = q.Where("id = ?", envID)
	}
	var rows []struct {
		ID            string
		CredSetAt     *time.Time
		ReadCredSetAt *time.Time
	}
	if err := q.Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing static credentials: %w", err)
	}
	out := make(map[string]Standing, len(rows))
	for _, r := range rows {
		out[r.ID] = Standing{WriteSetAt: r.CredSetAt, ReadSetAt: r.ReadCredSetAt}
	}
	return out, nil
}

// StaticCredentialStatus says which static credentials environment envID of the subject's
// organization holds, and since when. It never opens them.
func (c *Credentials) StaticCredentialStatus(ctx context.Context, envID string) (Standing, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return Standing{}, err
	}
	// The environment must exist in the subject's organization (404 otherwise).
	if _, err := c.row(ctx, Write, subject.OrganizationID, envID, false); err != nil {
		return Standing{}, err
	}
	all, err := standingOf(ctx, c.db, subject.OrganizationID, envID)
	if err != nil {
		return Standing{}, err
	}
	return all[envID], nil
}

// StaticCredentialsOf maps the ids of the subject's organization's environments that hold
// a static credential to what they hold (for the environment list's finding badges).
func (c *Credentials) StaticCredentialsOf(ctx context.Context) (map[string]Standing, error) {
	subject, err := authz.Require(ctx, authz.PermEnvironmentsManage)
	if err != nil {
		return nil, err
	}
	return standingOf(ctx, c.db, subject.OrganizationID, "")
}

// StaticCredential opens environment envID's static write credential for the runner's
// applies, which act as the system (no subject): ok is false when applies use workload
// identity. The secret goes to the apply job's environment and nowhere else.
func (c *Credentials) StaticCredential(ctx context.Context, orgID, envID string) (secret string, ok bool, err error) {
	return c.static(ctx, Write, orgID, envID)
}

// StaticReadCredential opens environment envID's static read credential for the runner's
// plans and verifications: ok is false when they use read-scoped workload identity tokens.
func (c *Credentials) StaticReadCredential(ctx context.Context, orgID, envID string) (secret string, ok bool, err error) {
	return c.static(ctx, Read, orgID, envID)
}

func (c *Credentials) static(ctx context.Context, k Kind, orgID, envID string) (string, bool, error) {
	r, err := c.row(ctx, k, orgID, envID, false)
	if err != nil || !r.set() {
		return "", false, err
	}
	secret, err := c.open(k, r)
	if err != nil {
		return "", false, err
	}
	return secret, true, nil
}
