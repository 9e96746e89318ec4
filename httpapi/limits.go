package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"
)

// Bounds of the strict pass over every JSON request body.
const (
	// MaxJSONDepth bounds the nesting of arrays and objects in a request
	// body. Go's decoder allows 10000 levels; nothing the protocol carries
	// needs more than a few, and deep nesting costs stack and time in every
	// later pass (decoding, schema validation, storage as jsonb).
	MaxJSONDepth = 64
	// MaxJSONNumberLength bounds the literal of one JSON number, in
	// characters: longer ones carry no more than a float64 can hold and
	// cost PostgreSQL's numeric parser time.
	MaxJSONNumberLength = 128
	// maxJSONExponent bounds the written exponent of a JSON number. A
	// literal the float64 checks accept never needs more; it stops zeros
	// such as 0e-99999, whose scale PostgreSQL's numeric cannot hold.
	maxJSONExponent = 1000
	// maxPointerLength bounds the JSON Pointer quoted in an error message.
	maxPointerLength = 200
)

// checkJSONBody reads a request's (size-limited) body and refuses it unless
// it is one strict JSON value, before any decoder sees it: see checkJSON.
// The handler then reads the same bytes from memory. An empty body passes;
// the handlers say whether they need one.
func checkJSONBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
			return next(c)
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			var tooLarge *http.MaxBytesError
			var edge *edgeError
			if errors.As(err, &tooLarge) || errors.As(err, &edge) {
				// 413, or 408 for a body that did not arrive in time.
				return fmt.Errorf("read request body: %w", err)
			}
			// The client broke the body off or framed it wrongly; if it
			// is gone, nobody reads this answer.
			return invalid("the request body could not be read: it ended early or its chunked encoding is malformed")
		}
		if !isAgentUpload(c) {
			if err := checkJSON(body); err != nil {
				return err
			}
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		return next(c)
	}
}

// checkJSON reports, as an INVALID_ARGUMENT error, why b is not one JSON
// value the platform can store as it is: a syntax error, a duplicate object
// member name (which decoders resolve differently: a check could read one
// and the store the other), invalid UTF-8 or a lone surrogate, nesting
// deeper than MaxJSONDepth, a string (member name or value) holding U+0000,
// or a number that is longer than MaxJSONNumberLength, overflows a float64,
// rounds a non-zero literal to zero, or has an exponent beyond ±1000.
// PostgreSQL's jsonb refuses U+0000 and numbers past its numeric range, so
// each of these would otherwise fail at the store, after part of a request
// was applied. Blank input passes.
func checkJSON(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for {
		switch dec.PeekKind() {
		case '"':
			v, err := dec.ReadValue()
			if err != nil {
				return syntaxProblem(err)
			}
			if hasEscapedNUL(v) {
				return invalid("invalid JSON body: the string at %s contains U+0000 (\\u0000), which cannot be stored", pointerOf(dec))
			}
		case '0':
			v, err := dec.ReadValue()
			if err != nil {
				return syntaxProblem(err)
			}
			if why := numberProblem(v); why != "" {
				return invalid("invalid JSON body: the number at %s %s", pointerOf(dec), why)
			}
		default:
			tok, err := dec.ReadToken()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return syntaxProblem(err)
			}
			if k := tok.Kind(); (k == '{' || k == '[') && dec.StackDepth() > MaxJSONDepth {
				return invalid("invalid JSON body: nested deeper than %d levels (at %s)", MaxJSONDepth, pointerOf(dec))
			}
		}
		if dec.StackDepth() == 0 {
			// One complete value: only whitespace may follow.
			if dec.PeekKind() != 0 {
				return invalid("invalid JSON body: a second JSON value after the first (at byte %d)", dec.InputOffset())
			}
			if _, err := dec.ReadToken(); err != io.EOF {
				return syntaxProblem(err)
			}
			return nil
		}
	}
}

// syntaxProblem turns a decoder error into the client's error: what is
// wrong, and where.
func syntaxProblem(err error) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return invalid("invalid JSON body")
	}
	where := fmt.Sprintf("at byte %d", se.ByteOffset)
	if se.JSONPointer != "" {
		where += ", within " + cleanPointer(string(se.JSONPointer))
	}
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return invalid("invalid JSON body: duplicate object member name %s (%s)", cleanPointer(string(se.JSONPointer)), where)
	case se.Err == io.ErrUnexpectedEOF:
		return invalid("invalid JSON body: unexpected end of input (%s)", where)
	case strings.Contains(se.Err.Error(), "UTF-8"):
		return invalid("invalid JSON body: invalid UTF-8 (%s)", where)
	}
	return invalid("invalid JSON body: %s (%s)", se.Err.Error(), where)
}

// pointerOf names the value the decoder read last, for an error message.
func pointerOf(dec *jsontext.Decoder) string {
	p := string(dec.StackPointer())
	if p == "" {
		return "the top level"
	}
	return cleanPointer(p)
}

// cleanPointer makes a JSON Pointer from the client's member names fit for
// an error message: bounded, and without control characters.
func cleanPointer(p string) string {
	if len(p) > maxPointerLength {
		cut := maxPointerLength
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		p = p[:cut] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return '\uFFFD'
		}
		return r
	}, p)
}

// hasEscapedNUL reports whether a raw JSON string holds the escape \u0000.
// The decoder has already refused raw control characters, so the escape is
// the only way U+0000 can appear.
func hasEscapedNUL(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character, so that \\u0000 is not taken for one
		if i < len(raw) && raw[i] == 'u' && bytes.HasPrefix(raw[i+1:], []byte("0000")) {
			return true
		}
	}
	return false
}

// numberProblem says why a (syntactically valid) JSON number literal is
// refused, or returns "".
func numberProblem(lit []byte) string {
	if len(lit) > MaxJSONNumberLength {
		return fmt.Sprintf("is %d characters long; at most %d are accepted", len(lit), MaxJSONNumberLength)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// The literal is valid JSON, so the only failure is ErrRange.
		return "is out of range: beyond the largest 64-bit float (about 1.8e308)"
	}
	mantissa, exponent, hasExponent := bytes.Cut(bytes.ToLower(lit), []byte("e"))
	if f == 0 && bytes.ContainsAny(mantissa, "123456789") {
		return "is too close to zero: below the smallest 64-bit float (about 4.9e-324)"
	}
	if hasExponent {
		// Only a zero gets here with a huge exponent.
		if exp, err := strconv.Atoi(string(exponent)); err != nil || exp > maxJSONExponent || exp < -maxJSONExponent {
			return fmt.Sprintf("has an exponent beyond ±%d", maxJSONExponent)
		}
	}
	return ""
}
