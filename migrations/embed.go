// Package migrations holds the goose SQL migrations, embedded in the binary.
package migrations

import "embed"

// FS is the directory of migration files.
//
//go:embed *.sql
var FS embed.FS
