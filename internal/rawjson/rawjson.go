// Package rawjson holds the two questions the runtime and its store ask of
// a json.RawMessage: is it absent or null, and what is it or its default.
// It imports only the standard library.
package rawjson

import (
	"bytes"
	"encoding/json"
)

// IsNull reports whether raw is absent, blank or JSON null.
func IsNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// Or is raw, or def when raw is absent (nil).
func Or(raw json.RawMessage, def string) json.RawMessage {
	if raw == nil {
		return json.RawMessage(def)
	}
	return raw
}
