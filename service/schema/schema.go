// Package schema is the project's one JSON Schema validator: agent
// definitions check the schemas they declare with it, and the turn engine
// checks tool inputs, outputs and resume answers against them.
//
// A schema may refer only to itself and the standard metaschemas: $ref and
// $schema never read a file or the network, since a tenant's definition
// brings its own schemas. Compiled schemas are cached by their text (tools
// are few and their schemas fixed, and compiling costs far more than
// validating), up to a bound should schemas ever come from data.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/holdpoint/holdpoint/internal/rawjson"
)

// url names a schema while it compiles; nothing is loaded from it.
const url = "https://holdpoint.invalid/schema.json"

// maxCached bounds the cache of compiled schemas.
const maxCached = 4096

var (
	cache  sync.Map // string -> *jsonschema.Schema
	cached atomic.Int64
)

// noLoader refuses every URL a schema refers to.
type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New("schemas may only refer to themselves and the standard metaschemas")
}

// Compile compiles a JSON Schema, from the cache when it is there.
func Compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	if s, ok := cache.Load(string(raw)); ok {
		return s.(*jsonschema.Schema), nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	if cached.Load() < maxCached {
		if _, loaded := cache.LoadOrStore(string(raw), sch); !loaded {
			cached.Add(1)
		}
	}
	return sch, nil
}

// Check says in one line why raw is not a JSON Schema that compiles (nil
// when it is one).
func Check(raw json.RawMessage) error {
	_, err := Compile(raw)
	if err == nil {
		return nil
	}
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		return errors.New(strings.Join(violations(ve), "; "))
	}
	return errors.New(strings.ReplaceAll(oneLine(err.Error()), url, "the schema"))
}

// Validate lists how doc fails schema, each violation as "at '/path':
// what"; nil when doc matches or when the schema is absent (empty or null).
func Validate(schema, doc json.RawMessage) []string {
	if rawjson.IsNull(schema) {
		return nil
	}
	sch, err := Compile(schema)
	if err != nil {
		return []string{"the schema does not compile"}
	}
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return []string{"not valid JSON"}
	}
	err = sch.Validate(value)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{oneLine(err.Error())}
	}
	return violations(ve)
}

// violations flattens a validation error into its leaves.
func violations(ve *jsonschema.ValidationError) []string {
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, oneLine(e.Error()))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// oneLine joins the lines of a multi-line message with "; ".
func oneLine(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}
