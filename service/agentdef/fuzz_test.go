package agentdef_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/holdpoint/holdpoint/service/agentdef"
)

// FuzzParse checks that Parse never panics, that its errors are *Error,
// and that what it accepts marshals and parses back unchanged. Plain
// `go test` runs the seeds only: the files of testdata and a few broken
// ones.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		if info, err := os.Stat(name); err != nil || info.IsDir() {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	for _, src := range []string{
		"",
		"{",
		"---\n---\n",
		"---\nmodel: demo\n---\n{{#if}}",
		"---\nmodel: [demo\n---\n",
		"---\nmodel: demo\nholdpoint:\n  interrupts:\n    - name: a\n      output: {schema: {x(enum): red}}\n---\n",
		`{"model": "demo", "holdpoint": {"httpTools": [{"name": "t", "url": "http://h/", "input": {"schema": "any"}, "output": {"schema": {"type": 1}}}]}}`,
	} {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := agentdef.Parse(src)
		if err != nil {
			var e *agentdef.Error
			if !errors.As(err, &e) || e != err {
				t.Fatalf("error %v is a %T, not an *Error", err, err)
			}
			if e.Message == "" || e.Line < 0 {
				t.Fatalf("error %#v", e)
			}
			return
		}
		out, err := agentdef.Marshal(d)
		if err != nil {
			t.Fatalf("Marshal of a parsed definition: %v", err)
		}
		back, err := agentdef.ParseJSON(out)
		if err != nil {
			t.Fatalf("ParseJSON(Marshal(d)): %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, d) {
			t.Fatalf("ParseJSON(Marshal(d)) = %+v, want %+v", back, d)
		}
	})
}
