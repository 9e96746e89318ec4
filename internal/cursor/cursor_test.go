package cursor

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	for _, fields := range [][]string{{"2026-12-02T10:00:00Z", "0194f3a2-7c1e-7000-8000-000000000001"}, {"a"}, {"", "x", "turn-1"}} {
		got, err := Decode(Encode(fields...), len(fields))
		if err != nil || !slices.Equal(got, fields) {
			t.Errorf("Decode(Encode(%q)) = %q, %v", fields, got, err)
		}
	}
}

func TestDecodeRefusesWhatItDidNotMake(t *testing.T) {
	raw := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, s := range map[string]string{
		"not base64":      "!!!",
		"too few fields":  Encode("a"),
		"too many fields": Encode("a", "b", "c"),
		"control char":    raw("a\x00b\nc"),
		"too long":        strings.Repeat("A", MaxLen+1),
	} {
		if _, err := Decode(s, 2); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

func TestEncodePanicsOnControlCharacters(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	Encode("a\x00b")
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode("x", "y"))
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := Decode(s, 2)
		if err != nil {
			return
		}
		if again, err := Decode(Encode(fields...), 2); err != nil || !slices.Equal(again, fields) {
			t.Fatalf("a decoded cursor %q does not round-trip: %q, %v", fields, again, err)
		}
	})
}
