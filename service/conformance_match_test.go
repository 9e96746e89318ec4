package service_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// This file holds the comparison machinery of the conformance harness
// (TestConformance in conformance_test.go) and the tests of that machinery:
// a matcher that accepted everything would make the suite pass silently.
//
// Values are compared in their generic JSON form: objects are
// map[string]any, arrays []any, numbers float64. Expectations come from YAML
// and are normalised by normalizeYAML; actual values are Go values marshalled
// with encoding/json and decoded again by toGeneric.

// normalizeYAML turns a value decoded by yaml.v3 into the generic JSON form:
// integers become float64 (as encoding/json decodes numbers) and maps with
// non-string keys get string keys.
func normalizeYAML(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeYAML(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = normalizeYAML(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeYAML(e)
		}
		return out
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float32:
		return float64(x)
	default:
		return v
	}
}

// toGeneric marshals v with encoding/json and decodes it into the generic
// JSON form, so that assertions see exactly what a client would see on the
// wire.
func toGeneric(v any) (any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// compact renders a generic value as one line of JSON for failure messages.
func compact(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	const limit = 1500
	if len(raw) > limit {
		return string(raw[:limit]) + "…"
	}
	return string(raw)
}

// matchContains checks that actual contains expected, with the semantics of
// the Genkit reference harnesses (js/ai/tests/agents_spec_test.ts,
// assertContains):
//
//   - object: every key of expected must match the same key of actual,
//     recursively; actual may have more keys;
//   - array: the expected items must appear in actual in the same order, as a
//     (not necessarily contiguous) subsequence, each item matched by
//     matchContains;
//   - scalar: equal (numbers compared as float64);
//   - null: actual must be absent or null. (The JS harness ignores a null
//     expectation altogether; this one is stricter.)
//
// It returns nil on a match, otherwise an error naming the first mismatch
// by its path.
func matchContains(actual, expected any, path string) error {
	if path == "" {
		path = "$"
	}
	switch exp := expected.(type) {
	case nil:
		if actual != nil {
			return fmt.Errorf("%s: expected absent or null, got %s", path, compact(actual))
		}
		return nil
	case map[string]any:
		act, ok := actual.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: expected an object, got %s", path, describe(actual))
		}
		keys := make([]string, 0, len(exp))
		for k := range exp {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := matchContains(act[k], exp[k], path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		act, ok := actual.([]any)
		if !ok {
			return fmt.Errorf("%s: expected an array, got %s", path, describe(actual))
		}
		return matchSubsequence(act, exp, path)
	default:
		if !scalarEqual(actual, expected) {
			return fmt.Errorf("%s: expected %s, got %s", path, compact(expected), describe(actual))
		}
		return nil
	}
}

// matchSubsequence checks that every expected item matches an item of
// actual, in order, each actual item used at most once. Taking the earliest
// match for each expected item is optimal for this, so no backtracking is
// needed.
func matchSubsequence(actual, expected []any, path string) error {
	next := 0
	for i, exp := range expected {
		found := false
		var reasons []string
		for next < len(actual) {
			err := matchContains(actual[next], exp, fmt.Sprintf("%s[%d]", path, next))
			next++
			if err == nil {
				found = true
				break
			}
			if len(reasons) < 3 {
				reasons = append(reasons, err.Error())
			}
		}
		if !found {
			msg := fmt.Sprintf("%s: expected item %d %s not found in order in actual array %s",
				path, i, compact(exp), compact(actual))
			if len(reasons) > 0 {
				msg += "\n      candidates: " + strings.Join(reasons, "\n      ")
			}
			return errors.New(msg)
		}
	}
	return nil
}

func scalarEqual(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	}
	return false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func describe(v any) string {
	if v == nil {
		return "nothing (absent or null)"
	}
	return compact(v)
}

// checkChunks compares the stream chunks of a send step with expectChunks,
// as the reference harness does: same number of chunks in the same order;
// an expected turnEnd only needs a turnEnd chunk (its snapshotId is dynamic)
// plus an equal finishReason when the spec gives one; modelChunk, artifact
// and customPatch expectations use matchContains on that member (so a chunk
// of another kind, which lacks the member, does not match). It returns one
// message per mismatch.
func checkChunks(actual, expected []any) []string {
	if len(actual) != len(expected) {
		return []string{fmt.Sprintf("expected %d chunks, got %d\n    actual:   %s\n    expected: %s",
			len(expected), len(actual), compact(actual), compact(expected))}
	}
	var problems []string
	for i := range expected {
		exp, _ := expected[i].(map[string]any)
		act, _ := actual[i].(map[string]any)
		if exp == nil {
			problems = append(problems, fmt.Sprintf("chunk[%d]: expectation %s is not an object", i, compact(expected[i])))
			continue
		}
		if act == nil {
			problems = append(problems, fmt.Sprintf("chunk[%d]: actual %s is not an object", i, compact(actual[i])))
			continue
		}
		var err error
		switch {
		case hasKey(exp, "turnEnd"):
			te, present := act["turnEnd"]
			if !present || te == nil {
				err = fmt.Errorf("chunk[%d]: expected a turnEnd, got %s", i, compact(act))
				break
			}
			expTE, _ := exp["turnEnd"].(map[string]any)
			if fr, ok := expTE["finishReason"]; ok && fr != nil {
				actTE, _ := te.(map[string]any)
				if !scalarEqual(actTE["finishReason"], fr) {
					err = fmt.Errorf("chunk[%d]: expected turnEnd.finishReason %s, got %s", i, compact(fr), describe(actTE["finishReason"]))
				}
			}
		case hasKey(exp, "modelChunk"):
			err = matchContains(act["modelChunk"], exp["modelChunk"], fmt.Sprintf("chunk[%d].modelChunk", i))
		case hasKey(exp, "artifact"):
			err = matchContains(act["artifact"], exp["artifact"], fmt.Sprintf("chunk[%d].artifact", i))
		case hasKey(exp, "customPatch"):
			err = matchContains(act["customPatch"], exp["customPatch"], fmt.Sprintf("chunk[%d].customPatch", i))
		default:
			err = matchContains(act, exp, fmt.Sprintf("chunk[%d]", i))
		}
		if err != nil {
			problems = append(problems, err.Error()+"\n    actual chunks: "+compact(actual))
		}
	}
	return problems
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

var (
	wholeTemplateRE  = regexp.MustCompile(`^\{\{(\w+)\}\}$`)
	inlineTemplateRE = regexp.MustCompile(`\{\{(\w+)\}\}`)
)

// resolveTemplates replaces `{{name}}` references anywhere in v by captured
// values. A string that is exactly one reference becomes the captured value
// itself (which may be an object, such as a captured state); references
// inside a longer string are replaced by the value's text (strings as is,
// anything else as JSON). An unknown name is an error.
func resolveTemplates(v any, captures map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := wholeTemplateRE.FindStringSubmatch(x); m != nil {
			val, ok := captures[m[1]]
			if !ok {
				return nil, fmt.Errorf("template reference {{%s}} not found in captures", m[1])
			}
			return val, nil
		}
		var missing error
		out := inlineTemplateRE.ReplaceAllStringFunc(x, func(ref string) string {
			name := inlineTemplateRE.FindStringSubmatch(ref)[1]
			val, ok := captures[name]
			if !ok {
				missing = fmt.Errorf("template reference {{%s}} not found in captures", name)
				return ref
			}
			if s, ok := val.(string); ok {
				return s
			}
			return compact(val)
		})
		if missing != nil {
			return nil, missing
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := resolveTemplates(e, captures)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := resolveTemplates(e, captures)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	default:
		return v, nil
	}
}

// TestConformanceMatcher checks the harness's own comparison functions, in
// particular that wrong expectations are rejected.
func TestConformanceMatcher(t *testing.T) {
	t.Parallel()
	gen := func(s string) any {
		t.Helper()
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("bad test JSON %s: %v", s, err)
		}
		return v
	}
	// A realistic actual output state.
	state := gen(`{
		"sessionId": "s1",
		"custom": {"counter": 2, "status": "done"},
		"messages": [
			{"role": "user", "content": [{"text": "first"}]},
			{"role": "model", "content": [{"text": "done"}], "metadata": {"x": 1}},
			{"role": "user", "content": [{"text": "second"}]},
			{"role": "model", "content": [{"toolRequest": {"name": "t", "ref": "r1", "input": {}}, "metadata": {"interrupt": true}}]}
		]
	}`)

	matches := []struct {
		name     string
		expected any
	}{
		{"empty object", map[string]any{}},
		{"scalar member", map[string]any{"sessionId": "s1"}},
		{"int from YAML equals float from JSON", normalizeYAML(map[string]any{"custom": map[string]any{"counter": 2}})},
		{"partial object", map[string]any{"custom": map[string]any{"status": "done"}}},
		{"non-contiguous subsequence", normalizeYAML(map[string]any{"messages": []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"text": "first"}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"text": "second"}}},
		}})},
		{"item without role or metadata", map[string]any{"messages": []any{
			map[string]any{"content": []any{map[string]any{"toolRequest": map[string]any{"name": "t", "ref": "r1"}}}},
		}}},
		{"empty expected array", map[string]any{"messages": []any{}}},
		{"null means absent", map[string]any{"artifacts": nil}},
	}
	for _, m := range matches {
		if err := matchContains(state, m.expected, "state"); err != nil {
			t.Errorf("%s: expected a match, got %v", m.name, err)
		}
	}

	mismatches := []struct {
		name     string
		expected any
	}{
		{"wrong scalar", map[string]any{"sessionId": "s2"}},
		{"wrong number", normalizeYAML(map[string]any{"custom": map[string]any{"counter": 1}})},
		{"number vs string", map[string]any{"custom": map[string]any{"counter": "2"}}},
		{"missing key", map[string]any{"custom": map[string]any{"missing": true}}},
		{"null but present", map[string]any{"sessionId": nil}},
		{"object vs array", map[string]any{"messages": map[string]any{}}},
		{"array vs object", map[string]any{"custom": []any{}}},
		{"wrong order", map[string]any{"messages": []any{
			map[string]any{"content": []any{map[string]any{"text": "second"}}},
			map[string]any{"content": []any{map[string]any{"text": "first"}}},
		}}},
		{"item used twice", map[string]any{"messages": []any{
			map[string]any{"content": []any{map[string]any{"text": "first"}}},
			map[string]any{"content": []any{map[string]any{"text": "first"}}},
		}}},
		{"absent item", map[string]any{"messages": []any{
			map[string]any{"role": "system"},
		}}},
		{"wrong nested part", map[string]any{"messages": []any{
			map[string]any{"role": "model", "content": []any{map[string]any{"text": "hello"}}},
		}}},
		{"whole value wrong type", "state"},
	}
	for _, m := range mismatches {
		if err := matchContains(state, m.expected, "state"); err == nil {
			t.Errorf("%s: expected a mismatch for %s, got a match", m.name, compact(m.expected))
		}
	}
	if err := matchContains(nil, map[string]any{}, "x"); err == nil {
		t.Error("an object expectation matched an absent value")
	}

	// Chunks.
	actualChunks := gen(`[
		{"modelChunk": {"role": "model", "index": 0, "content": [{"text": "hel"}]}},
		{"customPatch": [{"op": "replace", "path": "", "value": {"counter": 1}}]},
		{"artifact": {"name": "doc1", "parts": [{"text": "v1"}]}},
		{"turnEnd": {"snapshotId": "abc", "finishReason": "stop"}}
	]`).([]any)
	good := normalizeYAML([]any{
		map[string]any{"modelChunk": map[string]any{"index": 0, "content": []any{map[string]any{"text": "hel"}}}},
		map[string]any{"customPatch": []any{map[string]any{"op": "replace", "path": "", "value": map[string]any{"counter": 1}}}},
		map[string]any{"artifact": map[string]any{"name": "doc1"}},
		map[string]any{"turnEnd": map[string]any{"finishReason": "stop"}},
	}).([]any)
	if p := checkChunks(actualChunks, good); len(p) != 0 {
		t.Errorf("matching chunks rejected: %v", p)
	}
	if p := checkChunks(actualChunks, good[:3]); len(p) == 0 {
		t.Error("a missing chunk was accepted")
	}
	if p := checkChunks(nil, []any{}); len(p) != 0 {
		t.Errorf("no chunks vs expectChunks [] rejected: %v", p)
	}
	if p := checkChunks(actualChunks[:1], []any{}); len(p) == 0 {
		t.Error("an extra chunk was accepted against expectChunks []")
	}
	badChunks := map[string][]any{
		"turnEnd finishReason": {good[0], good[1], good[2], map[string]any{"turnEnd": map[string]any{"finishReason": "interrupted"}}},
		"kind swapped":         {good[1], good[0], good[2], good[3]},
		"turnEnd expected":     {good[0], good[1], good[3], good[3]},
		"artifact text":        {good[0], good[1], map[string]any{"artifact": map[string]any{"parts": []any{map[string]any{"text": "v2"}}}}, good[3]},
		"patch value":          {good[0], normalizeYAML(map[string]any{"customPatch": []any{map[string]any{"op": "replace", "path": "", "value": map[string]any{"counter": 2}}}}), good[2], good[3]},
		"patch path":           {good[0], map[string]any{"customPatch": []any{map[string]any{"op": "replace", "path": "/counter"}}}, good[2], good[3]},
	}
	for name, exp := range badChunks {
		if p := checkChunks(actualChunks, exp); len(p) == 0 {
			t.Errorf("%s: wrong chunk expectation accepted", name)
		}
	}
	// A turnEnd without finishReason in the spec accepts any finish reason.
	if p := checkChunks(actualChunks[3:], []any{map[string]any{"turnEnd": map[string]any{}}}); len(p) != 0 {
		t.Errorf("turnEnd {} rejected: %v", p)
	}

	// Templates.
	captures := map[string]any{"snap1": "abc", "state1": map[string]any{"sessionId": "s1"}}
	got, err := resolveTemplates(map[string]any{
		"init":  map[string]any{"state": "{{state1}}"},
		"id":    "{{snap1}}",
		"text":  "id={{snap1}} state={{state1}}",
		"list":  []any{"{{snap1}}", 1.0},
		"plain": "{ not a template }",
	}, captures)
	if err != nil {
		t.Fatalf("resolveTemplates: %v", err)
	}
	want := map[string]any{
		"init":  map[string]any{"state": map[string]any{"sessionId": "s1"}},
		"id":    "abc",
		"text":  `id=abc state={"sessionId":"s1"}`,
		"list":  []any{"abc", 1.0},
		"plain": "{ not a template }",
	}
	if compact(got) != compact(want) {
		t.Errorf("resolveTemplates = %s, want %s", compact(got), compact(want))
	}
	if _, err := resolveTemplates("{{nope}}", captures); err == nil {
		t.Error("an unknown whole-string template was accepted")
	}
	if _, err := resolveTemplates("x {{nope}}", captures); err == nil {
		t.Error("an unknown inline template was accepted")
	}
}
