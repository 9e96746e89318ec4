package auth

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/holdpoint/holdpoint/service/store"
)

// MaxEndUserBytes bounds an end user id (X-End-User, a token subject).
const MaxEndUserBytes = 256

// ValidateScope checks a scope's spelling: 1-64 bytes of letters, digits
// and ":._-" (empty allowed when optional).
func ValidateScope(s string, optional bool) error {
	if s == "" && optional {
		return nil
	}
	if s == "" || len(s) > 64 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:._-") != "" {
		return fmt.Errorf("scope %q must be 1-64 letters, digits or :._-", s)
	}
	return nil
}

// ValidateEndUser checks an end user id (X-End-User, a token's subject):
// 1 to 256 bytes of printable UTF-8.
func ValidateEndUser(id string) error {
	if id == "" || len(id) > MaxEndUserBytes {
		return store.Errorf(store.CodeInvalidArgument, "end user id must be 1-%d bytes", MaxEndUserBytes)
	}
	if !utf8.ValidString(id) {
		return store.Errorf(store.CodeInvalidArgument, "end user id must be valid UTF-8")
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return store.Errorf(store.CodeInvalidArgument, "end user id must be printable characters")
		}
	}
	return nil
}
