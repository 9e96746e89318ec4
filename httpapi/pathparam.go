package httpapi

import (
	"net/url"

	"github.com/labstack/echo/v4"
)

// pathParam is the path parameter name, unescaped. Echo matches routes on
// the request's raw path when net/http kept one, which it does only when
// the client's escaping differs from the default (an encoded "/", say):
// the parameter is then still escaped. Otherwise it matched on the decoded
// path, and unescaping again would turn "50%25" into an error.
func pathParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v, nil
	}
	return url.PathUnescape(v)
}
