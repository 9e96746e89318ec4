package httpapi_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/httpapi"
)

// TestDashboardBehindProxy: X-Forwarded-Proto is believed from a trusted
// proxy only. Behind one that says https, the session cookie is Secure and
// the dashboard's origin is https://host; from any other address (and with
// no proxy configured, although Echo by default believes loopback peers)
// the header is an attacker's word: the cookie of a plain-HTTP connection
// is not Secure and an https Origin is refused where http is expected.
func TestDashboardBehindProxy(t *testing.T) {
	t.Parallel()
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	_, elsewhere, _ := net.ParseCIDR("10.0.0.0/8")
	for name, tc := range map[string]struct {
		proxies []*net.IPNet
		scheme  string // the scheme the dashboard must take the request's to be
	}{
		"trusted proxy":   {[]*net.IPNet{loopback}, "https"},
		"untrusted peer":  {[]*net.IPNet{elsewhere}, "http"},
		"no proxy at all": {nil, "http"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newAuthServer(t, func(o *httpapi.Options) { o.TrustedProxies = tc.proxies })
			s.tenant(t, "acme")
			admin, _ := s.key(t, "acme", "admin")
			host := strings.TrimPrefix(s.srv.URL, "http://")
			other := map[string]string{"https": "http", "http": "https"}[tc.scheme]
			if res := proxied(t, s, "POST", "/ui/session", other+"://"+host, "", "", `{"key":"`+admin+`"}`); res.StatusCode != http.StatusForbidden {
				t.Fatalf("sign-in from origin %s://%s: %d", other, host, res.StatusCode)
			}
			res := proxied(t, s, "POST", "/ui/session", tc.scheme+"://"+host, "", "", `{"key":"`+admin+`"}`)
			var cookie *http.Cookie
			for _, c := range res.Cookies() {
				if c.Name == "holdpoint_ui" {
					cookie = c
				}
			}
			if res.StatusCode != http.StatusNoContent || cookie == nil || cookie.Secure != (tc.scheme == "https") {
				t.Fatalf("sign-in from origin %s://%s: %d, cookie %+v", tc.scheme, host, res.StatusCode, cookie)
			}
			page := proxied(t, s, "GET", "/ui/", "", cookie.Value, "", "")
			b, _ := io.ReadAll(page.Body)
			csrf := string(b)[strings.Index(string(b), `name="csrf-token" content="`)+len(`name="csrf-token" content="`):]
			csrf = csrf[:strings.Index(csrf, `"`)]
			if res := proxied(t, s, "POST", "/ui/session/end", other+"://"+host, cookie.Value, csrf, ""); res.StatusCode != http.StatusForbidden {
				t.Fatalf("sign-out from origin %s://%s: %d", other, host, res.StatusCode)
			}
			res = proxied(t, s, "POST", "/ui/session/end", tc.scheme+"://"+host, cookie.Value, csrf, "")
			if res.StatusCode != http.StatusNoContent || len(res.Cookies()) != 1 || res.Cookies()[0].Secure != (tc.scheme == "https") {
				t.Fatalf("sign-out from origin %s://%s: %d %v", tc.scheme, host, res.StatusCode, res.Cookies())
			}
		})
	}
}

// proxied sends a dashboard request saying X-Forwarded-Proto: https, as
// a TLS-terminating proxy (or someone posing as one) does.
func proxied(t *testing.T, s *authServer, method, path, origin, cookie, csrf, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	req.Header.Set("X-Forwarded-Proto", "https")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "holdpoint_ui", Value: cookie})
	}
	if csrf != "" {
		req.Header.Set("X-CSRF-Token", csrf)
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}
