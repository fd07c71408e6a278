package identity

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/db"
	"gantry/models/keyring"
)

// RewrapKeys re-wraps the data keys sealing the workload signing keys under keys'
// current key-encryption key (the sealed private keys are untouched), so an older KEK
// can be dropped. It is the workload-key half of `gantry keys rotate`.
func RewrapKeys(ctx context.Context, gdb *gorm.DB, keys *keyring.Keyring) (int, error) {
	n := 0
	err := db.Tx(ctx, gdb, func(ctx context.Context) error {
		conn := db.Conn(ctx, gdb)
		var rows []struct {
			Kid        string
			KeyID      string
			WrappedKey []byte
		}
		if err := conn.Raw("SELECT kid, key_id, wrapped_key FROM workload_keys WHERE key_id <> ? FOR UPDATE", keys.CurrentKeyID()).Scan(&rows).Error; err != nil {
			return fmt.Errorf("reading workload keys: %w", err)
		}
		for _, r := range rows {
			re, err := keys.Rewrap(keyring.Sealed{KeyID: r.KeyID, WrappedKey: r.WrappedKey})
			if err != nil {
				return fmt.Errorf("re-wrapping workload key %s: %w", r.Kid, err)
			}
			if err := conn.Exec("UPDATE workload_keys SET key_id = ?, wrapped_key = ? WHERE kid = ?", re.KeyID, re.WrappedKey, r.Kid).Error; err != nil {
				return fmt.Errorf("saving workload key %s: %w", r.Kid, err)
			}
			n++
		}
		return nil
	})
	return n, err
}
