package pgstore

import (
	"bytes"
	"fmt"
)

// A resume rewrites the paused model message, moving each answered
// request's metadata.interrupt to metadata.resolvedInterrupt. A snapshot
// row keeps such a rewrite, when it resolved every paused request, as an
// edit of its ancestors' message: the JSON array ["resolved"] (migration
// 00042), some 180 bytes fewer per approval cycle than the message.
//
// The edit is applied to the message's JSON text, renaming each
// "metadata":{"interrupt": to "metadata":{"resolvedInterrupt": (1.3 µs
// for a message of two requests, where decoding it to rewrite it and
// compare took 110 µs, a seventh of a cycle's CPU). The text is only the
// means: an edit is written only when applying it to the parent's message
// gives the rewrite byte for byte and leaves no "interrupt" in it, and a
// history read back applies it to the same bytes. What SQL makes of it
// (holdpoint_history_message: every part's metadata.interrupt moved) is
// then the same message.

var (
	editResolved = []byte(`["resolved"]`)
	pausedMeta   = []byte(`"metadata":{"interrupt":`)
	resolvedMeta = []byte(`"metadata":{"resolvedInterrupt":`)
	interruptKey = []byte(`"interrupt"`)
)

// messageEdit is the edit that turns base into body, or nil when body is
// not base with every paused request resolved (or not only that).
func messageEdit(base, body []byte) []byte {
	if !bytes.Contains(base, pausedMeta) {
		return nil
	}
	edited := bytes.ReplaceAll(base, pausedMeta, resolvedMeta)
	if !bytes.Equal(edited, body) || bytes.Contains(edited, interruptKey) {
		return nil
	}
	return editResolved
}

// applyEdit is the message an edit (messageEdit) makes of base.
func applyEdit(base, edit []byte) ([]byte, error) {
	if !bytes.Equal(edit, editResolved) {
		return nil, fmt.Errorf("unknown edit %s", edit)
	}
	return bytes.ReplaceAll(base, pausedMeta, resolvedMeta), nil
}
