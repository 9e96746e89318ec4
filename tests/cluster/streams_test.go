package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
)

// sseFrame is one event of a turn's stream.
type sseFrame struct {
	id   string
	data json.RawMessage
}

// decoded is the frame's data: a message, a result or an error.
func (f sseFrame) decoded(t *testing.T) (msg *service.StreamChunk, result *service.AgentOutput, errd json.RawMessage) {
	t.Helper()
	var v struct {
		Message *service.StreamChunk `json:"message"`
		Result  *service.AgentOutput `json:"result"`
		Error   json.RawMessage      `json:"error"`
	}
	if err := json.Unmarshal(f.data, &v); err != nil {
		t.Fatalf("frame %q: %v", f.data, err)
	}
	return v.Message, v.Result, v.Error
}

// chunkText is the text a message frame streams.
func chunkText(c *service.StreamChunk) string {
	if c == nil || c.ModelChunk == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.ModelChunk.Content {
		if p.Text != nil {
			b.WriteString(*p.Text)
		}
	}
	return b.String()
}

// nextFrame reads one event: its id line, if any, and its data line.
func nextFrame(br *bufio.Reader) (sseFrame, error) {
	var f sseFrame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return f, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && f.data != nil:
			return f, nil
		case strings.HasPrefix(line, "id: "):
			f.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			f.data = json.RawMessage(strings.TrimPrefix(line, "data: "))
		case line != "":
			return f, fmt.Errorf("unexpected stream line %q", line)
		}
	}
}

// streamPost sends a streaming POST to the banking agent with the headers
// given; the caller closes the body.
func (s *server) streamPost(ctx context.Context, query string, body any, headers map[string]string) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/api/agents/"+demo.BankingAgentName+query, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return httpClient.Do(req)
}

// readToEnd reads frames until the terminal one (a result or an error).
func readToEnd(t *testing.T, body io.Reader) []sseFrame {
	t.Helper()
	br := bufio.NewReader(body)
	var out []sseFrame
	for {
		f, err := nextFrame(br)
		if err != nil {
			t.Fatalf("stream ended after %d frames without a result: %v", len(out), err)
		}
		out = append(out, f)
		if msg, _, _ := f.decoded(t); msg == nil {
			return out
		}
	}
}

// statementText is what the demo's statement answer streams, in full.
func statementText(t *testing.T, pieces []sseFrame) string {
	var b strings.Builder
	for _, f := range pieces {
		msg, _, _ := f.decoded(t)
		b.WriteString(chunkText(msg))
	}
	return b.String()
}

