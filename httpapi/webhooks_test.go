package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// jsonOf decodes a plain JSON answer of the given status.
func jsonOf(t *testing.T, r response, status int, dst any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if err := json.Unmarshal(r.body, dst); err != nil {
		t.Fatalf("answer %s: %v", r.body, err)
	}
}

func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer recv.Close()

	var created struct {
		webhooks.Webhook
		Secret string `json:"secret"`
	}
	r := s.call(t, http.MethodPost, "/api/v1/webhooks", map[string]any{
		"url": recv.URL + "/hook", "eventTypes": []string{"interrupt.created", "turn.failed"}, "description": "ops bot",
	})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Secret, "whsec_") || !created.Enabled || len(created.EventTypes) != 2 || created.Description != "ops bot" {
		t.Fatalf("created %+v", created)
	}
	id := created.ID.String()

	// The secret is shown once: never in a read.
	for _, path := range []string{"/api/v1/webhooks", "/api/v1/webhooks/" + id} {
		r := s.call(t, http.MethodGet, path, nil)
		if r.status != http.StatusOK || strings.Contains(string(r.body), created.Secret) || !strings.Contains(string(r.body), id) {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}
	var one struct {
		webhooks.Webhook
		Health *webhooks.Health `json:"health"`
	}
	jsonOf(t, s.call(t, http.MethodGet, "/api/v1/webhooks/"+id, nil), http.StatusOK, &one)
	if one.Health == nil || one.Health.WebhookID != created.ID {
		t.Errorf("health %+v", one.Health)
	}

	var patched webhooks.Webhook
	jsonOf(t, s.call(t, http.MethodPatch, "/api/v1/webhooks/"+id, map[string]any{"enabled": false}), http.StatusOK, &patched)
	if patched.Enabled || patched.URL != created.URL || len(patched.EventTypes) != 2 {
		t.Errorf("patched %+v", patched)
	}

	var rotated map[string]string
	jsonOf(t, s.call(t, http.MethodPost, "/api/v1/webhooks/"+id+"/rotate-secret", map[string]any{"overlap": "1h"}), http.StatusOK, &rotated)
	if !strings.HasPrefix(rotated["secret"], "whsec_") || rotated["secret"] == created.Secret {
		t.Errorf("rotated %v", rotated)
	}

	var page struct {
		Items []webhooks.Delivery `json:"items"`
	}
	jsonOf(t, s.call(t, http.MethodGet, "/api/v1/webhooks/"+id+"/deliveries?status=dead&limit=10", nil), http.StatusOK, &page)
	if page.Items == nil || len(page.Items) != 0 {
		t.Errorf("deliveries %s", s.call(t, http.MethodGet, "/api/v1/webhooks/"+id+"/deliveries", nil).body)
	}

	// Another tenant sees none of it.
	other := []string{tenantHeader, "other"}
	for _, rq := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/webhooks/" + id},
		{http.MethodPatch, "/api/v1/webhooks/" + id},
		{http.MethodDelete, "/api/v1/webhooks/" + id},
		{http.MethodGet, "/api/v1/webhooks/" + id + "/deliveries"},
		{http.MethodPost, "/api/v1/webhooks/" + id + "/rotate-secret"},
	} {
		var body any
		if rq.method == http.MethodPatch {
			body = map[string]any{"enabled": true}
		}
		errorOf(t, s.call(t, rq.method, rq.path, body, other...), http.StatusNotFound, service.CodeNotFound)
	}
	var list struct {
		Items []webhooks.Webhook `json:"items"`
	}
	jsonOf(t, s.call(t, http.MethodGet, "/api/v1/webhooks", nil, other...), http.StatusOK, &list)
	if len(list.Items) != 0 {
		t.Errorf("other tenant lists %+v", list.Items)
	}

	if r := s.call(t, http.MethodDelete, "/api/v1/webhooks/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	errorOf(t, s.call(t, http.MethodGet, "/api/v1/webhooks/"+id, nil), http.StatusNotFound, service.CodeNotFound)
}

