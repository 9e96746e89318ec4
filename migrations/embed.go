package migrations

import "embed"

// FS is the directory of migration files.
//
//go:embed *.sql
var FS embed.FS