// TestDroppedStreamRejoinedOnTheOtherInstance: a client reads half of a
// streaming turn on A (the demo's gate holds the rest), drops the
// connection, and rejoins on B with Last-Event-ID: it gets every later
// frame exactly once, in order, and the result, although no client was
// left on A when the turn went on. A rejoin with x-genkit-stream-id
// replays the whole stream; unknown and foreign streams answer 204.
func TestDroppedStreamRejoinedOnTheOtherInstance(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	gates := t.TempDir()
	o := serverOpts{env: []string{demo.EnvStreamGates + "=" + gates}}
	a := startServer(t, "A", url, o)
	b := startServer(t, "B", url, o)
	pool := testdb.OwnerPool(t, url)

	ctx, drop := context.WithCancel(context.Background())
	defer drop()
	in := map[string]any{"data": service.AgentInput{Message: userMessage("Prepare my yearly statement gate g1")}}
	res, err := a.streamPost(ctx, "?ids=true", in, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("stream on A: %v %v", res, err)
	}
	streamID := res.Header.Get("x-genkit-stream-id")
	if _, err := uuid.Parse(streamID); err != nil {
		t.Fatalf("x-genkit-stream-id %q: %v", streamID, err)
	}
	br := bufio.NewReader(res.Body)
	var first []sseFrame
	for len(first) < 20 { // the gate holds the statement after 20 pieces
		f, err := nextFrame(br)
		if err != nil {
			t.Fatalf("after %d frames: %v", len(first), err)
		}
		if msg, _, _ := f.decoded(t); msg == nil {
			t.Fatalf("stream ended before the gate: %s", f.data)
		}
		if want := fmt.Sprintf("%s:%d", streamID, len(first)+1); f.id != want {
			t.Fatalf("frame %d has id %q, want %q", len(first)+1, f.id, want)
		}
		first = append(first, f)
	}
	drop() // the client goes, mid-stream
	res.Body.Close()
	if err := os.WriteFile(filepath.Join(gates, "g1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	res, err = b.streamPost(context.Background(), "", in, map[string]string{"Last-Event-ID": first[len(first)-1].id})
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("rejoin on B: %v %v", res, err)
	}
	rest := readToEnd(t, res.Body)
	res.Body.Close()
	for i, f := range rest {
		if want := fmt.Sprintf("%s:%d", streamID, len(first)+1+i); f.id != want {
			t.Fatalf("rejoined frame %d has id %q, want %q", i, f.id, want)
		}
	}
	_, out, errd := rest[len(rest)-1].decoded(t)
	if out == nil || out.FinishReason != service.FinishStop {
		t.Fatalf("the rejoined stream ended with %s", rest[len(rest)-1].data)
	}
	_ = errd
	all := append(append([]sseFrame(nil), first...), rest[:len(rest)-1]...)
	if got, want := statementText(t, all), messageText(out.Message); got != want || !strings.HasSuffix(got, "no discrepancies found.") {
		t.Fatalf("the chunks read say %q, the result %q", got, want)
	}

	checkReplay(t, a, streamID, in, len(all)+1)
	checkNotFound(t, b, pool, streamID, in)
}

// messageText is the text of a message.
func messageText(m *service.Message) string {
	if m == nil {
		return ""
	}
	return chunkText(&service.StreamChunk{ModelChunk: &service.ModelChunk{Content: m.Content}})
}

// checkReplay rejoins a stream that ended with x-genkit-stream-id alone,
// as the Genkit client does: every frame again, from the first, without
// id lines.
func checkReplay(t *testing.T, s *server, streamID string, in any, frames int) {
	t.Helper()
	res, err := s.streamPost(context.Background(), "", in, map[string]string{"x-genkit-stream-id": streamID})
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("replay on %s: %v %v", s.name, res, err)
	}
	defer res.Body.Close()
	all := readToEnd(t, res.Body)
	if len(all) != frames {
		t.Fatalf("replay sent %d frames, want %d", len(all), frames)
	}
	for _, f := range all {
		if f.id != "" {
			t.Fatalf("replay without Last-Event-ID sent id %q", f.id)
		}
	}
	if _, out, _ := all[len(all)-1].decoded(t); out == nil || out.FinishReason != service.FinishStop {
		t.Fatalf("replay ended with %s", all[len(all)-1].data)
	}
}