func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	r := s.call(t, http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "http://127.0.0.1:9/taken"})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var w webhooks.Webhook
	jsonOf(t, r, http.StatusCreated, &w)
	id := w.ID.String()
	before := s.countWhere(t, "SELECT count(*) FROM webhooks") + s.countWhere(t, "SELECT count(*) FROM webhook_secrets")

	cases := []struct {
		name, method, path string
		body               any
		field              string
	}{
		{"no url", http.MethodPost, "/api/v1/webhooks", map[string]any{"eventTypes": []string{"interrupt.created"}}, "url"},
		{"not a url", http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "hooks example"}, "url"},
		{"plain http", http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "http://hooks.example.com/x"}, "url"},
		{"private address", http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "https://192.168.1.20/x"}, "url"},
		{"unknown event type", http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "https://hooks.example.com/x", "eventTypes": []string{"interrupt.*"}}, "eventTypes"},
		{"duplicate", http.MethodPost, "/api/v1/webhooks", map[string]any{"url": "http://127.0.0.1:9/taken"}, "url"},
		{"empty types on update", http.MethodPatch, "/api/v1/webhooks/" + id, map[string]any{"eventTypes": []string{}}, "eventTypes"},
		{"bad url on update", http.MethodPatch, "/api/v1/webhooks/" + id, map[string]any{"url": "ftp://x"}, "url"},
		{"bad overlap", http.MethodPost, "/api/v1/webhooks/" + id + "/rotate-secret", map[string]any{"overlap": "a while"}, "overlap"},
		{"long overlap", http.MethodPost, "/api/v1/webhooks/" + id + "/rotate-secret", map[string]any{"overlap": "900h"}, "overlap"},
		{"bad status", http.MethodGet, "/api/v1/webhooks/" + id + "/deliveries?status=lost", nil, "status"},
		{"bad limit", http.MethodGet, "/api/v1/webhooks/" + id + "/deliveries?limit=0", nil, "limit"},
		{"bad cursor", http.MethodGet, "/api/v1/webhooks/" + id + "/deliveries?cursor=xyz", nil, "cursor"},
	}
	for _, tc := range cases {
		e := errorOf(t, s.call(t, tc.method, tc.path, tc.body), http.StatusBadRequest, service.CodeInvalidArgument)
		var details map[string]any
		_ = json.Unmarshal(e.Details, &details)
		if details["field"] != tc.field {
			t.Errorf("%s: details %s, want field %s (%s)", tc.name, e.Details, tc.field, e.Message)
		}
	}
	// Shapes the decoder refuses.
	for name, body := range map[string]any{
		"unknown member": `{"url": "https://hooks.example.com/y", "signingKey": "mine"}`,
		"not an object":  `["https://hooks.example.com/y"]`,
		"wrong type":     `{"url": 42}`,
		"no body":        nil,
	} {
		errorOf(t, s.call(t, http.MethodPost, "/api/v1/webhooks", body), http.StatusBadRequest, service.CodeInvalidArgument)
		_ = name
	}
	errorOf(t, s.call(t, http.MethodGet, "/api/v1/webhooks/not-a-uuid", nil), http.StatusNotFound, service.CodeNotFound)
	errorOf(t, s.call(t, http.MethodPost, "/api/v1/webhooks/"+id+"/deliveries/not-a-uuid/redeliver", nil), http.StatusNotFound, service.CodeNotFound)
	errorOf(t, s.call(t, http.MethodPost, "/api/v1/webhooks/"+id+"/deliveries/00000000-0000-0000-0000-000000000000/redeliver", nil),
		http.StatusNotFound, service.CodeNotFound)
	after := s.countWhere(t, "SELECT count(*) FROM webhooks") + s.countWhere(t, "SELECT count(*) FROM webhook_secrets")
	if after != before {
		t.Errorf("refused requests changed rows: %d then %d", before, after)
	}
}

// stream is an open GET /api/v1/events.
type stream struct {
	frames chan sseFrame
	cancel func()
}

type sseFrame struct {
	id, event string
	note      protocol.Event
}

// openEvents opens the event stream with a query and headers; it returns
// the response status, and the frames when it is 200.
func (s *inboxServer) openEvents(t *testing.T, query string, header ...string) (int, *stream) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		cancel()
		return res.StatusCode, nil
	}
	st := &stream{frames: make(chan sseFrame, 256), cancel: func() { cancel(); res.Body.Close() }}
	t.Cleanup(st.cancel)
	go func() {
		defer close(st.frames)
		sc := bufio.NewScanner(res.Body)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.note)
			case line == "" && f.event != "":
				st.frames <- f
				f = sseFrame{}
			}
		}
	}()
	return http.StatusOK, st
}

