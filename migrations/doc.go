// Package migrations holds stashd's PostgreSQL schema as numbered SQL files
// in tern's format, embedded into the binary. It owns no code beyond the
// embedding: store applies the files at start-up under tern's advisory lock,
// so several daemon instances starting at once migrate exactly once.
package migrations

import "embed"

// FS holds the migration files (NNN_name.sql).
//
//go:embed *.sql
var FS embed.FS
