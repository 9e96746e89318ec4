//go:build tools

// Package tools pins the tools the project runs with `go tool` (sqlc, the
// code generator, and staticcheck, the linter), kept in their own module so
// their dependencies stay out of the server's.
package tools
