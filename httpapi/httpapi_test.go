package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/service"
)

// testServer is the API on a loopback HTTP server over a fresh database.
type testServer struct {
	srv   *httptest.Server
	base  string        // URL of the agent routes
	owner *pgxpool.Pool // the tables' owner, for the tests' own assertions
	logs  *testproc.Output
}

// scriptedModel answers every request with "Hello", streamed in two chunks,
// or with err when set.
type scriptedModel struct{ err error }

// Name identifies the model in logs.
func (m scriptedModel) Name() string { return "scripted" }

// Generate streams and returns the scripted answer.
func (m scriptedModel) Generate(ctx context.Context, req *service.ModelRequest, onChunk func(service.ModelChunk)) (*service.ModelResponse, error) {
	if m.err != nil {
		return nil, m.err
	}
	for _, s := range []string{"Hel", "lo"} {
		onChunk(service.ModelChunk{Role: service.RoleModel, Content: []service.Part{service.TextPart(s)}})
	}
	return &service.ModelResponse{
		Message:      service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("Hello")}},
		FinishReason: service.FinishStop,
	}, nil
}

// echoTurn is a custom agent's turn: it streams and appends "echo: <text>".
func echoTurn(ctx context.Context, t *service.Turn) (string, error) {
	text := "echo: "
	if m := t.Input().Message; m != nil {
		text += m.Text()
	}
	t.SendChunk(service.StreamChunk{ModelChunk: &service.ModelChunk{Role: service.RoleModel, Content: []service.Part{service.TextPart(text)}}})
	t.AddMessages(service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart(text)}})
	return "", nil
}

// baseAgents are registered on every test server.
func baseAgents() []*service.Agent {
	return []*service.Agent{
		{Name: "echoAgent", Description: "echoes", ServerManaged: true, Turn: echoTurn},
		{Name: "chatAgent", ServerManaged: true, System: "Be brief.", Model: scriptedModel{}},
		{Name: "notesAgent", Model: scriptedModel{}}, // client-managed
		{Name: "brokenAgent", ServerManaged: true, Model: scriptedModel{
			err: errors.New("dial tcp 10.9.8.7:443: connect: connection refused (secret-host.internal)"),
		}},
	}
}

// register returns a servicetest Register that registers agents.
func register(agents ...*service.Agent) func(*service.Runtime) error {
	return func(rt *service.Runtime) error {
		for _, a := range agents {
			if err := rt.Register(a); err != nil {
				return fmt.Errorf("register %s: %w", a.Name, err)
			}
		}
		return nil
	}
}

// checkedAgainstContract is a servicetest Wrap that checks every exchange
// against the OpenAPI document (contractChecked).
func checkedAgainstContract(t *testing.T) func(httpapi.Options, http.Handler) http.Handler {
	return func(opts httpapi.Options, h http.Handler) http.Handler { return contractChecked(t, opts, h) }
}

// newServer starts the API in dev mode (no authentication) over a fresh
// database with the base agents and extra ones; configure may change the
// options.
func newServer(t *testing.T, configure func(*httpapi.Options), extra ...*service.Agent) *testServer {
	t.Helper()
	logs := new(testproc.Output)
	var opts httpapi.Options
	if configure != nil {
		configure(&opts)
	}
	env := servicetest.New(t, servicetest.Options{
		Runtime:  service.Options{Logger: testlog.Tee(t, logs)},
		Register: register(append(baseAgents(), extra...)...),
		HTTP:     &opts,
		DevMode:  true,
		Wrap:     checkedAgainstContract(t),
	})
	srv := env.Server
	return &testServer{srv: srv, base: srv.URL + "/api/agents", owner: testdb.OwnerPool(t, env.URL), logs: logs}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// post sends body to url; stream asks for an event stream as the Genkit
// client does.
func (s *testServer) post(t *testing.T, url string, body io.Reader, stream bool) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	return s.do(t, req)
}