// checkNotFound: a rejoin of an unknown stream, of another tenant's or of
// another end user's answers 204 and writes nothing.
func checkNotFound(t *testing.T, s *server, pool *pgxpool.Pool, streamID string, in any) {
	t.Helper()
	ctx := context.Background()
	var tenant string
	if err := pool.QueryRow(ctx, "SELECT tenant_id FROM turn_streams WHERE id = $1", streamID).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	foreign, otherUser := uuid.New(), uuid.New()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO tenants (id, name) VALUES ('streams-other', 'Other')", nil},
		{"INSERT INTO turn_streams (tenant_id, id, agent) VALUES ('streams-other', $1, $2)", []any{foreign, demo.BankingAgentName}},
		{`INSERT INTO turn_stream_frames (tenant_id, stream_id, seq, frame, terminal) VALUES ('streams-other', $1, 1, '{"result":{}}', true)`, []any{foreign}},
		{"INSERT INTO turn_streams (tenant_id, id, end_user, agent) VALUES ($1, $2, 'someone-else', $3)", []any{tenant, otherUser, demo.BankingAgentName}},
	} {
		if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	before := count(t, pool, "SELECT count(*) FROM turn_streams")
	for _, h := range []map[string]string{
		{"x-genkit-stream-id": uuid.NewString()},
		{"x-genkit-stream-id": "not-a-stream"},
		{"Last-Event-ID": uuid.NewString() + ":3"},
		{"x-genkit-stream-id": foreign.String()},
		{"Last-Event-ID": foreign.String() + ":0"},
		{"x-genkit-stream-id": otherUser.String()},
	} {
		res, err := s.streamPost(ctx, "", in, h)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Fatalf("rejoin with %v answered %d %q, want 204", h, res.StatusCode, body)
		}
	}
	if after := count(t, pool, "SELECT count(*) FROM turn_streams"); after != before {
		t.Fatalf("the 204 rejoins changed the streams: %d, then %d", before, after)
	}
	// A malformed Last-Event-ID is the client's error.
	res, err := s.streamPost(ctx, "", in, map[string]string{"x-genkit-stream-id": streamID, "Last-Event-ID": "x:y"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Contains(body, []byte("INVALID_ARGUMENT")) {
		t.Fatalf("a malformed Last-Event-ID answered %d %s", res.StatusCode, body)
	}
}

// TestDetachedTurnStreamJoined: a streamed turn that detaches answers its
// client with the pending snapshot, and its stream goes on to the turn's
// outcome: a client joining it on the other instance, while the demo's
// gate holds it half way, gets every chunk and the final result.
func TestDetachedTurnStreamJoined(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	gates := t.TempDir()
	o := serverOpts{env: []string{demo.EnvStreamGates + "=" + gates}}
	a := startServer(t, "A", url, o)
	b := startServer(t, "B", url, o)

	in := map[string]any{"data": service.AgentInput{Message: userMessage("Prepare my yearly statement gate d1"), Detach: true}}
	res, err := a.streamPost(context.Background(), "", in, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("detached stream on A: %v %v", res, err)
	}
	streamID := res.Header.Get("x-genkit-stream-id")
	first := readToEnd(t, res.Body)
	res.Body.Close()
	if _, out, _ := first[len(first)-1].decoded(t); out == nil || out.FinishReason != service.FinishDetached {
		t.Fatalf("the detach answered %s", first[len(first)-1].data)
	}

	res, err = b.streamPost(context.Background(), "?ids=true", in, map[string]string{"x-genkit-stream-id": streamID})
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("join on B: %v %v", res, err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	var held []sseFrame
	for len(held) < 20 { // the gate holds the statement after 20 pieces
		f, err := nextFrame(br)
		if err != nil {
			t.Fatalf("after %d frames: %v", len(held), err)
		}
		if msg, _, _ := f.decoded(t); msg == nil {
			t.Fatalf("the stream ended before the gate: %s", f.data)
		}
		held = append(held, f)
	}
	if err := os.WriteFile(filepath.Join(gates, "d1"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rest := readToEnd(t, br)
	all := append(held, rest...)
	for i, f := range all {
		if want := fmt.Sprintf("%s:%d", streamID, i+1); f.id != want {
			t.Fatalf("frame %d has id %q, want %q", i, f.id, want)
		}
	}
	_, out, _ := all[len(all)-1].decoded(t)
	if out == nil || out.FinishReason != service.FinishStop {
		t.Fatalf("the detached turn's stream ended with %s", all[len(all)-1].data)
	}
	if got := statementText(t, all[:len(all)-1]); got != messageText(out.Message) || !strings.HasSuffix(got, "no discrepancies found.") {
		t.Fatalf("the chunks say %q, the result %q", got, messageText(out.Message))
	}
}

// TestStreamsPruned: a stream is deleted with its frames once its turn
// ended longer than --stream-retention ago, and a rejoin then is a 204.
func TestStreamsPruned(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	a := startServer(t, "A", url, serverOpts{args: []string{"--stream-retention", "1s"}})
	pool := testdb.OwnerPool(t, url)

	in := map[string]any{"data": service.AgentInput{Message: userMessage("hello")}}
	res, err := a.streamPost(context.Background(), "", in, nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", res, err)
	}
	streamID := res.Header.Get("x-genkit-stream-id")
	readToEnd(t, res.Body)
	res.Body.Close()
	// (The client has the result a moment before the stream's end is
	// written: whether the rows are there yet is not checked here.)
	waitUntil(t, "the stream to be pruned (1 s retention)", time.Minute, func() bool {
		return count(t, pool, "SELECT count(*) FROM turn_streams WHERE id = $1", streamID) == 0
	})
	if n := count(t, pool, "SELECT count(*) FROM turn_stream_frames WHERE stream_id = $1", streamID); n != 0 {
		t.Fatalf("%d frames left after the stream was pruned", n)
	}
	res, err = a.streamPost(context.Background(), "", in, map[string]string{"x-genkit-stream-id": streamID})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("a rejoin of a pruned stream answered %d", res.StatusCode)
	}
}
