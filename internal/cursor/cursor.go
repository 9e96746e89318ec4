// Package cursor is the one codec of the opaque keyset cursors of paged
// lists (the inbox, a session's tool calls, a webhook's deliveries): a
// position of a few text fields, joined by NUL and base64url-encoded. A
// client passes a page's nextCursor back unchanged; one it made up decodes
// to ErrMalformed, never to a position it did not get.
package cursor

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode"
)

// MaxLen bounds an encoded cursor: longer ones are refused unread.
const MaxLen = 4096

// ErrMalformed is a cursor this package did not make, or made with another
// number of fields.
var ErrMalformed = errors.New("cursor is malformed: pass the nextCursor of a previous page unchanged")

// Encode makes the cursor of the position fields. A field must not hold a
// control character (NUL separates them); Encode panics on one, as it is
// the caller's own data.
func Encode(fields ...string) string {
	for _, f := range fields {
		if strings.IndexFunc(f, unicode.IsControl) >= 0 {
			panic("cursor: a field holds a control character")
		}
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(fields, "\x00")))
}

// Decode reads a cursor of exactly n fields made by Encode.
func Decode(s string, n int) ([]string, error) {
	if len(s) > MaxLen {
		return nil, ErrMalformed
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, ErrMalformed
	}
	fields := strings.Split(string(raw), "\x00")
	if len(fields) != n {
		return nil, ErrMalformed
	}
	for _, f := range fields {
		if strings.IndexFunc(f, unicode.IsControl) >= 0 {
			return nil, ErrMalformed
		}
	}
	return fields, nil
}
