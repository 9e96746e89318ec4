//go:build !bench

package app

import (
	"fmt"
	"io"
)

// benchCommand stands in for `platform bench` in the binary users run: the
// benchmark (internal/bench, its load generators and fault proxies) is
// built only with -tags bench, as `make bench` does, so a deployment does
// not ship it.
func benchCommand(_ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "platform bench: this binary is built without the benchmark; run make bench, or build with go build -tags bench ./cmd/platform")
	return 2
}
