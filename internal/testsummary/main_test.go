package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestOK"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"a","Test":"TestOK","Elapsed":0.1}
{"Action":"run","Package":"a","Test":"TestBad"}
{"Action":"output","Package":"a","Test":"TestBad","Output":"    bad_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"a","Test":"TestBad","Elapsed":0.2}
{"Action":"skip","Package":"a","Test":"TestSkipped"}
{"Action":"fail","Package":"a","Elapsed":0.4}
{"Action":"build-output","Package":"b","Output":"b/x.go:3:1: syntax error\n"}
{"Action":"fail","Package":"b","Elapsed":0}
{"Action":"output","Package":"c","Output":"?   \tc\t[no test files]\n"}
{"Action":"skip","Package":"c","Elapsed":0}
{"Action":"pass","Package":"d","Test":"TestD"}
{"Action":"pass","Package":"d","Elapsed":1.5}
`

func TestSummarize(t *testing.T) {
	var out strings.Builder
	got, err := summarize(strings.NewReader(sample), &out)
	if err != nil {
		t.Fatal(err)
	}
	if got.passed != 2 || got.failed != 2 || got.skipped != 1 {
		t.Fatalf("counts %+v, want 2 passed, 2 failed (TestBad, package b's build), 1 skipped", got)
	}
	if strings.Join(got.failedPkgs, ",") != "a,b" {
		t.Fatalf("failed packages %v", got.failedPkgs)
	}
	for _, want := range []string{"--- FAIL: a TestBad\n    bad_test.go:9: want 1, got 2\n", "syntax error", "ok\td\t1.5s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "=== RUN   TestOK") || strings.Contains(out.String(), "\tc\t") {
		t.Errorf("output shows a passing test's output or a package without tests:\n%s", out.String())
	}
}

func TestSlowest(t *testing.T) {
	got, err := summarize(strings.NewReader(sample), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printSlowest(&out, got.timed, 2)
	want := "go: the 2 slowest tests:\n     0.2s  a TestBad\n     0.1s  a TestOK\n"
	if out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	out.Reset()
	printSlowest(&out, got.timed, 0)
	if out.Len() != 0 {
		t.Fatalf("-slowest 0 printed %q", out.String())
	}
}

func TestPrintTotal(t *testing.T) {
	dir := t.TempDir()
	goCounts, jsCounts := filepath.Join(dir, "go"), filepath.Join(dir, "js")
	os.WriteFile(goCounts, []byte("10 0\n"), 0o644)
	os.WriteFile(jsCounts, []byte("5 1\n"), 0o644)
	var out strings.Builder
	if code := printTotal([]string{goCounts, jsCounts}, &out); code != 1 || out.String() != "15 passed, 1 failed\n" {
		t.Fatalf("exit %d, %q", code, out.String())
	}
	out.Reset()
	os.WriteFile(jsCounts, []byte("5 0\n"), 0o644)
	if code := printTotal([]string{goCounts, jsCounts}, &out); code != 0 || out.String() != "15 passed, 0 failed\n" {
		t.Fatalf("exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := printTotal([]string{goCounts, filepath.Join(dir, "missing")}, &out); code != 1 || !strings.HasSuffix(out.String(), "10 passed, 1 failed\n") {
		t.Fatalf("a half that never reported: exit %d, %q", code, out.String())
	}
}