func (s *testServer) do(t *testing.T, req *http.Request) response {
	t.Helper()
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	if res.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id on the answer", req.Method, req.URL)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// postJSON posts a Go value as the body.
func (s *testServer) postJSON(t *testing.T, url string, v any, stream bool) response {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return s.post(t, url, bytes.NewReader(b), stream)
}

// countRows counts the rows of a table in the test's database.
func (s *testServer) countRows(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := s.owner.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// resultOf decodes a JSON-mode answer {"result": ...} into dst.
func resultOf(t *testing.T, r response, dst any) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200; body %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Result == nil {
		t.Fatalf("answer %s: want {\"result\": ...} (%v)", r.body, err)
	}
	if err := json.Unmarshal(env.Result, dst); err != nil {
		t.Fatalf("result %s: %v", env.Result, err)
	}
}

// errorAnswer is the body of an error answer.
type errorAnswer struct {
	Status    string          `json:"status"`
	Message   string          `json:"message"`
	Details   json.RawMessage `json:"details"`
	RequestID string          `json:"requestId"`
}

// leaks are texts that betray internals and must never reach a client.
var leaks = []string{"pgx", "SQLSTATE", "sql:", "goroutine", ".go:", "panic", "Go struct", "json: cannot", "secret", "10.9.8.7", "httpapi", "service."}

// checkNoLeak fails when body contains internal text.
func checkNoLeak(t *testing.T, body []byte) {
	t.Helper()
	for _, l := range leaks {
		if bytes.Contains(body, []byte(l)) {
			t.Errorf("answer leaks %q: %s", l, body)
		}
	}
}

// errorOf checks an error answer's HTTP status, canonical status and shape.
//
// A turn that asked for a stream is answered 200 with one error frame
// whatever the error (see handleError); httpStatus is then the status the
// same error has as JSON, which the frame cannot carry.
func errorOf(t *testing.T, r response, httpStatus int, status string) errorAnswer {
	t.Helper()
	if strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		frames := parseFrames(t, string(r.body))
		if r.status != http.StatusOK || len(frames) != 1 || frames[0].Error == nil {
			t.Fatalf("HTTP %d with %d frames, want 200 and one error frame (for a %d); body %s", r.status, len(frames), httpStatus, r.body)
		}
		e := *frames[0].Error
		if e.Status != status || e.Message == "" {
			t.Errorf("error frame %+v, want status %q and a message", e, status)
		}
		if e.RequestID != r.header.Get("X-Request-Id") {
			t.Errorf("requestId %q differs from X-Request-Id %q", e.RequestID, r.header.Get("X-Request-Id"))
		}
		checkNoLeak(t, r.body)
		return e
	}
	if r.status != httpStatus {
		t.Fatalf("HTTP status %d, want %d; body %s", r.status, httpStatus, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var e errorAnswer
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %s: %v", r.body, err)
	}
	if e.Status != status {
		t.Errorf("status %q, want %q (message %q)", e.Status, status, e.Message)
	}
	if e.Message == "" {
		t.Errorf("error body %s has no message", r.body)
	}
	if e.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("requestId %q differs from X-Request-Id %q", e.RequestID, r.header.Get("X-Request-Id"))
	}
	checkNoLeak(t, r.body)
	return e
}

// answeredStatus is the HTTP status of an answer, or for a turn refused
// inside an event stream (200 and one error frame) the status its error
// has as JSON.
func answeredStatus(t *testing.T, r response) int {
	t.Helper()
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		return r.status
	}
	if frames := parseFrames(t, string(r.body)); len(frames) == 1 && frames[0].Error != nil {
		return jsonStatus[frames[0].Error.Status]
	}
	return r.status
}

// jsonStatus is the HTTP status of each canonical code as the JSON answers
// use it (the protocol's table).
var jsonStatus = map[string]int{
	"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "ABORTED": 409,
	"PERMISSION_DENIED": 403, "UNAUTHENTICATED": 401, "RESOURCE_EXHAUSTED": 429, "UNAVAILABLE": 503, "INTERNAL": 500,
}

// frame is one parsed event of a stream.
type frame struct {
	Message json.RawMessage `json:"message"`
	Result  json.RawMessage `json:"result"`
	Error   *errorAnswer    `json:"error"`
}

