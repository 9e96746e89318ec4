package agentdef

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/google/dotprompt/go/dotprompt"

	"github.com/holdpoint/holdpoint/service/schema"
)

const (
	// maxDepth bounds the nesting of mappings and lists in a definition.
	maxDepth = 64
	// maxEntries bounds the entries of one mapping or list.
	maxEntries = 1000
)

// schema reads m[key], an input or output: a mapping whose one key,
// schema, is Picoschema or JSON Schema.
func (b *builder) schema(m map[string]any, item path, key string, required bool) (json.RawMessage, error) {
	p := item.key(key)
	v := m[key]
	if v == nil {
		if !required {
			return nil, nil
		}
		if _, present := m[key]; present {
			return nil, b.errf(p, "needs a schema: key")
		}
		return nil, b.missing(item, key)
	}
	io, ok := v.(map[string]any)
	if !ok {
		return nil, b.errf(p, "must be a mapping with a schema: key (%s)", kind(v))
	}
	if err := b.checkKeys(io, p, allowOnly("schema")); err != nil {
		return nil, err
	}
	if io["schema"] == nil {
		return nil, b.missing(p, "schema")
	}
	raw, err := toJSONSchema(io["schema"])
	if err != nil {
		return nil, b.errf(p.key("schema"), "%s", err)
	}
	return raw, nil
}

// looksLikeJSONSchema says whether a schema: value is JSON Schema (rather
// than Picoschema): a mapping with a top-level type, properties or $schema
// key.
func looksLikeJSONSchema(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, k := range []string{"type", "properties", "$schema"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// jsonSchemaKeywords are the keywords a JSON Schema may have at its top
// level (of drafts 4 to 2020-12). Any other key, "x-" extensions aside, is
// taken for a mistake: most likely Picoschema with a property named type.
var jsonSchemaKeywords = []string{
	"$anchor", "$comment", "$defs", "$dynamicAnchor", "$dynamicRef", "$id", "$recursiveAnchor", "$recursiveRef", "$ref", "$schema", "$vocabulary",
	"additionalItems", "additionalProperties", "allOf", "anyOf", "const", "contains", "contentEncoding", "contentMediaType", "contentSchema",
	"default", "definitions", "dependencies", "dependentRequired", "dependentSchemas", "deprecated", "description", "else", "enum", "examples",
	"exclusiveMaximum", "exclusiveMinimum", "format", "id", "if", "items", "maxContains", "maxItems", "maxLength", "maxProperties", "maximum",
	"minContains", "minItems", "minLength", "minProperties", "minimum", "multipleOf", "not", "oneOf", "pattern", "patternProperties",
	"prefixItems", "properties", "propertyNames", "readOnly", "required", "then", "title", "type", "unevaluatedItems", "unevaluatedProperties",
	"uniqueItems", "writeOnly",
}

// maxSchemaValues bounds the values (mappings, lists, scalars) of one
// schema, as written and as JSON Schema: compiling a schema takes time
// that grows with the square of its subschemas.
const maxSchemaValues = 4000

// countValues counts the values of a decoded tree, stopping past limit.
func countValues(v any, limit int) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if n += countValues(e, limit-n); n > limit {
				return n
			}
		}
	case []any:
		for _, e := range v {
			if n += countValues(e, limit-n); n > limit {
				return n
			}
		}
	}
	return n
}

var errSchemaTooLarge = fmt.Errorf("is too large: a schema has at most %d values (keys, items and scalars)", maxSchemaValues)

