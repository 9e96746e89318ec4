package agentkit

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// schemaOf infers the JSON Schema of T: objects for structs (properties
// named by their json tags; a field is required unless it is tagged
// omitempty or omitzero, and no other properties are allowed), arrays,
// maps, strings, numbers and booleans, with descriptions, enums and bounds
// from `jsonschema` tags. A type a schema cannot describe (channels,
// functions, complex numbers, recursive types) is an error.
func schemaOf[T any]() (json.RawMessage, error) {
	t := reflect.TypeFor[T]()
	if err := describable(t, map[reflect.Type]bool{}); err != nil {
		return nil, fmt.Errorf("cannot infer a JSON Schema for %s: %w", t, err)
	}
	r := &jsonschema.Reflector{
		Anonymous:      true,
		DoNotReference: true,
		ExpandedStruct: true,
	}
	var s *jsonschema.Schema
	var panicked any
	func() {
		defer func() { panicked = recover() }()
		s = r.ReflectFromType(t)
	}()
	if panicked != nil || s == nil {
		return nil, fmt.Errorf("cannot infer a JSON Schema for %s: %v", t, panicked)
	}
	s.Version = ""
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("cannot encode the JSON Schema of %s: %w", t, err)
	}
	return raw, nil
}

// describable reports why t has no JSON Schema, or nil.
func describable(t reflect.Type, onPath map[reflect.Type]bool) error {
	switch t.Kind() {
	case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Errorf("%s values have no JSON form", t.Kind())
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return describable(t.Elem(), onPath)
	case reflect.Map:
		if k := t.Key().Kind(); k != reflect.String && (k < reflect.Int || k > reflect.Uint64) {
			return fmt.Errorf("map keys of kind %s have no JSON form", k)
		}
		return describable(t.Elem(), onPath)
	case reflect.Struct:
		if onPath[t] {
			return fmt.Errorf("%s is recursive", t)
		}
		if t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()) {
			return nil // its own JSON form (time.Time and the like)
		}
		onPath[t] = true
		defer delete(onPath, t)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if err := describable(f.Type, onPath); err != nil {
				return fmt.Errorf("field %s: %w", f.Name, err)
			}
		}
	}
	return nil
}
