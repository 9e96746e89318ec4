// Command testsummary reads `go test -json` on stdin and prints what a
// person running `make test` needs: one line per package as it finishes,
// the output of every failed test in full, and at the end the counts. It
// exits 1 when anything failed (a test, or a package that did not build or
// whose binary died outside a test), else 0.
//
//	go test -json ./... | go run ./internal/testsummary -counts FILE
//
// With -slowest N it ends with the N slowest top-level tests and their
// times, to show where a run's time goes. With -counts it also writes "PASSED FAILED" to FILE, for the Makefile to
// add the JS client suite's figures to. With -total FILE... it reads such
// files instead, prints "N passed, N failed" and exits 1 if N failed > 0.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// tally is what a run counted.
type tally struct {
	passed, failed, skipped int
	failedPkgs              []string
	timed                   []timedTest // top-level tests that passed or failed
}

// timedTest is how long one top-level test took (its subtests included;
// a parallel test's time counts from its start, pauses included).
type timedTest struct {
	name    string // package test
	elapsed float64
}

func main() {
	counts := flag.String("counts", "", "write \"PASSED FAILED\" to this file")
	total := flag.Bool("total", false, "add up the count files given as arguments and print the summary line")
	slowest := flag.Int("slowest", 0, "end with the N slowest top-level tests")
	flag.Parse()
	if *total {
		os.Exit(printTotal(flag.Args(), os.Stdout))
	}
	t, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if *counts != "" {
		if err := os.WriteFile(*counts, fmt.Appendf(nil, "%d %d\n", t.passed, t.failed), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	}
	printSlowest(os.Stdout, t.timed, *slowest)
	fmt.Printf("go: %d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped)
	if t.failed > 0 {
		fmt.Printf("go: failed in %s\n", strings.Join(t.failedPkgs, ", "))
		os.Exit(1)
	}
}

// summarize reads the events, printing as it goes, and returns the counts.
func summarize(r io.Reader, w io.Writer) (tally, error) {
	var t tally
	output := map[string]*strings.Builder{} // package + test -> its output
	testFailed := map[string]bool{}         // package -> a test of it failed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A line that is not JSON (go vet's or the linker's output
			// before the events start) is shown as it is.
			fmt.Fprintln(w, sc.Text())
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch e.Action {
		case "output", "build-output":
			b := output[key]
			if b == nil {
				b = &strings.Builder{}
				output[key] = b
			}
			b.WriteString(e.Output)
			continue
		case "pass", "fail", "skip":
		default:
			continue
		}
		if e.Test != "" {
			count(&t, e.Action)
			if e.Action != "skip" && !strings.Contains(e.Test, "/") {
				t.timed = append(t.timed, timedTest{e.Package + " " + e.Test, e.Elapsed})
			}
			if e.Action == "fail" {
				testFailed[e.Package] = true
				fmt.Fprintf(w, "--- FAIL: %s %s\n%s", e.Package, e.Test, text(output[key]))
			}
			delete(output, key)
			continue
		}
		packageDone(w, &t, e, text(output[key]), testFailed[e.Package])
		delete(output, key)
	}
	sort.Strings(t.failedPkgs)
	return t, sc.Err()
}

// packageDone prints a package's result line. A package that failed with
// no failed test (it did not build, or its binary died) counts as one
// failure and shows its own output.
func packageDone(w io.Writer, t *tally, e event, out string, anyTestFailed bool) {
	switch {
	case e.Action == "fail":
		t.failedPkgs = append(t.failedPkgs, e.Package)
		if !anyTestFailed {
			t.failed++
			fmt.Fprintf(w, "--- FAIL: %s (no test failed: the build or the test binary did)\n%s", e.Package, out)
		}
		fmt.Fprintf(w, "FAIL\t%s\t%.1fs\n", e.Package, e.Elapsed)
	case strings.Contains(out, "[no test files]"):
	default:
		fmt.Fprintf(w, "ok\t%s\t%.1fs\n", e.Package, e.Elapsed)
	}
}

// printSlowest prints the n slowest of the timed tests, slowest first.
func printSlowest(w io.Writer, timed []timedTest, n int) {
	if n <= 0 || len(timed) == 0 {
		return
	}
	sort.SliceStable(timed, func(i, j int) bool { return timed[i].elapsed > timed[j].elapsed })
	fmt.Fprintf(w, "go: the %d slowest tests:\n", min(n, len(timed)))
	for _, tt := range timed[:min(n, len(timed))] {
		fmt.Fprintf(w, "%8.1fs  %s\n", tt.elapsed, tt.name)
	}
}

func count(t *tally, action string) {
	switch action {
	case "pass":
		t.passed++
	case "fail":
		t.failed++
	case "skip":
		t.skipped++
	}
}

func text(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	return b.String()
}

// printTotal adds up "PASSED FAILED" files; a missing or unreadable one
// (a half that never reported) counts as one failure.
func printTotal(files []string, w io.Writer) int {
	var passed, failed int
	for _, f := range files {
		var p, n int
		b, err := os.ReadFile(f)
		if err == nil {
			_, err = fmt.Sscan(string(b), &p, &n)
		}
		if err != nil {
			fmt.Fprintf(w, "testsummary: no counts in %s: counted as a failure\n", f)
			n = 1
		}
		passed += p
		failed += n
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}
