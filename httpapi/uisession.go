package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// uiCookie holds a dashboard session's token.
const uiCookie = "holdpoint_ui"

// headerCSRF carries a dashboard page's CSRF token on state-changing
// requests.
const headerCSRF = "X-CSRF-Token"

// isUIRoute reports whether a dashboard session may be used on the route:
// the dashboard's own and the /api/v1 routes its pages call.
func isUIRoute(c echo.Context) bool {
	p := c.Path()
	return strings.HasPrefix(p, "/ui/") || strings.HasPrefix(p, "/api/v1/")
}

// isUIPublic reports the dashboard routes open without a session: the
// sign-in page and its request, and the static files.
func isUIPublic(c echo.Context) bool {
	switch c.Path() {
	case "/ui", "/ui/login", "/ui/static/*":
		return true
	case "/ui/session":
		return c.Request().Method == http.MethodPost
	}
	return false
}

// isUIPage reports a dashboard page (a GET the browser navigates to).
func isUIPage(c echo.Context) bool {
	return c.Request().Method == http.MethodGet && strings.HasPrefix(c.Path(), "/ui/") && !strings.HasPrefix(c.Path(), "/ui/static/")
}

// checkUIWrite guards what a request made with a session cookie may
// change: it must come from the dashboard's own origin (Origin header) and
// echo the session's CSRF token, which only the dashboard's pages carry.
func checkUIWrite(c echo.Context, s *service.UISession) error {
	req := c.Request()
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		return nil
	}
	origin := req.Header.Get(echo.HeaderOrigin)
	if origin == "" || origin != ownOrigin(c) {
		return service.Errorf(service.CodePermissionDenied, "a dashboard request must come from the dashboard's own origin")
	}
	if subtle.ConstantTimeCompare([]byte(req.Header.Get(headerCSRF)), []byte(s.CSRF)) != 1 {
		return service.Errorf(service.CodePermissionDenied, "missing or wrong %s", headerCSRF)
	}
	return nil
}

// secureCookies reports whether the dashboard's cookies get Secure: when
// the browser reached the server over HTTPS, directly or through a trusted
// proxy (see Options.TrustedProxies).
func secureCookies(c echo.Context) bool {
	return c.Scheme() == "https"
}

// ownOrigin is the dashboard's origin as the browser sees it, which a
// request that changes something must name in its Origin header.
func ownOrigin(c echo.Context) string {
	return c.Scheme() + "://" + c.Request().Host
}

// signInRequest is the body of POST /ui/session.
type signInRequest struct {
	Key string `json:"key"`
}

// uiSignIn exchanges an admin key for a session cookie: POST /ui/session.
func (a *api) uiSignIn(c echo.Context) error {
	if a.opts.Auth == nil {
		return service.Errorf(service.CodeFailedPrecondition, "dev mode needs no sign-in")
	}
	var req signInRequest
	if _, err := decodeBody(c, &req, `{"key": "hp_..."}`, true); err != nil {
		return err
	}
	if origin := c.Request().Header.Get(echo.HeaderOrigin); origin != "" && origin != ownOrigin(c) {
		return service.Errorf(service.CodePermissionDenied, "sign in from the dashboard's own origin")
	}
	s, token, err := a.opts.Auth.SignInUI(c.Request().Context(), req.Key)
	if err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{
		Name: uiCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureCookies(c), Expires: s.ExpiresAt, MaxAge: int(time.Until(s.ExpiresAt).Seconds()),
	})
	return c.NoContent(http.StatusNoContent)
}

// uiSignOut ends the session: POST /ui/session/end.
func (a *api) uiSignOut(c echo.Context) error {
	acc, ok := accessOf(c)
	if !ok || acc.ui == nil {
		return service.Errorf(service.CodeUnauthenticated, "not signed in")
	}
	if err := a.opts.Auth.SignOutUI(c.Request().Context(), acc.ui, acc.uiToken); err != nil {
		return err
	}
	c.SetCookie(&http.Cookie{Name: uiCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureCookies(c), MaxAge: -1})
	return c.NoContent(http.StatusNoContent)
}

// uiLogin is the sign-in page.
func (a *api) uiLogin(c echo.Context) error {
	if a.opts.Auth == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	return a.render(c, "login.html", page{Title: "Sign in"})
}

// csrfOf is the CSRF token a page carries (none in dev mode).
func csrfOf(c echo.Context) string {
	if acc, ok := accessOf(c); ok && acc.ui != nil {
		return acc.ui.CSRF
	}
	return ""
}
