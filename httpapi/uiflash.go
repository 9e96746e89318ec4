package httpapi

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// flashCookie carries an action's outcome (a decision, a retry, a
// redelivery) to the page the browser is sent back to, which shows it
// once.
const flashCookie = "holdpoint_flash"

// maxFlashBytes bounds the message a flash keeps.
const maxFlashBytes = 600

// setFlash keeps a message for the next dashboard page about key (an
// interrupt's id, a session's, a webhook's): kind n (notice) or p
// (problem).
func setFlash(c echo.Context, key, kind, msg string) {
	if len(msg) > maxFlashBytes {
		msg = strings.ToValidUTF8(msg[:maxFlashBytes], "") + "…"
	}
	c.SetCookie(&http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(kind + key + "\x00" + msg)), Path: "/ui/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureCookies(c), MaxAge: 60,
	})
}

// takeFlash returns the message kept for one of keys, if any, and
// clears it.
func takeFlash(c echo.Context, keys ...string) (notice, problem string) {
	cookie, err := c.Cookie(flashCookie)
	if err != nil {
		return "", ""
	}
	b, err := base64.RawURLEncoding.DecodeString(cookie.Value)
	if err != nil || len(b) < 3 || len(b) > 2*maxFlashBytes+1000 || !utf8.Valid(b) {
		return "", ""
	}
	key, msg, ok := strings.Cut(string(b[1:]), "\x00")
	if !ok || !slices.Contains(keys, key) {
		return "", ""
	}
	c.SetCookie(&http.Cookie{Name: flashCookie, Value: "", Path: "/ui/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secureCookies(c), MaxAge: -1})
	if b[0] == 'p' {
		return "", msg
	}
	return msg, ""
}
