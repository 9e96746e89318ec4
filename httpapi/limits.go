package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// MaxJSONDepth bounds the nesting of arrays and objects in a request body.
// Go's decoder allows 10000 levels; nothing the protocol carries needs more
// than a few, and deep nesting costs stack and time in every later pass
// (decoding, schema validation, storage as jsonb).
const MaxJSONDepth = 64

// limitJSONDepth reads a request's (size-limited) body and refuses it when
// its JSON nests deeper than MaxJSONDepth, before any decoder sees it. The
// handler then reads the same bytes from memory.
func limitJSONDepth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
			return next(c)
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			// A *http.MaxBytesError maps to 413; anything else is a broken
			// connection, which handleError logs.
			return fmt.Errorf("read request body: %w", err)
		}
		if jsonDepthExceeds(body, MaxJSONDepth) {
			return invalid("invalid JSON body: nested deeper than %d levels", MaxJSONDepth)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		return next(c)
	}
}

// jsonDepthExceeds reports whether the arrays and objects of a JSON text
// nest deeper than limit. It only tracks strings and brackets, so it runs
// on invalid JSON too (the decoder reports that later).
func jsonDepthExceeds(b []byte, limit int) bool {
	depth := 0
	inString, escaped := false, false
	for _, ch := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		switch ch {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}