// next returns the stream's next n frames (within a minute).
func (st *stream) next(t *testing.T, n int) []sseFrame {
	t.Helper()
	var out []sseFrame
	timeout := time.After(time.Minute)
	for len(out) < n {
		select {
		case f, ok := <-st.frames:
			if !ok {
				t.Fatalf("stream ended after %d of %d frames", len(out), n)
			}
			out = append(out, f)
		case <-timeout:
			t.Fatalf("got %d of %d frames within a minute: %+v", len(out), n, out)
		}
	}
	return out
}

// quiet checks the stream sends nothing for a while.
func (st *stream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case f := <-st.frames:
		t.Errorf("unexpected frame %+v", f)
	case <-time.After(d):
	}
}

func TestEventStreamResumesFromLastEventID(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	s.waitListening(t, 1)
	_, live := s.openEvents(t, "?type=interrupt.created")
	_, first := s.pausedTransfer(t, "sess-1", "Transfer $10 to account 1")
	seen := live.next(t, 1)[0]
	if seen.event != "interrupt.created" || seen.note.InterruptID != first.ID.String() || seen.id != seen.note.ID {
		t.Fatalf("first frame %+v", seen)
	}
	live.cancel()

	// Missed while disconnected: two pauses (each an interrupt.created and
	// a turn.completed).
	_, second := s.pausedTransfer(t, "sess-2", "Transfer $20 to account 2")
	_, third := s.pausedTransfer(t, "sess-3", "Transfer $30 to account 3")

	var firstIDs []string
	for i, how := range [][]string{{"", "Last-Event-ID", seen.id}, {"?after=" + seen.id}} {
		query, header := how[0], how[1:]
		status, st := s.openEvents(t, query, header...)
		if status != http.StatusOK {
			t.Fatalf("resume %v: %d", how, status)
		}
		// The first pause's own turn event came after the id seen (the
		// live stream filtered it out), then the two missed pauses.
		got := st.next(t, 5)
		var names, ids []string
		for _, f := range got {
			names = append(names, f.event)
			ids = append(ids, f.id)
		}
		if want := "turn.completed interrupt.created turn.completed interrupt.created turn.completed"; strings.Join(names, " ") != want {
			t.Fatalf("resume %v replayed %q, want %q", how, strings.Join(names, " "), want)
		}
		if got[0].note.SessionID != "sess-1" || got[1].note.InterruptID != second.ID.String() || got[3].note.InterruptID != third.ID.String() ||
			got[2].note.SessionID != "sess-2" {
			t.Errorf("resume %v replayed %+v", how, got)
		}
		if i == 0 {
			firstIDs = ids
			st.quiet(t, 300*time.Millisecond)
			// Then live, on the same stream.
			_, fourth := s.pausedTransfer(t, "sess-4", "Transfer $40 to account 4")
			f := st.next(t, 2)
			if f[0].event != "interrupt.created" || f[0].note.InterruptID != fourth.ID.String() || f[1].note.SessionID != "sess-4" {
				t.Errorf("live after the replay: %+v", f)
			}
		} else {
			if strings.Join(ids, " ") != strings.Join(firstIDs, " ") {
				t.Errorf("?after= replayed %v, Last-Event-ID %v", ids, firstIDs)
			}
			if f := st.next(t, 2); f[0].note.SessionID != "sess-4" || f[1].note.SessionID != "sess-4" {
				t.Errorf("replay of the live pause: %+v", f)
			}
			st.quiet(t, 300*time.Millisecond)
		}
		st.cancel()
	}

	// Filters apply to the replay too.
	_, st := s.openEvents(t, "?type=turn.completed&agent=bankingAgent", "Last-Event-ID", seen.id)
	for _, f := range st.next(t, 4) {
		if f.event != "turn.completed" || f.note.Agent != "bankingAgent" {
			t.Errorf("filtered replay sent %+v", f)
		}
	}
	st.cancel()

	// Ids that are not this tenant's events.
	for _, bad := range []string{"garbage", "ev_AAAAAAAAAAAAAAAAAAAAAA", seen.id + "x"} {
		if status, _ := s.openEvents(t, "", "Last-Event-ID", bad); status != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d, want 400", bad, status)
		}
	}
	if status, _ := s.openEvents(t, "?after="+seen.id, tenantHeader, "other"); status != http.StatusBadRequest {
		t.Errorf("another tenant resumed from acme's id: %d, want 400", status)
	}
	if status, _ := s.openEvents(t, "?type=interrupt.lost"); status != http.StatusBadRequest {
		t.Errorf("unknown type: %d, want 400", status)
	}
}
