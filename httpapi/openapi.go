package httpapi

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// OpenAPIPath is where the server publishes its OpenAPI document.
const OpenAPIPath = "/api/openapi.json"

// OpenAPIDocument is the OpenAPI 3.1 description of every route but the
// dashboard's, written by hand; the tests check every request and answer
// they make against it, so it cannot drift from the code.
//
//go:embed openapi.json
var OpenAPIDocument []byte

// openAPIETag is the document's entity tag: its content's hash.
var openAPIETag = func() string {
	sum := sha256.Sum256(OpenAPIDocument)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// openAPI serves the document, without credentials. Clients revalidate
// (no-cache) and get a 304 while their copy is current.
func openAPI(c echo.Context) error {
	h := c.Response().Header()
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("ETag", openAPIETag)
	if etagMatches(c.Request().Header.Values("If-None-Match"), openAPIETag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, OpenAPIDocument)
}

// etagMatches reports whether If-None-Match values name etag: "*", or a
// list holding it (weakly compared, as RFC 9110 asks for this header).
func etagMatches(values []string, etag string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == "*" || tag == etag {
				return true
			}
		}
	}
	return false
}