// parseFrames splits a stream exactly as the Genkit JS client does: on
// "\n\n", dropping the "data: " prefix, each frame one JSON object with
// message, result or error. It fails on anything the client would choke on.
func parseFrames(t *testing.T, body string) []frame {
	t.Helper()
	var frames []frame
	for strings.Contains(body, "\n\n") {
		i := strings.Index(body, "\n\n")
		raw := body[:i]
		body = body[i+2:]
		if !strings.HasPrefix(raw, "data: ") {
			t.Fatalf("frame %q does not start with \"data: \"", raw)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw[len("data: "):]), &members); err != nil {
			t.Fatalf("frame %q: %v", raw, err)
		}
		if len(members) != 1 {
			t.Fatalf("frame %q: want exactly one of message, result, error", raw)
		}
		var f frame
		if err := json.Unmarshal([]byte(raw[len("data: "):]), &f); err != nil {
			t.Fatalf("frame %q: %v", raw, err)
		}
		if f.Message == nil && f.Result == nil && f.Error == nil {
			t.Fatalf("unknown frame %q", raw)
		}
		frames = append(frames, f)
	}
	if body != "" {
		t.Fatalf("stream ends with an unterminated frame %q", body)
	}
	return frames
}

// userMessage is an input with one user text message.
func userMessage(text string) map[string]any {
	return map[string]any{"message": map[string]any{"role": "user", "content": []any{map[string]any{"text": text}}}}
}

func TestInvokeJSON(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)

	var out service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/chatAgent", map[string]any{"data": userMessage("hi")}, false), &out)
	if out.FinishReason != service.FinishStop || out.SnapshotID == "" || out.SessionID == "" {
		t.Fatalf("output %+v: want finishReason stop with snapshot and session ids", out)
	}
	if out.Message == nil || out.Message.Role != service.RoleModel || out.Message.Text() != "Hello" {
		t.Fatalf("output message %+v, want the model's Hello", out.Message)
	}

	// The next turn continues from the snapshot, in the same session.
	var next service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/chatAgent", map[string]any{
		"data": userMessage("again"),
		"init": map[string]any{"snapshotId": out.SnapshotID},
	}, false), &next)
	if next.SessionID != out.SessionID || next.SnapshotID == out.SnapshotID || next.FinishReason != service.FinishStop {
		t.Fatalf("second turn %+v: want a new snapshot in session %s", next, out.SessionID)
	}
	var snap service.Snapshot
	resultOf(t, s.postJSON(t, s.base+"/chatAgent/getSnapshot", map[string]any{"data": map[string]any{"snapshotId": next.SnapshotID}}, false), &snap)
	if snap.ParentID != out.SnapshotID || snap.State == nil || len(snap.State.Messages) != 4 {
		t.Fatalf("snapshot %+v: want parent %s and 4 messages", snap, out.SnapshotID)
	}

	// A client-managed agent answers with the whole state.
	var notes service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/notesAgent", map[string]any{
		"data": userMessage("note"),
		"init": map[string]any{"state": map[string]any{"messages": []any{userMessage("earlier")["message"]}}},
	}, false), &notes)
	if notes.SnapshotID != "" || notes.State == nil || len(notes.State.Messages) != 3 {
		t.Fatalf("client-managed output %+v: want state with 3 messages and no snapshot", notes)
	}

	// A failed turn is an answer, not an HTTP error, and hides internals.
	r := s.postJSON(t, s.base+"/brokenAgent", map[string]any{"data": userMessage("hi")}, false)
	var failed service.AgentOutput
	resultOf(t, r, &failed)
	if failed.FinishReason != service.FinishFailed || failed.Error == nil || failed.Error.Status == "" || failed.Error.Message == "" {
		t.Fatalf("failed turn %s: want finishReason failed with an error", r.body)
	}
	checkNoLeak(t, r.body)
}

