package state

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/keyring"
)

// rotateBatch bounds how many artifacts one rotation transaction re-wraps, so a large
// table is rotated in short transactions that hold few row locks.
const rotateBatch = 200

// wrappedKey is the slice of an artifacts row rotation touches: never the ciphertext,
// which is neither read nor written.
type wrappedKey struct {
	ID             string
	OrganizationID string
	KeyID          string
	WrappedKey     []byte
}

// RotateKeys re-wraps the data key of every artifact (of any kind: states, plans,
// bundles, logs) not sealed under keys' current key, so that older keys can then be
// dropped from the configuration. Ciphertexts are untouched: only key_id and
// wrapped_key change. It works in batches, each its own transaction audited per
// organization as "keys.rewrapped", and returns how many artifacts it re-wrapped. An
// artifact under a key the keyring does not hold stops it with keyring.ErrUnknownKey
// (the batches before it stay committed; running it again carries on).
//
// It backs `gantry keys rotate`. The row locks are FOR NO KEY UPDATE, which foreign-key
// checks of concurrent inserts (runs pointing at artifacts) do not wait for; two
// rotations at once wait for each other and re-wrap each row once.
func RotateKeys(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (rewrapped int, err error) {
	log := audit.New(gdb)
	current := keys.CurrentKeyID()
	for {
		var seen, n int
		err := db.Tx(ctx, gdb, func(ctx context.Context) error {
			conn := db.Conn(ctx, gdb)
			var rows []wrappedKey
			err := conn.Raw(`SELECT id, organization_id, key_id, wrapped_key FROM artifacts WHERE key_id <> ?
				ORDER BY id LIMIT ? FOR NO KEY UPDATE`, current, rotateBatch).Scan(&rows).Error
			if err != nil {
				return fmt.Errorf("reading artifacts to rotate: %w", err)
			}
			perOrg := map[string]int{}
			for _, r := range rows {
				re, err := keys.Rewrap(keyring.Sealed{KeyID: r.KeyID, WrappedKey: r.WrappedKey})
				if err != nil {
					return fmt.Errorf("re-wrapping artifact %s: %w", r.ID, err)
				}
				res := conn.Exec(`UPDATE artifacts SET key_id = ?, wrapped_key = ? WHERE id = ? AND key_id = ?`,
					re.KeyID, re.WrappedKey, r.ID, r.KeyID)
				if res.Error != nil {
					return fmt.Errorf("storing re-wrapped key of artifact %s: %w", r.ID, res.Error)
				}
				perOrg[r.OrganizationID] += int(res.RowsAffected)
				n += int(res.RowsAffected)
			}
			for orgID, count := range perOrg {
				if count == 0 {
					continue
				}
				err := log.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "keys.rewrapped", TargetType: "keyring",
					TargetID: current, Data: map[string]any{"artifacts": count, "key_id": current}})
				if err != nil {
					return err
				}
			}
			seen = len(rows)
			return nil
		})
		if err != nil {
			return rewrapped, err
		}
		rewrapped += n
		if seen == 0 {
			return rewrapped, nil
		}
		if err := ctx.Err(); err != nil {
			return rewrapped, err
		}
	}
}
