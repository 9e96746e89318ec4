package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// devRequest sends a request to a dev-mode server with the given Host and
// Content-Type ("" for none).
func devRequest(t *testing.T, s *testServer, method, path, host, contentType, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	if host != "" {
		req.Host = host
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return s.do(t, req)
}

// TestDevModeRefusesWebPages: without authentication, a web page the
// developer visits must not drive the server. A cross-site form post or
// no-cors fetch (which can only send form or text types) gets 415, and a
// page whose host name was re-pointed at 127.0.0.1 (DNS rebinding) gets
// 403 for everything; nothing is stored.
func TestDevModeRefusesWebPages(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	turn := `{"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}`
	restart := "/api/v1/interrupts/" + uuid.NewString() + "/restart"

	for _, tc := range []struct {
		name, method, path, host, contentType, body string
		httpStatus                                  int
		status                                      string
	}{
		{"form post", "POST", "/api/agents/echoAgent", "", "application/x-www-form-urlencoded", turn, http.StatusUnsupportedMediaType, service.CodeInvalidArgument},
		{"text post", "POST", "/api/agents/echoAgent", "", "text/plain;charset=UTF-8", turn, http.StatusUnsupportedMediaType, service.CodeInvalidArgument},
		{"multipart post", "POST", "/api/agents/echoAgent", "", "multipart/form-data; boundary=x", turn, http.StatusUnsupportedMediaType, service.CodeInvalidArgument},
		{"post without a type", "POST", "/api/agents/echoAgent", "", "", turn, http.StatusUnsupportedMediaType, service.CodeInvalidArgument},
		{"empty post without a type", "POST", restart, "", "", "", http.StatusUnsupportedMediaType, service.CodeInvalidArgument},
		{"rebound read", "GET", "/api/v1/interrupts", "evil.example:8080", "", "", http.StatusForbidden, service.CodePermissionDenied},
		{"rebound stream", "GET", "/api/v1/events", "evil.example", "", "", http.StatusForbidden, service.CodePermissionDenied},
		{"rebound turn", "POST", "/api/agents/echoAgent", "evil.example:8080", "application/json", turn, http.StatusForbidden, service.CodePermissionDenied},
		{"rebound decision", "POST", restart, "evil.example:8080", "application/json", "{}", http.StatusForbidden, service.CodePermissionDenied},
		{"a LAN address", "GET", "/api/agents", "192.168.1.20:8080", "", "", http.StatusForbidden, service.CodePermissionDenied},
		{"localhost as a subdomain", "GET", "/api/agents", "localhost.evil.example", "", "", http.StatusForbidden, service.CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := devRequest(t, s, tc.method, tc.path, tc.host, tc.contentType, tc.body)
			errorOf(t, r, tc.httpStatus, tc.status)
		})
	}
	t.Cleanup(func() {
		if n := s.countRows(t, "sessions"); n != 0 {
			t.Errorf("refused requests stored %d sessions", n)
		}
	})
}

// TestDevModeAllowsLocalClients: what local clients send passes: JSON with
// or without parameters, to any loopback name, as the Genkit client and
// curl do, and as a browser on the host reaches the compose container
// (Host 127.0.0.1:8080). Health checks answer whatever the Host.
func TestDevModeAllowsLocalClients(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	turn := `{"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}`
	for _, tc := range []struct{ host, contentType string }{
		{"", "application/json"},
		{"127.0.0.1:8080", "application/json"},
		{"localhost:8080", "application/json; charset=utf-8"},
		{"LOCALHOST", "Application/JSON;charset=UTF-8"},
		{"127.1.2.3:9", "application/json"},
		{"[::1]:8080", "application/json"},
		{"[::1]", "application/json"},
	} {
		var out service.AgentOutput
		resultOf(t, devRequest(t, s, "POST", "/api/agents/echoAgent", tc.host, tc.contentType, turn), &out)
		if r := devRequest(t, s, "GET", "/api/v1/interrupts", tc.host, "", ""); r.status != http.StatusOK {
			t.Errorf("GET with Host %q: %d %s", tc.host, r.status, r.body)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := devRequest(t, s, "GET", path, "10.0.0.7:8080", "", ""); r.status != http.StatusOK {
			t.Errorf("%s with a container's Host: %d", path, r.status)
		}
	}
}

// TestAuthenticatedServerIgnoresHostAndType: with authentication on, a
// page has no credential to send, so neither check applies (a proxy may
// forward any Host, a backend may omit the type).
func TestAuthenticatedServerIgnoresHostAndType(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, nil)
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/api/agents/echoAgent", strings.NewReader(`{"data":{}}`))
	req.Host = "api.example.com"
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Authorization", "Bearer "+client)
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
}
