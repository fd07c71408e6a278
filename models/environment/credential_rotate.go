package environment

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/keyring"
)

// RewrapCredentials re-wraps the data key of every environment credential (write and read)
// not sealed under keys' current key (`gantry keys rotate`); ciphertexts are untouched. It
// returns how many it re-wrapped, audited per organization as "keys.rewrapped".
func RewrapCredentials(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (int, error) {
	log := audit.New(gdb)
	current := keys.CurrentKeyID()
	n := 0
	err := db.Tx(ctx, gdb, func(ctx context.Context) error {
		perOrg := map[string]int{}
		for _, k := range []Kind{Write, Read} {
			s := slots[k]
			var rows []credentialRow
			err := db.Conn(ctx, gdb).Table("environments").Select(credentialColumns(k)).
				Where(s.col+"key_id IS NOT NULL AND "+s.col+"key_id <> ?", current).
				Clauses(clause.Locking{Strength: "NO KEY UPDATE"}).Order("id").Scan(&rows).Error
			if err != nil {
				return fmt.Errorf("reading environment %ss to rotate: %w", s.noun, err)
			}
			for _, r := range rows {
				re, err := keys.Rewrap(r.sealed())
				if err != nil {
					return fmt.Errorf("re-wrapping the %s of environment %s: %w", s.noun, r.ID, err)
				}
				err = db.Conn(ctx, gdb).Model(&Environment{}).Where("id = ? AND "+s.col+"key_id = ?", r.ID, *r.CredKeyID).
					Updates(map[string]any{s.col + "key_id": re.KeyID, s.col + "wrapped_key": re.WrappedKey}).Error
				if err != nil {
					return fmt.Errorf("storing the re-wrapped %s of environment %s: %w", s.noun, r.ID, err)
				}
				perOrg[r.OrganizationID]++
				n++
			}
		}
		for orgID, count := range perOrg {
			err := log.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "keys.rewrapped", TargetType: "keyring",
				TargetID: current, Data: map[string]any{"environment_credentials": count, "key_id": current}})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
