package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// guardDevMode keeps web pages from driving a server without
// authentication (serve --dev) through the developer's browser, which can
// reach its loopback address:
//
//   - every request but the health checks must be addressed to a loopback
//     name (Host localhost, 127.0.0.0/8 or [::1], any port), else 403
//     PERMISSION_DENIED. A page whose own host name an attacker re-points at
//     127.0.0.1 (DNS rebinding) sends its own name as Host and is refused,
//     so it can neither read answers nor make decisions;
//   - every request but GET, HEAD and DELETE must say Content-Type:
//     application/json (parameters such as charset allowed; a .prompt file
//     uploaded to PUT /api/v1/agents/:name says text/x-dotprompt), else
//     415. A cross-site form post or no-cors fetch can only send the three
//     "simple" types, and GET, HEAD or POST; another type or method makes
//     the browser ask first (a CORS preflight), which this server never
//     grants.
//
// With authentication on it does nothing: a page has no credential to send.
func (a *api) guardDevMode(next echo.HandlerFunc) echo.HandlerFunc {
	if a.opts.Auth != nil {
		return next
	}
	return func(c echo.Context) error {
		if route := c.Path(); route == "/healthz" || route == "/readyz" {
			return next(c)
		}
		req := c.Request()
		if !isLoopbackHost(req.Host) {
			return service.Errorf(service.CodePermissionDenied,
				"without authentication (dev mode) this server answers requests addressed to localhost, 127.0.0.1 or [::1] only")
		}
		if req.Method != http.MethodGet && req.Method != http.MethodHead && req.Method != http.MethodDelete &&
			!isJSONContentType(req.Header.Values(echo.HeaderContentType)) && !isAgentUpload(c) {
			return &edgeError{
				httpStatus: http.StatusUnsupportedMediaType,
				code:       service.CodeInvalidArgument,
				message:    "without authentication (dev mode) a " + req.Method + " request must be sent with Content-Type: application/json",
			}
		}
		return next(c)
	}
}

// isLoopbackHost reports whether a Host header names a loopback address:
// localhost, an address of 127.0.0.0/8 or [::1], with or without a port.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.IsLoopback()
}

// isJSONContentType reports whether the Content-Type header values are a
// single application/json, with any parameters.
func isJSONContentType(values []string) bool {
	if len(values) != 1 {
		return false
	}
	mediaType, _, err := mime.ParseMediaType(values[0])
	return err == nil && mediaType == echo.MIMEApplicationJSON
}