// toJSONSchema converts a schema: value to canonical JSON Schema and checks
// that it compiles.
func toJSONSchema(v any) (json.RawMessage, error) {
	if countValues(v, maxSchemaValues) > maxSchemaValues {
		return nil, errSchemaTooLarge
	}
	if looksLikeJSONSchema(v) {
		for _, k := range slices.Sorted(maps.Keys(v.(map[string]any))) {
			if !slices.Contains(jsonSchemaKeywords, k) && !strings.HasPrefix(k, "x-") {
				return nil, fmt.Errorf("is read as JSON Schema (it has a type, properties or $schema key), but %q is not a JSON Schema keyword: in Picoschema, a property may not be named type or properties", k)
			}
		}
		raw, err := canonicalJSON(v)
		if err != nil {
			return nil, err
		}
		if err := schema.Check(raw); err != nil {
			return nil, fmt.Errorf("is not a valid JSON Schema: %s", err)
		}
		return raw, nil
	}
	raw, err := picoschema(v)
	if err != nil {
		if err.Error() == anyAtTop {
			return nil, err
		}
		return nil, fmt.Errorf("is not valid Picoschema: %s", err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil || !looksLikeJSONSchema(out) {
		// Picoschema `any` is {}: as a JSON value it would read back as
		// Picoschema, an empty object.
		return nil, errors.New(anyAtTop)
	}
	if countValues(out, maxSchemaValues) > maxSchemaValues {
		return nil, errSchemaTooLarge
	}
	if err := schema.Check(raw); err != nil {
		return nil, fmt.Errorf("converts from Picoschema to an invalid JSON Schema: %s", err)
	}
	return raw, nil
}

const anyAtTop = "must describe a type: Picoschema any is not allowed at the top level (write a JSON Schema with a $schema key to accept any value)"

// picoschema converts Picoschema to canonical JSON Schema with dotprompt.
func picoschema(v any) (raw json.RawMessage, err error) {
	defer func() {
		// The library panics on some malformed input, e.g. an enum that
		// is not a list.
		if r := recover(); r != nil {
			raw, err = nil, fmt.Errorf("%v", r)
		}
	}()
	m, isMap := v.(map[string]any)
	if s, ok := v.(string); ok && strings.TrimSpace(strings.SplitN(s, ",", 2)[0]) == "any" {
		return nil, errors.New(anyAtTop)
	}
	if !isMap {
		s, err := dotprompt.Picoschema(v, &dotprompt.PicoschemaOptions{})
		if err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), "Picoschema: "))
		}
		return schemaJSON(s)
	}
	// dotprompt.Picoschema first tries to read a mapping as JSON Schema,
	// and fails on Picoschema whose property names are JSON Schema keywords
	// of another type (required: boolean, items: string). Given as the
	// object property x, the mapping is parsed as Picoschema only.
	s, err := dotprompt.Picoschema(map[string]any{"x(object)": m}, &dotprompt.PicoschemaOptions{})
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "Picoschema: "))
	}
	x, ok := s.Properties.Get("x")
	if !ok || x == nil {
		return nil, errors.New("cannot be converted")
	}
	return schemaJSON(x)
}

func schemaJSON(s any) (json.RawMessage, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return canonicalJSON(v)
}

// canonicalJSON writes a decoded value as compact JSON, keys sorted, so
// that equal values give equal bytes.
func canonicalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("cannot be written as JSON: %s", oneLine(err.Error()))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeJSON decodes the JSON form into a mapping of decoded values.
func decodeJSON(src []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		msg := oneLine(err.Error())
		var se *json.SyntaxError
		if errors.As(err, &se) {
			msg = fmt.Sprintf("%s (at byte %d)", msg, se.Offset)
		}
		return nil, &Error{Message: "not JSON: " + msg}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &Error{Message: "not JSON: more after the object"}
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Message: fmt.Sprintf("must be a JSON object (%s)", kind(v))}
	}
	if err := checkShape(root, nil, 1); err != nil {
		return nil, err
	}
	return root, nil
}

// checkShape refuses values nested deeper than maxDepth and mappings or
// lists of more than maxEntries entries.
func checkShape(v any, p path, depth int) *Error {
	if depth > maxDepth {
		return &Error{Field: p.String(), Message: fmt.Sprintf("nested more than %d deep", maxDepth)}
	}
	switch v := v.(type) {
	case map[string]any:
		if len(v) > maxEntries {
			return &Error{Field: p.String(), Message: fmt.Sprintf("has more than %d entries", maxEntries)}
		}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := checkShape(v[k], p.key(k), depth+1); err != nil {
				return err
			}
		}
	case []any:
		if len(v) > maxEntries {
			return &Error{Field: p.String(), Message: fmt.Sprintf("has more than %d entries", maxEntries)}
		}
		for i, e := range v {
			if err := checkShape(e, p.index(i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}
