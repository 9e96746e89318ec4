package schema

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	s := json.RawMessage(`{"type":"object","properties":{"approved":{"type":"boolean"},"amount":{"type":"number"}},"required":["approved"]}`)
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"matches", `{"approved":true}`, nil},
		{"wrong type", `{"approved":"no"}`, []string{"at '/approved': got string, want boolean"}},
		{"two violations", `{"approved":1,"amount":"x"}`, []string{"at '/amount': got string, want number", "at '/approved': got number, want boolean"}},
		{"missing", `{}`, []string{"at '': missing property 'approved'"}},
		{"not JSON", `{`, []string{"not valid JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Validate(s, json.RawMessage(c.doc))
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("Validate(%s) = %q, want %q", c.doc, got, c.want)
			}
		})
	}
	for _, none := range []string{"", "null"} {
		if v := Validate(json.RawMessage(none), json.RawMessage(`"anything"`)); v != nil {
			t.Errorf("no schema (%q): %q, want no violations", none, v)
		}
	}
}

func TestCheck(t *testing.T) {
	if err := Check(json.RawMessage(`{"type":"string","maxLength":3}`)); err != nil {
		t.Errorf("a valid schema: %v", err)
	}
	err := Check(json.RawMessage(`{"type":"objekt"}`))
	if err == nil || !strings.HasPrefix(err.Error(), "at '/type': value must be one of") {
		t.Errorf("an invalid type: %v", err)
	}
	// A schema may not read files or the network.
	for _, ref := range []string{"file:///etc/passwd", "http://127.0.0.1:1/x.json"} {
		err := Check(json.RawMessage(`{"$ref":"` + ref + `"}`))
		if err == nil || strings.Contains(err.Error(), "root:") {
			t.Errorf("$ref %s: %v, want refused without reading it", ref, err)
		}
		if v := Validate(json.RawMessage(`{"$ref":"`+ref+`"}`), json.RawMessage(`{}`)); len(v) == 0 {
			t.Errorf("Validate with $ref %s accepted a document", ref)
		}
	}
	if err := Check(json.RawMessage(`{"$ref":"#/$defs/a","$defs":{"a":{"type":"string"}}}`)); err != nil {
		t.Errorf("a reference within the schema: %v", err)
	}
}

func TestCompileCaches(t *testing.T) {
	raw := json.RawMessage(`{"type":"integer","minimum":7}`)
	a, err := Compile(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("the second Compile of the same text compiled again")
	}
}
