package rawjson

import (
	"encoding/json"
	"testing"
)

func TestIsNull(t *testing.T) {
	for raw, want := range map[string]bool{"": true, "  ": true, "null": true, " null\n": true, "{}": false, `"null"`: false, "0": false} {
		if got := IsNull(json.RawMessage(raw)); got != want {
			t.Errorf("IsNull(%q) = %v, want %v", raw, got, want)
		}
	}
	if !IsNull(nil) {
		t.Error("IsNull(nil) = false")
	}
}

func TestOr(t *testing.T) {
	if got := string(Or(nil, "{}")); got != "{}" {
		t.Errorf("Or(nil) = %s", got)
	}
	if got := string(Or(json.RawMessage(`[1]`), "{}")); got != "[1]" {
		t.Errorf("Or([1]) = %s", got)
	}
	if got := string(Or(json.RawMessage{}, "{}")); got != "" {
		t.Errorf("Or(empty, not nil) = %q, want it kept", got)
	}
}
