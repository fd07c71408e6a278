package catalog

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"gantry/models/db"
)

// DBPins keeps pins in the template_pins table, so they outlive the process and are
// shared by every replica: the first replica to load a template version pins it.
type DBPins struct{ DB *gorm.DB }

// Pin implements Pins with an insert that keeps an existing pin.
func (p DBPins) Pin(ctx context.Context, name, version, digest string) (string, error) {
	conn := db.Conn(ctx, p.DB)
	err := conn.Exec(`INSERT INTO template_pins (name, version, module_digest) VALUES (?, ?, ?)
		ON CONFLICT (name, version) DO NOTHING`, name, version, digest).Error
	if err != nil {
		return "", fmt.Errorf("pinning %s %s: %w", name, version, err)
	}
	var pinned string
	if err := conn.Raw("SELECT module_digest FROM template_pins WHERE name = ? AND version = ?", name, version).Scan(&pinned).Error; err != nil {
		return "", fmt.Errorf("reading pin of %s %s: %w", name, version, err)
	}
	return pinned, nil
}
