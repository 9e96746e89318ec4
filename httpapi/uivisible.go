package httpapi

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// An approver must see exactly what will run: "\u202e54321" must not read
// as 12345, nor a zero-width space hide inside an account number. The
// pages show such characters as visible escapes (⟨U+202E⟩) and flag the
// values that hold them.

// hiddenWarning is the flag on a value holding hidden characters.
const hiddenWarning = "this value contains invisible or direction-changing characters"

// hiddenRune reports a character a reader cannot see or that reorders the
// text around it: controls but newline and tab (which the pages lay out),
// format characters (bidi controls and marks, zero-width characters, tag
// characters), line and paragraph separators, and the other default
// ignorables (fillers, variation selectors, which can smuggle bytes).
func hiddenRune(r rune) bool {
	if r == '\n' || r == '\t' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp,
		unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// hasHidden reports whether s holds a hidden character or bytes that are
// not UTF-8.
func hasHidden(s string) bool {
	for i, r := range s {
		if hiddenRune(r) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return true
		}
	}
	return false
}

// warnHidden is the flag a value holding hidden characters shows beside
// it, as HTML ("" for any other value).
func warnHidden(s string) template.HTML {
	if !hasHidden(s) {
		return ""
	}
	return template.HTML(`<span class="warn-hidden" role="note">⚠ ` + hiddenWarning + `</span>`)
}

// visible is s as HTML text with each hidden character (and each byte that
// is not UTF-8) shown as an escape in a style of its own. Its result is
// for element content only, never an attribute.
func visible(s string) template.HTML {
	var b strings.Builder
	plain := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		var esc string
		switch {
		case r == utf8.RuneError && n == 1:
			esc = fmt.Sprintf("⟨0x%02X⟩", s[i])
		case hiddenRune(r):
			esc = fmt.Sprintf("⟨U+%04X⟩", r)
		}
		if esc != "" {
			b.WriteString(template.HTMLEscapeString(s[plain:i]))
			b.WriteString(`<span class="hidden-char" title="invisible or direction-changing character">` + esc + `</span>`)
			plain = i + n
		}
		i += n
	}
	b.WriteString(template.HTMLEscapeString(s[plain:]))
	return template.HTML(b.String())
}

// unescapeHidden puts back, raw, the hidden characters a JSON text writes
// as \u escapes, so that visible shows and flags them however the JSON
// was written (PostgreSQL's jsonb writes them raw, Go's encoder does not).
// Other escapes stay as they are.
func unescapeHidden(s string) string {
	if !strings.Contains(s, `\u`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		if r, n := jsonEscape(s[i:]); n > 0 && hiddenRune(r) {
			b.WriteRune(r)
			i += n - 1
			continue
		}
		// Copying the escape's two bytes at once keeps "\\u202e" (an
		// escaped backslash) from being read as an escape.
		b.WriteString(s[i : i+2])
		i++
	}
	return b.String()
}

// jsonEscape decodes the \u escape (or surrogate pair of escapes) s
// starts with: the character and the escape's length (0 if none).
func jsonEscape(s string) (rune, int) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if low, ok := hex4(s[6:]); ok {
			if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
				return pair, 12
			}
		}
		return 0, 0
	}
	return r, 6
}