func TestInvokeStream(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)

	for _, tc := range []struct {
		name   string
		url    string
		stream bool
	}{
		{"accept header", s.base + "/chatAgent", true},
		{"query parameter", s.base + "/chatAgent?stream=true", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.postJSON(t, tc.url, map[string]any{"data": userMessage("hi")}, tc.stream)
			if r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q, want text/event-stream", ct)
			}
			if cc := r.header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache", cc)
			}
			frames := parseFrames(t, string(r.body))
			var text strings.Builder
			var turnEnd *service.TurnEnd
			for i, f := range frames[:len(frames)-1] {
				if f.Message == nil {
					t.Fatalf("frame %d is not a message: %+v", i, f)
				}
				var c service.StreamChunk
				if err := json.Unmarshal(f.Message, &c); err != nil {
					t.Fatalf("chunk %s: %v", f.Message, err)
				}
				if c.ModelChunk != nil {
					for _, p := range c.ModelChunk.Content {
						if p.Text != nil {
							text.WriteString(*p.Text)
						}
					}
				}
				if c.TurnEnd != nil {
					turnEnd = c.TurnEnd
				}
			}
			if text.String() != "Hello" {
				t.Errorf("streamed text %q, want Hello", text.String())
			}
			last := frames[len(frames)-1]
			if last.Result == nil {
				t.Fatalf("last frame %+v is not the result", last)
			}
			var out service.AgentOutput
			if err := json.Unmarshal(last.Result, &out); err != nil {
				t.Fatal(err)
			}
			if out.FinishReason != service.FinishStop || out.SnapshotID == "" {
				t.Errorf("result %s: want stop with a snapshot", last.Result)
			}
			if turnEnd == nil || turnEnd.SnapshotID != out.SnapshotID {
				t.Errorf("turnEnd %+v: want one naming snapshot %s", turnEnd, out.SnapshotID)
			}
		})
	}

	t.Run("custom agent", func(t *testing.T) {
		t.Parallel()
		r := s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("ping")}, true)
		frames := parseFrames(t, string(r.body))
		if len(frames) < 2 || frames[len(frames)-1].Result == nil {
			t.Fatalf("frames %s: want chunks then a result", r.body)
		}
		if !strings.Contains(string(frames[0].Message), "echo: ping") {
			t.Errorf("first chunk %s, want the echo", frames[0].Message)
		}
	})
}

// gate is a custom agent that streams one chunk and then waits: for release,
// or for its context to end, which it reports on cancelled.
type gate struct {
	release   chan struct{}
	cancelled chan struct{}
}

func newGate() *gate {
	return &gate{release: make(chan struct{}), cancelled: make(chan struct{}, 1)}
}

func (g *gate) turn(ctx context.Context, t *service.Turn) (string, error) {
	t.SendChunk(service.StreamChunk{ModelChunk: &service.ModelChunk{Role: service.RoleModel, Content: []service.Part{service.TextPart("first")}}})
	select {
	case <-g.release:
		t.AddMessages(service.Message{Role: service.RoleModel, Content: []service.Part{service.TextPart("done")}})
		return "", nil
	case <-ctx.Done():
		g.cancelled <- struct{}{}
		return "", ctx.Err()
	}
}

// openStream starts a streaming request and returns the response, whose
// body the caller reads frame by frame.
func openStream(t *testing.T, s *testServer, ctx context.Context, agent string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/"+agent, strings.NewReader(`{"data":{"message":{"role":"user","content":[{"text":"go"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	res, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	return res
}

// readFrame reads one frame off a stream, failing after a timeout (a frame
// that was not flushed never arrives while the turn waits).
func readFrame(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		for {
			line, err := r.ReadString('\n')
			b.WriteString(line)
			if err != nil || line == "\n" {
				got <- b.String()
				return
			}
		}
	}()
	select {
	case f := <-got:
		return f
	case <-time.After(time.Minute):
		t.Fatal("no frame within a minute: the chunk was not flushed")
		return ""
	}
}

