package httpapi_test

import (
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDashboardSessionLinks: a client names its session anything, spaces,
// an escaped "/", "%", "?" and non-ASCII included; the session search and
// the session page link to it with its id escaped, and the page that link
// opens is that session's, as is the API's list of its tool calls.
func TestDashboardSessionLinks(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, id := range []string{"a b/é", "100%", "q?x=1#y", "plain"} {
		body := map[string]any{"data": userMessage("hello " + id), "init": map[string]any{"sessionId": id}}
		if r := s.postJSON(t, s.base+"/echoAgent", body, false); r.status != http.StatusOK {
			t.Fatalf("turn of session %q: %d %s", id, r.status, r.body)
		}
		search := getUI(t, s, "/ui/sessions?q="+url.QueryEscape(id))
		const prefix = `href="/ui/sessions/`
		i := strings.Index(search, prefix)
		if i < 0 {
			t.Fatalf("the search for %q links to no session:\n%s", id, search)
		}
		href := search[i+len(`href="`):]
		href = html.UnescapeString(href[:strings.IndexByte(href, '"')])
		if want := "/ui/sessions/" + url.PathEscape(id) + "?agent=echoAgent"; href != want {
			t.Errorf("session %q: link %q, want %q", id, href, want)
		}
		page := getUI(t, s, href)
		if !strings.Contains(page, html.EscapeString("echo: hello "+id)) {
			t.Errorf("the link %q opens another page:\n%s", href, page)
		}
		// The API route the decision page's data comes from unescapes alike.
		if r := s.do(t, mustRequest(t, s.srv.URL+"/api/v1/sessions/"+url.PathEscape(id)+"/tool-calls")); r.status != http.StatusOK {
			t.Errorf("tool calls of session %q: %d %s", id, r.status, r.body)
		}
	}
}

// mustRequest is a GET of u.
func mustRequest(t *testing.T, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// getUI fetches a dashboard page of a dev-mode server, which must answer 200.
func getUI(t *testing.T, s *testServer, path string) string {
	t.Helper()
	res, err := s.srv.Client().Get(s.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, res.StatusCode, b)
	}
	return string(b)
}
