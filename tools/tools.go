//go:build tools

// Package tools pins the code generators the project runs with `go tool`,
// kept in their own module so their dependencies stay out of the server's.
package tools