func TestStreamFlushesEachFrame(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newServer(t, nil, &service.Agent{Name: "gateAgent", ServerManaged: true, Turn: g.turn})

	res := openStream(t, s, context.Background(), "gateAgent")
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	// The turn is still waiting, so this frame arrived only if flushed.
	first := readFrame(t, br)
	if !strings.HasPrefix(first, `data: {"message":`) || !strings.Contains(first, "first") {
		t.Fatalf("first frame %q, want the chunk", first)
	}
	close(g.release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	frames := parseFrames(t, first+string(rest))
	if frames[len(frames)-1].Result == nil {
		t.Fatalf("stream %q does not end with the result", first+string(rest))
	}
}

func TestClientDisconnectCancelsTurn(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newServer(t, nil, &service.Agent{Name: "gateAgent", ServerManaged: true, Turn: g.turn})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := openStream(t, s, ctx, "gateAgent")
	defer res.Body.Close()
	readFrame(t, bufio.NewReader(res.Body))
	cancel()
	select {
	case <-g.cancelled:
	case <-time.After(time.Minute):
		close(g.release)
		t.Fatal("the turn was not cancelled after the client went away")
	}
}

func TestGetSnapshot(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)

	var out service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("one")}, false), &out)

	for _, lookup := range []map[string]any{
		{"snapshotId": out.SnapshotID},
		{"sessionId": out.SessionID},
	} {
		var snap service.Snapshot
		resultOf(t, s.postJSON(t, s.base+"/echoAgent/getSnapshot", map[string]any{"data": lookup}, false), &snap)
		if snap.SnapshotID != out.SnapshotID || snap.SessionID != out.SessionID || snap.Status != service.StatusCompleted {
			t.Errorf("getSnapshot %v = %+v, want completed snapshot %s", lookup, snap, out.SnapshotID)
		}
		if snap.State == nil || len(snap.State.Messages) != 2 || snap.State.Messages[1].Text() != "echo: one" {
			t.Errorf("getSnapshot %v state %+v, want the two messages", lookup, snap.State)
		}
	}

	e := errorOf(t, s.postJSON(t, s.base+"/echoAgent/getSnapshot", map[string]any{"data": map[string]any{"snapshotId": "no-such-snapshot"}}, false), http.StatusNotFound, service.CodeNotFound)
	if !strings.Contains(e.Message, "no-such-snapshot") {
		t.Errorf("message %q does not name the snapshot", e.Message)
	}
	errorOf(t, s.postJSON(t, s.base+"/echoAgent/getSnapshot", map[string]any{"data": map[string]any{"sessionId": "no-such-session"}}, false), http.StatusNotFound, service.CodeNotFound)
	// Another agent's snapshot is not this agent's.
	errorOf(t, s.postJSON(t, s.base+"/chatAgent/getSnapshot", map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}, false), http.StatusNotFound, service.CodeNotFound)
}

