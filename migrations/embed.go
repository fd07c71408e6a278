// Package migrations holds Gantry's forward-only SQL migrations. Each file is
// numbered, starts with a one-line comment saying why it exists, and is never
// edited once merged: a change to the schema is a new file.
package migrations

import "embed"

// FS holds every migration, embedded into the binary so `gantry migrate`
// needs nothing beside it.
//
//go:embed *.sql
var FS embed.FS
