package run

import (
	"context"

	"gorm.io/gorm"

	"gantry/models/audit"
	"gantry/models/authz"
	"gantry/models/db"
	"gantry/models/keyring"
)

// rewrapBatch bounds how many rows one rotation transaction re-wraps.
const rewrapBatch = 500

// rewrapBatchFunc re-wraps, in the transaction of conn, up to rewrapBatch rows whose
// data key is not sealed under current, and says how many it read and how many of
// them belong to each organization.
type rewrapBatchFunc func(conn *gorm.DB, current string) (seen int, perOrg map[string]int, err error)

// rewrapInBatches runs batch in one transaction after another until a batch finds fewer
// than rewrapBatch rows (`gantry keys rotate`: older keys can be dropped once it is
// done; ciphertexts are untouched). Each batch is audited per organization as
// "keys.rewrapped" with its count under what; it returns how many rows it re-wrapped.
func rewrapInBatches(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring, what string, batch rewrapBatchFunc) (int, error) {
	log := audit.New(gdb)
	current := keys.CurrentKeyID()
	total := 0
	for {
		var seen int
		err := db.Tx(ctx, gdb, func(ctx context.Context) error {
			n, perOrg, err := batch(db.Conn(ctx, gdb), current)
			if err != nil {
				return err
			}
			for orgID, count := range perOrg {
				err := log.RecordAs(ctx, authz.System(orgID), audit.Entry{Action: "keys.rewrapped", TargetType: "keyring",
					TargetID: current, Data: map[string]any{what: count, "key_id": current}})
				if err != nil {
					return err
				}
			}
			seen = n
			return nil
		})
		if err != nil {
			return total, err
		}
		total += seen
		if seen < rewrapBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