func TestAbort(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)

	var out service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("one")}, false), &out)

	// Aborting a finished snapshot changes nothing and reports its status.
	var res map[string]any
	resultOf(t, s.postJSON(t, s.base+"/echoAgent/abort", map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}, false), &res)
	if res["snapshotId"] != out.SnapshotID || res["status"] != service.StatusCompleted {
		t.Errorf("abort of a completed snapshot = %v, want status completed", res)
	}
	var snap service.Snapshot
	resultOf(t, s.postJSON(t, s.base+"/echoAgent/getSnapshot", map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}, false), &snap)
	if snap.Status != service.StatusCompleted {
		t.Errorf("status after abort %q, want completed", snap.Status)
	}

	// An unknown snapshot is not an error: the status is absent.
	res = nil
	resultOf(t, s.postJSON(t, s.base+"/echoAgent/abort", map[string]any{"data": map[string]any{"snapshotId": "no-such-snapshot"}}, false), &res)
	if _, ok := res["status"]; ok || res["snapshotId"] != "no-such-snapshot" {
		t.Errorf("abort of an unknown snapshot = %v, want no status", res)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	// One completed snapshot for the cases that need an existing one; the
	// row counts below are taken after it.
	var out service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("seed")}, false), &out)
	var chat service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/chatAgent", map[string]any{"data": userMessage("seed")}, false), &chat)
	sessions, snapshots := s.countRows(t, "sessions"), s.countRows(t, "snapshots")

	big := `{"data":{"message":{"role":"user","content":[{"text":"` + strings.Repeat("x", 1<<20) + `"}]}}}`
	msg := func(role string) string {
		return `{"data":{"message":{"role":"` + role + `","content":[{"text":"hi"}]}}}`
	}
	cases := []struct {
		name     string
		path     string // after the base path
		body     string
		chunked  bool // send without Content-Length
		stream   bool
		want     int
		status   string
		contains string
		// failedTurn: the protocol resolves the call gracefully (200,
		// finishReason failed, the error in the output) instead of
		// answering an HTTP error; the conformance suite requires it.
		failedTurn bool
	}{
		{name: "malformed JSON", path: "/echoAgent", body: `{"data": {`, want: 400, status: "INVALID_ARGUMENT", contains: "invalid JSON body"},
		{name: "malformed JSON streaming", path: "/echoAgent", body: `{"data": nope}`, stream: true, want: 400, status: "INVALID_ARGUMENT", contains: "invalid JSON body"},
		{name: "trailing garbage", path: "/echoAgent", body: `{"data": {}} x`, want: 400, status: "INVALID_ARGUMENT", contains: "invalid JSON body"},
		{name: "empty body", path: "/echoAgent", body: ``, want: 400, status: "INVALID_ARGUMENT", contains: "empty"},
		{name: "body not an object", path: "/echoAgent", body: `[1, 2]`, want: 400, status: "INVALID_ARGUMENT", contains: "array"},
		{name: "data a string", path: "/echoAgent", body: `{"data": "hello"}`, want: 400, status: "INVALID_ARGUMENT", contains: "invalid data: must be a JSON object, got string"},
		{name: "init a number", path: "/echoAgent", body: `{"data": {}, "init": 7}`, want: 400, status: "INVALID_ARGUMENT", contains: "invalid init"},
		{name: "detach not a boolean", path: "/echoAgent", body: `{"data": {"detach": "yes"}}`, want: 400, status: "INVALID_ARGUMENT", contains: "data.detach"},
		{name: "message a string", path: "/echoAgent", body: `{"data": {"message": "hi"}}`, want: 400, status: "INVALID_ARGUMENT", contains: "message"},
		{name: "bad role", path: "/echoAgent", body: msg("robot"), want: 400, status: "INVALID_ARGUMENT", contains: "message.role"},
		{name: "bad role streaming", path: "/echoAgent", body: msg("robot"), stream: true, want: 400, status: "INVALID_ARGUMENT", contains: "message.role"},
		{name: "content not an array", path: "/echoAgent", body: `{"data": {"message": {"role": "user", "content": "hi"}}}`, want: 400, status: "INVALID_ARGUMENT", contains: "content"},
		{name: "snapshotId a number", path: "/echoAgent", body: `{"data": {}, "init": {"snapshotId": 5}}`, want: 400, status: "INVALID_ARGUMENT", contains: "init.snapshotId"},
		{name: "unknown agent", path: "/noSuchAgent", body: msg("user"), want: 404, status: "NOT_FOUND", contains: "noSuchAgent"},
		{name: "unknown agent getSnapshot", path: "/noSuchAgent/getSnapshot", body: `{"data": {"snapshotId": "x"}}`, want: 404, status: "NOT_FOUND", contains: "noSuchAgent"},
		{name: "unknown snapshot in init", path: "/echoAgent", body: `{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"snapshotId": "no-such-snapshot"}}`, want: 404, status: "NOT_FOUND", contains: "no-such-snapshot"},
		{name: "unknown snapshot in init streaming", path: "/echoAgent", body: `{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"snapshotId": "no-such-snapshot"}}`, stream: true, want: 404, status: "NOT_FOUND", contains: "no-such-snapshot"},
		{name: "snapshot of another session", path: "/echoAgent", body: `{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"snapshotId": "` + out.SnapshotID + `", "sessionId": "other"}}`, want: 400, status: "INVALID_ARGUMENT", contains: "session"},
		{name: "state to a server-managed agent", path: "/echoAgent", body: `{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"state": {"messages": []}}}`, want: 400, status: "FAILED_PRECONDITION", contains: "state"},
		{name: "snapshotId to a client-managed agent", path: "/notesAgent", body: `{"data": {"message": {"role": "user", "content": [{"text": "hi"}]}}, "init": {"snapshotId": "` + out.SnapshotID + `"}}`, want: 400, status: "FAILED_PRECONDITION", contains: "snapshotId"},
		{name: "another agent's snapshot in init", path: "/chatAgent", body: `{"data": {"resume": {"respond": [{"toolResponse": {"name": "approve", "ref": "r1", "output": {"ok": true}}}]}}, "init": {"snapshotId": "` + out.SnapshotID + `"}}`, want: 404, status: "NOT_FOUND"},
		{name: "resume of a request not in history", path: "/chatAgent", body: `{"data": {"resume": {"respond": [{"toolResponse": {"name": "approve", "ref": "r1", "output": {"ok": true}}}]}}, "init": {"snapshotId": "` + chat.SnapshotID + `"}}`, failedTurn: true, want: 200, status: "INVALID_ARGUMENT", contains: "not found in session history"},
		{name: "body over the limit", path: "/echoAgent", body: big, want: 413, status: "RESOURCE_EXHAUSTED", contains: "1048576"},
		{name: "body over the limit chunked", path: "/echoAgent", body: big, chunked: true, want: 413, status: "RESOURCE_EXHAUSTED", contains: "1048576"},
		{name: "getSnapshot with neither id", path: "/echoAgent/getSnapshot", body: `{"data": {}}`, want: 400, status: "INVALID_ARGUMENT", contains: "exactly one"},
		{name: "getSnapshot without data", path: "/echoAgent/getSnapshot", body: `{}`, want: 400, status: "INVALID_ARGUMENT", contains: "exactly one"},
		{name: "getSnapshot with both ids", path: "/echoAgent/getSnapshot", body: `{"data": {"snapshotId": "a", "sessionId": "b"}}`, want: 400, status: "INVALID_ARGUMENT", contains: "exactly one"},
		{name: "getSnapshot id a number", path: "/echoAgent/getSnapshot", body: `{"data": {"snapshotId": 1}}`, want: 400, status: "INVALID_ARGUMENT", contains: "data.snapshotId"},
		{name: "getSnapshot of a client-managed agent", path: "/notesAgent/getSnapshot", body: `{"data": {"snapshotId": "a"}}`, want: 400, status: "FAILED_PRECONDITION"},
		{name: "abort without snapshotId", path: "/echoAgent/abort", body: `{"data": {}}`, want: 400, status: "INVALID_ARGUMENT", contains: "snapshotId"},
		{name: "abort data a list", path: "/echoAgent/abort", body: `{"data": ["x"]}`, want: 400, status: "INVALID_ARGUMENT", contains: "got array"},
		{name: "overlong snapshotId", path: "/echoAgent", body: `{"data": {}, "init": {"snapshotId": "` + strings.Repeat("s", 300) + `"}}`, want: 400, status: "INVALID_ARGUMENT", contains: "snapshotId"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			r := s.post(t, s.base+tc.path, body, tc.stream)
			if tc.failedTurn {
				var out service.AgentOutput
				resultOf(t, r, &out)
				if out.FinishReason != service.FinishFailed || out.Error == nil || out.Error.Status != tc.status || !strings.Contains(out.Error.Message, tc.contains) {
					t.Errorf("output %s: want finishReason failed, status %s, message with %q", r.body, tc.status, tc.contains)
				}
				checkNoLeak(t, r.body)
				return
			}
			e := errorOf(t, r, tc.want, tc.status)
			if !strings.Contains(e.Message, tc.contains) {
				t.Errorf("message %q does not contain %q", e.Message, tc.contains)
			}
		})
	}
	t.Cleanup(func() {
		if n := s.countRows(t, "sessions"); n != sessions {
			t.Errorf("bad input wrote sessions: %d rows, want %d", n, sessions)
		}
		// The one failed turn (the resume of a request not in history) is
		// kept as a failed snapshot after the chat's last one; every other
		// bad input wrote nothing.
		if n := s.countRows(t, "snapshots WHERE status <> 'failed'"); n != snapshots {
			t.Errorf("bad input wrote snapshots: %d rows, want %d", n, snapshots)
		}
		var failed int
		var parent string
		if err := s.owner.QueryRow(context.Background(), "SELECT count(*), min(parent_id::text) FROM snapshots WHERE status = 'failed'").Scan(&failed, &parent); err != nil {
			t.Fatal(err)
		}
		if failed != 1 || parent != chat.SnapshotID {
			t.Errorf("failed snapshots: %d with parent %s, want 1 with parent %s", failed, parent, chat.SnapshotID)
		}
	})
}

