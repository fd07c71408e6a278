package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"gantry/models/db"
)

func runMigrate(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	var dsn string
	f := newFlags("migrate", "Apply pending database migrations (Gantry's own, forward-only) and exit.", stdout)
	f.str(&dsn, "database-url", "GANTRY_DATABASE_URL", "", "PostgreSQL URL")
	if err := f.parse(args); err != nil {
		return err
	}
	if dsn == "" {
		return errors.New("--database-url (or $GANTRY_DATABASE_URL) is required")
	}
	if err := migrateDatabase(ctx, dsn); err != nil {
		return err
	}
	logger.Info("migrations applied")
	return nil
}

func migrateDatabase(ctx context.Context, dsn string) error {
	sqlDB, err := db.OpenSQL(dsn)
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	return db.Migrate(ctx, sqlDB)
}
