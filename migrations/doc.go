// Package migrations holds the goose SQL migrations, embedded in the binary.
//
// It imports goose and nothing of this module, so every binary and test
// helper can migrate a database without pulling in the runtime.
package migrations
