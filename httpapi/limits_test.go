package httpapi

import (
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
)

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, body string
		problem    string // a piece of the message; "" when the body passes
	}{
		{"empty", "", ""},
		{"blank", " \n\t ", ""},
		{"object", `{"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}`, ""},
		{"scalars", `[true,false,null,"s",0,-0,1.5,-2e10,1E+2,0e-5,1e308,4.9e-324,-1e-300]`, ""},
		{"top-level string", `"x"`, ""},
		{"top-level number", `42`, ""},
		{"escapes", `{"a":"\\u0000 is a backslash and text","b":"\u0001\u00e9\ud83d\ude00\"\n"}`, ""},
		{"same name in sibling objects", `[{"a":1},{"a":2}]`, ""},
		{"same name at two levels", `{"a":{"a":1}}`, ""},
		{"depth at the limit", deep(MaxJSONDepth), ""},
		{"brackets in a string", `{"a":"` + strings.Repeat("[{", 500) + `"}`, ""},
		{"number at the length limit", strings.Repeat("1", MaxJSONNumberLength-4) + ".5e0", ""},
		{"exponent at the limit", `0e-1000`, ""},
		{"zero with a large exponent", `0.000e-400`, ""},

		{"duplicate member", `{"output":{"approved":false},"output":{"approved":true}}`, "duplicate object member name /output"},
		{"duplicate nested member", `{"a":{"b":[1,{"c":1,"c":2}]}}`, "duplicate object member name /a/b/1/c"},
		{"duplicate by escape", `{"a":1,"\u0061":2}`, "duplicate"},
		{"invalid UTF-8 in a value", "{\"a\":\"caf\xe9\"}", "invalid UTF-8 (at byte"},
		{"invalid UTF-8 in a name", "{\"\xff\":1}", "invalid UTF-8"},
		{"overlong UTF-8", "\"\xc0\xaf\"", "invalid UTF-8"},
		{"lone high surrogate", `"\ud800"`, "surrogate"},
		{"lone low surrogate", `{"a":"\udc00x"}`, "surrogate"},
		{"depth over the limit", deep(MaxJSONDepth + 1), "nested deeper than 64 levels"},
		{"deep unterminated", strings.Repeat("[", 100000), "nested deeper than 64 levels"},
		{"NUL in a value", `{"a":{"b":"x\u0000y"}}`, "the string at /a/b contains U+0000"},
		{"NUL in a name", `{"a\u0000":1}`, "contains U+0000"},
		{"NUL after an escaped backslash", `["\\\u0000"]`, "contains U+0000"},
		{"NUL at the top level", `"\u0000"`, "the string at the top level contains U+0000"},
		{"number too long", `[` + strings.Repeat("1", MaxJSONNumberLength+1) + `]`, "129 characters long"},
		{"overflow", `{"n":1e999999}`, "the number at /n is out of range"},
		{"overflow of float64 only", `1.8e308`, "out of range"},
		{"negative overflow", `-1e400`, "out of range"},
		{"underflow", `{"n":1e-400}`, "too close to zero"},
		{"zero with zeros and a huge exponent", `0.000e-4000`, "exponent"},
		{"zero with a huge exponent", `0e-99999`, "exponent beyond ±1000"},
		{"zero with an exponent past int", `0e99999999999999999999`, "exponent beyond"},
		{"syntax error", `{"data": nope}`, "invalid JSON body: invalid character"},
		{"raw control character", "\"a\x01\"", "invalid JSON body"},
		{"truncated", `{"data": {`, "unexpected end of input"},
		{"trailing comma", `{"a":1,}`, "invalid JSON body"},
		{"trailing garbage", `{} x`, "invalid JSON body"},
		{"two values", `{} {}`, "second JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkJSON([]byte(tc.body))
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want a refusal mentioning %q", tc.problem)
			}
			e := service.AsError(err)
			if e.Status != service.CodeInvalidArgument || !strings.Contains(e.Message, tc.problem) {
				t.Fatalf("%s %q, want INVALID_ARGUMENT mentioning %q", e.Status, e.Message, tc.problem)
			}
		})
	}
}

func TestCleanPointer(t *testing.T) {
	t.Parallel()
	if got := cleanPointer("/a\x00b/\nc"); got != "/a\uFFFDb/\uFFFDc" {
		t.Errorf("control characters: %q", got)
	}
	long := "/" + strings.Repeat("é", 300)
	got := cleanPointer(long)
	if len(got) > maxPointerLength+len("…") || !strings.HasSuffix(got, "…") || strings.ContainsRune(got, '\uFFFD') {
		t.Errorf("long pointer cut to %q (%d bytes)", got, len(got))
	}
}

func TestIsLoopbackHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost:8080": true, "127.0.0.1": true, "127.0.0.1:8080": true,
		"127.5.6.7:1": true, "[::1]": true, "[::1]:8080": true,
		"": false, "evil.example": false, "evil.example:8080": false, "localhost.": false,
		"localhost.evil.example": false, "10.0.0.1:8080": false, "0.0.0.0:8080": false,
		"[::2]:8080": false, "[fe80::1%25lo]:80": false, "128.0.0.1": false, "127.0.0.1.nip.io": false,
	} {
		if got := isLoopbackHost(host); got != want {
			t.Errorf("isLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestIsJSONContentType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{[]string{"application/json"}, true},
		{[]string{"application/json; charset=utf-8"}, true},
		{[]string{"Application/JSON;charset=UTF-8"}, true},
		{nil, false},
		{[]string{""}, false},
		{[]string{"text/plain"}, false},
		{[]string{"application/x-www-form-urlencoded"}, false},
		{[]string{"multipart/form-data; boundary=x"}, false},
		{[]string{"application/json-patch+json"}, false},
		{[]string{"application/json", "application/json"}, false},
		{[]string{"application/json; charset"}, false},
	} {
		if got := isJSONContentType(tc.values); got != tc.want {
			t.Errorf("isJSONContentType(%q) = %v, want %v", tc.values, got, tc.want)
		}
	}
}
