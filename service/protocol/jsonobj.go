package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/holdpoint/holdpoint/internal/rawjson"
)

// rawObject is a JSON object whose members are kept as raw JSON, so that keys
// the platform does not know survive a decode/encode round trip unchanged.
type rawObject map[string]json.RawMessage

// decodeObject splits a JSON object into its members; it rejects anything that
// is not an object (null included) with a message naming what.
func decodeObject(data []byte, what string) (rawObject, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%s must be a JSON object", what)
	}
	var obj rawObject
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return obj, nil
}

// take removes key from the object and decodes it into dst when present and
// not null. It reports whether the key was present with a non-null value.
func (o rawObject) take(key string, dst any, what string) (bool, error) {
	raw, ok := o[key]
	if !ok {
		return false, nil
	}
	delete(o, key)
	if rawjson.IsNull(raw) {
		return false, nil
	}
	if dst == nil {
		return true, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, fmt.Errorf("%s.%s: %s", what, key, jsonTypeError(err))
	}
	return true, nil
}

// takeRaw removes key and returns its raw value (nil when absent or null).
func (o rawObject) takeRaw(key string) json.RawMessage {
	raw, ok := o[key]
	if !ok {
		return nil
	}
	delete(o, key)
	if rawjson.IsNull(raw) {
		return nil
	}
	return raw
}

// encodeObject writes known members (skipping nil values) followed by the
// extra members, in a stable order: known members as listed, then extras
// sorted by key (encoding/json sorts map keys).
func encodeObject(known []member, extra rawObject) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	write := func(k string, v []byte) {
		if !first {
			buf.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	for _, m := range known {
		if m.value == nil {
			continue
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		write(m.key, v)
	}
	if len(extra) > 0 {
		keys := make([]string, 0, len(extra))
		for k := range extra {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			write(k, extra[k])
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// member is one known key of an object being encoded; a nil value is omitted.
type member struct {
	key   string
	value any
}

// jsonTypeError turns encoding/json's errors into a short client-facing text.
func jsonTypeError(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("expected %s, got %s", JSONTypeName(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

// JSONTypeName names the JSON type a Go kind (reflect.Kind's String)
// decodes from, for messages that must not name Go types.
func JSONTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr", "interface":
		return "object"
	default:
		return "number"
	}
}

// JSONEqual reports whether two JSON documents are semantically equal (object
// key order and whitespace ignored). Absent and null are equal. Numbers
// are compared exactly, by their decimal value (50 equals 50.0 and 5e1),
// not as float64: 9007199254740993 and 9007199254740992 are one float64,
// and a restart must repeat the input the model asked for exactly.
func JSONEqual(a, b json.RawMessage) bool {
	if rawjson.IsNull(a) || rawjson.IsNull(b) {
		return rawjson.IsNull(a) == rawjson.IsNull(b)
	}
	va, erra := decodeExact(a)
	vb, errb := decodeExact(b)
	return erra == nil && errb == nil && exactEqual(va, vb)
}

// decodeExact decodes a JSON document keeping its numbers as written.
func decodeExact(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// exactEqual compares decoded JSON values, numbers by exact value.
func exactEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		return numbersEqual(a.String(), b.String())
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !exactEqual(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !exactEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	default:
		return a == b // string, bool, nil
	}
}

// numbersEqual compares two JSON numbers by exact value. One with a huge
// exponent (1e999999999, whose exact value would take gigabytes) equals
// only the same text.
func numbersEqual(a, b string) bool {
	if a == b {
		return true
	}
	if hugeExponent(a) || hugeExponent(b) {
		return false
	}
	ra, oka := new(big.Rat).SetString(a)
	rb, okb := new(big.Rat).SetString(b)
	return oka && okb && ra.Cmp(rb) == 0
}

// hugeExponent reports a number whose exponent is beyond what any tool's
// input means exactly (more than 400 digits either way).
func hugeExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return false
	}
	e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err != nil || e > 400 || e < -400
}