func TestInternalErrorsStayInternal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		caller func(echo.Context) (service.Caller, error)
		cause  string
	}{
		{"error", func(echo.Context) (service.Caller, error) {
			return service.Caller{}, errors.New("dial tcp 10.9.8.7:5432: secret-host.internal refused")
		}, "secret-host.internal"},
		{"panic", func(echo.Context) (service.Caller, error) {
			panic("secret panic value")
		}, "secret panic value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, func(o *httpapi.Options) { o.Caller = tc.caller })
			for _, stream := range []bool{false, true} {
				r := s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("hi")}, stream)
				e := errorOf(t, r, http.StatusInternalServerError, service.CodeInternal)
				if e.Message != "internal error" || e.RequestID == "" {
					t.Errorf("answer %s: want the fixed message and the request id", r.body)
				}
				// The operator finds the cause by the request id.
				found := false
				for _, line := range strings.Split(s.logs.String(), "\n") {
					if strings.Contains(line, e.RequestID) && strings.Contains(line, tc.cause) {
						found = true
					}
				}
				if !found {
					t.Errorf("no log line with request id %s and the cause:\n%s", e.RequestID, s.logs.String())
				}
			}
		})
	}
}

func TestDomainErrorsFromCaller(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(o *httpapi.Options) {
		o.Caller = func(echo.Context) (service.Caller, error) {
			return service.Caller{}, service.Errorf(service.CodeUnauthenticated, "missing API key")
		}
	})
	e := errorOf(t, s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("hi")}, true), http.StatusUnauthorized, service.CodeUnauthenticated)
	if e.Message != "missing API key" {
		t.Errorf("message %q", e.Message)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	var ready struct {
		sync.Mutex
		err error
	}
	s := newServer(t, func(o *httpapi.Options) {
		o.Ready = func(ctx context.Context) error {
			ready.Lock()
			defer ready.Unlock()
			return ready.err
		}
	})
	get := func(path string) response {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
		return s.do(t, req)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		r := get(path)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"ok"`) {
			t.Errorf("GET %s = %d %s, want 200 ok", path, r.status, r.body)
		}
	}
	ready.Lock()
	ready.err = fmt.Errorf("ping: dial tcp 10.9.8.7:5432: secret")
	ready.Unlock()
	errorOf(t, get("/readyz"), http.StatusServiceUnavailable, service.CodeUnavailable)
	if r := get("/healthz"); r.status != http.StatusOK {
		t.Errorf("healthz %d while not ready, want 200", r.status)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)

	req, _ := http.NewRequest(http.MethodGet, s.base, nil)
	r := s.do(t, req)
	var list struct {
		Agents []struct {
			Name          string `json:"name"`
			ServerManaged bool   `json:"serverManaged"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", s.base, r.status, r.body)
	}
	var names []string
	for _, a := range list.Agents {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "brokenAgent,chatAgent,echoAgent,notesAgent" {
		t.Errorf("agents %v", names)
	}

	req, _ = http.NewRequest(http.MethodGet, s.srv.URL+"/nowhere", nil)
	errorOf(t, s.do(t, req), http.StatusNotFound, service.CodeNotFound)
	req, _ = http.NewRequest(http.MethodGet, s.base+"/echoAgent", nil)
	errorOf(t, s.do(t, req), http.StatusMethodNotAllowed, "UNIMPLEMENTED")
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	for _, tc := range []struct {
		sent string
		kept bool
	}{
		{"proxy-1234.abc", true},
		{"bad id\twith tabs", false},
		{strings.Repeat("x", 200), false},
	} {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/healthz", nil)
		req.Header.Set("X-Request-Id", tc.sent)
		r := s.do(t, req)
		if got := r.header.Get("X-Request-Id"); (got == tc.sent) != tc.kept {
			t.Errorf("sent %q, answered %q; kept want %v", tc.sent, got, tc.kept)
		}
	}
}

func TestDetachAndAbort(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newServer(t, nil, &service.Agent{Name: "gateAgent", ServerManaged: true, Turn: g.turn})

	in := userMessage("work")
	in["detach"] = true
	var out service.AgentOutput
	resultOf(t, s.postJSON(t, s.base+"/gateAgent", map[string]any{"data": in}, false), &out)
	if out.FinishReason != service.FinishDetached || out.SnapshotID == "" {
		t.Fatalf("detached output %+v: want finishReason detached and the pending snapshot", out)
	}
	var snap service.Snapshot
	resultOf(t, s.postJSON(t, s.base+"/gateAgent/getSnapshot", map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}, false), &snap)
	if snap.Status != service.StatusPending {
		t.Fatalf("status %q while the turn runs, want pending", snap.Status)
	}

	var res map[string]any
	resultOf(t, s.postJSON(t, s.base+"/gateAgent/abort", map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}, false), &res)
	if res["status"] != service.StatusPending {
		t.Errorf("abort = %v, want previous status pending", res)
	}
	select {
	case <-g.cancelled:
	case <-time.After(time.Minute):
		close(g.release)
		t.Fatal("abort did not cancel the running turn")
	}
	resultOf(t, s.postJSON(t, s.base+"/gateAgent/getSnapshot", map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}, false), &snap)
	if snap.Status != service.StatusAborted {
		t.Errorf("status after abort %q, want aborted", snap.Status)
	}
}
