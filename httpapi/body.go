package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// decodeBody is the one decoder of request bodies. checkJSONBody has read
// the body and refused anything but one valid JSON value; this decodes it
// into dst, which must be an object of the shape want shows (for
// messages, such as `{"output": ..., "note": ...}`). strict refuses members
// dst does not have: a decision cannot be taken back, so a misspelt member
// must not be dropped silently. It reports whether there was a body.
func decodeBody(c echo.Context, dst any, want string, strict bool) (bool, error) {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		// A *http.MaxBytesError maps to 413; anything else is a broken
		// connection, which handleError logs.
		return false, fmt.Errorf("read request body: %w", err)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return false, nil
	}
	if body[0] != '{' {
		return true, invalid("invalid JSON body: expected an object %s, got %s", want, jsonKind(string(body)))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "" && te.Type != nil:
			return true, invalid("invalid %s: expected %s, got %s", te.Field, service.JSONTypeName(te.Type.Kind().String()), te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return true, invalid("unknown member %s: expected %s", strings.TrimPrefix(err.Error(), "json: unknown field "), want)
		default:
			// The service types' decoders return client-facing texts.
			return true, invalid("invalid JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return true, nil
}
