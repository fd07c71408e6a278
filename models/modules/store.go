package modules

import (
	"context"
	"fmt"

	"gantry/models/bundle"
	"gantry/models/db"
)

// The archives live in PostgreSQL (module_archives, migration 00037), keyed by their
// sha256: every replica reads the one copy the first fetch kept, it survives
// restarts and needs no volume (the portal's replicas are stateless), and it is in
// the database's backups with the runs that used it. Its size is bounded twice: an
// archive is at most catalog.MaxArchiveBytes (8 MiB, a CHECK too), and there is at
// most one row per sha256 an allowlist ever pinned. Not the run artifacts' store:
// an artifact belongs to one organization's workspace, and a module to the catalog.

// stored returns the kept archive with sha256 sum (ok false when there is none),
// checked against sum: a row whose content changed under its key is refused, never
// used, and not fetched again over it.
func (a *Archives) stored(ctx context.Context, module, sum string) (data []byte, ok bool, err error) {
	var rows []struct{ Content []byte }
	if err := db.Conn(ctx, a.db).Raw("SELECT content FROM module_archives WHERE sha256 = ?", sum).Scan(&rows).Error; err != nil {
		return nil, false, fmt.Errorf("reading the archive of module %s: %w", module, db.Translate(err))
	}
	if len(rows) == 0 {
		return nil, false, nil
	}
	if got := bundle.Digest(rows[0].Content); got != sum {
		return nil, false, fmt.Errorf("module %s: the kept archive %s now has %s: the store was changed underneath, so it is refused (an operator must delete the row for Gantry to fetch it again)",
			module, sum, got)
	}
	return rows[0].Content, true, nil
}

// keep stores an archive whose sha256 was checked; an archive kept already (by
// another replica) stays as it is.
func (a *Archives) keep(ctx context.Context, sum, pkg, version, location string, data []byte) error {
	err := db.Conn(ctx, a.db).Exec(`INSERT INTO module_archives (sha256, package, version, location, size, content)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`, sum, pkg, version, location, len(data), data).Error
	if err != nil {
		return fmt.Errorf("keeping the archive of module %s: %w", pkg, db.Translate(err))
	}
	return nil
}
