package pgstore

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/holdpoint/holdpoint/service/protocol"
)

// A resume rewrites the paused model message, moving each answered
// request's metadata.interrupt to metadata.resolvedInterrupt. A snapshot
// row keeps such a rewrite as an edit of its ancestors' message: the JSON
// array of the indexes of the parts whose interrupt it resolved (migration
// 00042), some 180 bytes fewer per approval cycle. An edit is written only
// when applying it to the message before gives the rewrite byte for byte,
// so a history read back is the history written.

// messageEdit is the edit that turns base into body, or nil when body is
// not base with some of its parts' interrupts resolved.
func messageEdit(base, body []byte) []byte {
	if !bytes.Contains(base, []byte(`"interrupt"`)) {
		return nil
	}
	var was, now protocol.Message
	if json.Unmarshal(base, &was) != nil || json.Unmarshal(body, &now) != nil || len(was.Content) != len(now.Content) {
		return nil
	}
	var parts []int
	for k, p := range was.Content {
		_, paused := p.Metadata["interrupt"]
		_, still := now.Content[k].Metadata["interrupt"]
		if paused && !still {
			parts = append(parts, k)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	edited, err := resolveParts(was, parts)
	if err != nil || !bytes.Equal(edited, body) {
		return nil
	}
	edit, err := json.Marshal(parts)
	if err != nil {
		return nil
	}
	return edit
}

// applyEdit is the message an edit (messageEdit) makes of base.
func applyEdit(base, edit []byte) ([]byte, error) {
	var parts []int
	if err := json.Unmarshal(edit, &parts); err != nil {
		return nil, fmt.Errorf("edit %s: %w", edit, err)
	}
	var m protocol.Message
	if err := json.Unmarshal(base, &m); err != nil {
		return nil, err
	}
	for _, k := range parts {
		if k < 0 || k >= len(m.Content) {
			return nil, fmt.Errorf("edit %s: the message has %d parts", edit, len(m.Content))
		}
	}
	return resolveParts(m, parts)
}

// resolveParts is the JSON of m with the interrupts of its parts at parts
// resolved. m's parts are changed.
func resolveParts(m protocol.Message, parts []int) ([]byte, error) {
	for _, k := range parts {
		m.Content[k].Metadata = protocol.ResolvedMetadata(m.Content[k].Metadata)
	}
	return json.Marshal(m)
}
