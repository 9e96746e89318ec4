package httpapi

import (
	"strings"
	"testing"
)

// TestVisibleHiddenCharacters: every kind of character that could make an
// approver read something other than what will run comes out as a visible
// escape, and the value is flagged; ordinary text, right-to-left scripts
// included, comes out as it is.
func TestVisibleHiddenCharacters(t *testing.T) {
	t.Parallel()
	for payload, esc := range map[string]string{
		"\u202e54321":                   "⟨U+202E⟩54321", // right-to-left override: reads 12345
		"\u202aa\u202b\u202c":           "⟨U+202A⟩a⟨U+202B⟩⟨U+202C⟩",
		"\u202dx":                       "⟨U+202D⟩x",
		"\u2066a\u2067\u2068\u2069":     "⟨U+2066⟩a⟨U+2067⟩⟨U+2068⟩⟨U+2069⟩", // isolates
		"\u200e\u200f\u061c":            "⟨U+200E⟩⟨U+200F⟩⟨U+061C⟩",          // marks
		"12\u200b34":                    "12⟨U+200B⟩34",                      // zero-width space
		"\u200c\u200d\u2060\ufeff":      "⟨U+200C⟩⟨U+200D⟩⟨U+2060⟩⟨U+FEFF⟩",
		"soft\u00adhyphen":              "soft⟨U+00AD⟩hyphen",    // another format character
		"tag\U000E0041\U000E007F":       "tag⟨U+E0041⟩⟨U+E007F⟩", // tag characters smuggle ASCII
		"bell\a\x00\r\x1b[2J\x7f\u0085": "bell⟨U+0007⟩⟨U+0000⟩⟨U+000D⟩⟨U+001B⟩[2J⟨U+007F⟩⟨U+0085⟩",
		"line\u2028para\u2029":          "line⟨U+2028⟩para⟨U+2029⟩",
		"filler\u3164\u115f":            "filler⟨U+3164⟩⟨U+115F⟩",
		"pay\ufe0f":                     "pay⟨U+FE0F⟩",
		"bad\xffutf8":                   "bad⟨0xFF⟩utf8",
	} {
		got := string(visible(payload))
		want := `<span class="hidden-char" title="invisible or direction-changing character">`
		if !strings.Contains(got, want) || strings.ReplaceAll(strings.ReplaceAll(got, want, ""), "</span>", "") != esc {
			t.Errorf("visible(%+q) = %s, want %s", payload, got, esc)
		}
		if !hasHidden(payload) || !strings.Contains(string(warnHidden(payload)), hiddenWarning) {
			t.Errorf("%+q is not flagged", payload)
		}
		for _, r := range got {
			if hiddenRune(r) {
				t.Errorf("visible(%+q) still holds %U", payload, r)
			}
		}
	}
	for text, want := range map[string]string{
		"line one\n\ttwo":       "line one\n\ttwo",
		"café, שלום, مرحبا, 日本": "café, שלום, مرحبا, 日本",
		"<b>&\"'</b>":           "&lt;b&gt;&amp;&#34;&#39;&lt;/b&gt;",
		"replacement \ufffd":    "replacement \ufffd",
	} {
		if got := string(visible(text)); got != want || hasHidden(text) || warnHidden(text) != "" {
			t.Errorf("visible(%+q) = %q (flagged %v), want %q", text, got, hasHidden(text), want)
		}
	}
}

// TestUnescapeHidden: a JSON text that writes a hidden character as a \u
// escape shows it as the raw one would be, so it is escaped and flagged the
// same; an escaped backslash and other escapes are left alone.
func TestUnescapeHidden(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"account":"\u202e54321"}`:       "{\"account\":\"\u202e54321\"}",
		`{"a\u200bb":1}`:                  "{\"a\u200bb\":1}",
		`"\udb40\udc41tag"`:               "\"\U000E0041tag\"",
		`"\u0007\n\u000a"`:                "\"\a\\n\\u000a\"",
		`"\\u202e is text"`:               `"\\u202e is text"`,
		`"caf\u00e9 \ud83d\ude00 \ud800"`: `"caf\u00e9 \ud83d\ude00 \ud800"`,
		`"\u12"`:                          `"\u12"`,
	} {
		if got := unescapeHidden(in); got != want {
			t.Errorf("unescapeHidden(%s) = %+q, want %+q", in, got, want)
		}
	}
}
