package main

import (
	"testing"

	"github.com/holdpoint/holdpoint/examples/internal/exampletest"
)

// TestMain removes the example's build (made once for all its tests) at
// the end.
func TestMain(m *testing.M) { exampletest.Main(m) }
