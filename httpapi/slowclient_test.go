package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// slowClient is a raw connection that sends a request's head at once and
// its body a byte per interval, the way a client holding connections open
// on purpose does. Its trickle stops by itself: after a bounded number of
// bytes, when the server closes the connection, or when the test ends.
type slowClient struct {
	conn net.Conn
	br   *bufio.Reader
	done chan struct{} // closed when the trickle stopped
}

// Units of a slow body: one byte of a body of declared length, or one
// chunk of one byte.
const (
	byteUnit  = " "
	chunkUnit = "1\r\n \r\n"
)

// dialSlow connects to the server at addr, sends head (request line and
// headers, without the blank line after them) and then sends unit every
// interval, at most maxUnits times.
func dialSlow(t *testing.T, addr, head, unit string, interval time.Duration, maxUnits int) (*slowClient, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, head+"\r\n\r\n"); err != nil {
		return nil, err
	}
	c := &slowClient{conn: conn, br: bufio.NewReader(conn), done: make(chan struct{})}
	stop := make(chan struct{})
	go func() {
		defer close(c.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; i < maxUnits; i++ {
			_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := io.WriteString(conn, unit); err != nil {
				return // the server closed the connection
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	// Runs before the connection closes: the trickle ends with its test.
	t.Cleanup(func() { close(stop); <-c.done })
	return c, nil
}

// answer reads the server's answer, waiting at most wait.
func (c *slowClient) answer(wait time.Duration) (*http.Response, []byte, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res, body, err
}

// closed waits at most wait for the server to close the connection, and
// reports whether it did.
func (c *slowClient) closed(wait time.Duration) bool {
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// slowHead is the head of a POST of path that announces a body of 100000
// bytes, with extra header lines.
func slowHead(path string, extra ...string) string {
	lines := append([]string{
		"POST " + path + " HTTP/1.1",
		"Host: 127.0.0.1",
		"Content-Type: application/json",
		"Content-Length: 100000",
	}, extra...)
	return strings.Join(lines, "\r\n")
}

// chunkedHead is the head of a POST of path with a chunked body.
func chunkedHead(path string) string {
	return strings.Join([]string{
		"POST " + path + " HTTP/1.1",
		"Host: 127.0.0.1",
		"Content-Type: application/json",
		"Transfer-Encoding: chunked",
	}, "\r\n")
}

// checkClosingAnswer checks an error answer that also closes the connection.
func checkClosingAnswer(t *testing.T, res *http.Response, body []byte, httpStatus int, status string) {
	t.Helper()
	if res.StatusCode != httpStatus {
		t.Fatalf("status %d, want %d: %s", res.StatusCode, httpStatus, body)
	}
	var e errorAnswer
	if err := json.Unmarshal(body, &e); err != nil || e.Status != status || e.Message == "" {
		t.Fatalf("body %s: want status %s with a message (%v)", body, status, err)
	}
	if !res.Close {
		t.Errorf("answer without Connection: close (header %q)", res.Header.Get("Connection"))
	}
}

// TestSlowBodyIsAnsweredAtOnce: a request refused before its body is read
// (no credential, a role that may not use the route, too many requests)
// is answered at once and its connection closed, however slowly its body
// trickles in; Go's server would otherwise read the rest of the body
// first.
func TestSlowBodyIsAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 5 * time.Second
	s := newAuthServer(t, func(o *httpapi.Options) { o.BodyTimeout = bodyTimeout })
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	addr := s.srv.Listener.Addr().String()
	respond := "/api/v1/interrupts/" + uuid.NewString() + "/respond"

	for _, tc := range []struct {
		name, head string
		httpStatus int
		status     string
	}{
		{"no credential", slowHead(respond), http.StatusUnauthorized, service.CodeUnauthenticated},
		{"a client key on an admin route", slowHead(respond, "Authorization: Bearer "+client), http.StatusForbidden, service.CodePermissionDenied},
		{"an unknown key", slowHead(respond, "Authorization: Bearer hp_"+strings.Repeat("x", 43)), http.StatusUnauthorized, service.CodeUnauthenticated},
		{"a bad end user", slowHead("/api/agents/echoAgent", "Authorization: Bearer "+client, "X-End-User: "), http.StatusBadRequest, service.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			c, err := dialSlow(t, addr, tc.head, byteUnit, time.Second, 30)
			if err != nil {
				t.Fatal(err)
			}
			res, body, err := c.answer(bodyTimeout)
			if err != nil {
				t.Fatalf("no answer before the body timeout (%s): %v", bodyTimeout, err)
			}
			checkClosingAnswer(t, res, body, tc.httpStatus, tc.status)
			if !c.closed(bodyTimeout) {
				t.Fatalf("connection still open %s after the answer", bodyTimeout)
			}
			t.Logf("answered and closed %s after the request started", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestSlowBodyTimesOut: a body that does not arrive within the body
// timeout is answered 408 DEADLINE_EXCEEDED and its connection closed, with
// a declared length or chunked, and the request changes nothing.
func TestSlowBodyTimesOut(t *testing.T) {
	t.Parallel()
	const bodyTimeout = time.Second
	s := newServer(t, func(o *httpapi.Options) { o.BodyTimeout = bodyTimeout })
	addr := s.srv.Listener.Addr().String()
	for name, tc := range map[string]struct{ head, unit string }{
		"declared length": {slowHead("/api/agents/echoAgent"), byteUnit},
		"chunked":         {chunkedHead("/api/agents/echoAgent"), chunkUnit},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			c, err := dialSlow(t, addr, tc.head, tc.unit, 300*time.Millisecond, 30)
			if err != nil {
				t.Fatal(err)
			}
			res, body, err := c.answer(10 * bodyTimeout)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			checkClosingAnswer(t, res, body, http.StatusRequestTimeout, "DEADLINE_EXCEEDED")
			if elapsed := time.Since(start); elapsed < bodyTimeout {
				t.Errorf("answered after %s, before the body timeout of %s", elapsed, bodyTimeout)
			}
			if !c.closed(5 * time.Second) {
				t.Fatal("connection still open 5 s after the 408")
			}
		})
	}
	t.Cleanup(func() {
		if n := s.countRows(t, "sessions"); n != 0 {
			t.Errorf("timed-out requests stored %d sessions", n)
		}
	})
}

// TestBrokenBody: a body that breaks off or whose chunked encoding is
// malformed is the client's fault, 400, not an internal error.
func TestBrokenBody(t *testing.T) {
	t.Parallel()
	s := newServer(t, nil)
	addr := s.srv.Listener.Addr().String()
	c, err := dialSlow(t, addr, chunkedHead("/api/agents/echoAgent"), "1\r\n{\r\nzz\r\n", time.Millisecond, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, body, err := c.answer(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkClosingAnswer(t, res, body, http.StatusBadRequest, service.CodeInvalidArgument)
	if strings.Contains(s.logs.String(), `"level":"ERROR"`) {
		t.Errorf("a broken body was logged as a server error:\n%s", s.logs.String())
	}
}

// TestSlowConnectionsDoNotStarve holds 300 connections that send their
// bodies one byte a second: some refused before their body is read, some
// whose body the server waits for. Meanwhile the health check and an admin
// route answer as usual, and every slow connection is answered and closed
// by the body timeout.
func TestSlowConnectionsDoNotStarve(t *testing.T) {
	t.Parallel()
	const (
		slow        = 300
		bodyTimeout = 3 * time.Second
	)
	s := newAuthServer(t, func(o *httpapi.Options) { o.BodyTimeout = bodyTimeout })
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	addr := s.srv.Listener.Addr().String()
	respond := "/api/v1/interrupts/" + uuid.NewString() + "/respond"

	start := time.Now()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		answers = map[int]int{}
		open    int
		failed  []string
	)
	for i := range slow {
		head := slowHead(respond) // 401 before its body is read
		if i%3 == 0 {
			// Authenticated: the server reads the body, until the timeout.
			head = slowHead(respond, "Authorization: Bearer "+admin)
		}
		c, err := dialSlow(t, addr, head, byteUnit, time.Second, 20)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		wg.Go(func() {
			res, body, err := c.answer(bodyTimeout + 10*time.Second)
			stillOpen := err == nil && !c.closed(bodyTimeout+10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed = append(failed, err.Error())
			case res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusRequestTimeout:
				failed = append(failed, fmt.Sprintf("%d %s", res.StatusCode, body))
			default:
				answers[res.StatusCode]++
			}
			if stillOpen {
				open++
			}
		})
	}

	// While they trickle: the health check and an admin route answer.
	for i := range 5 {
		for _, path := range []string{"/healthz", "/api/v1/interrupts"} {
			ctx, cancel := context.WithTimeout(context.Background(), bodyTimeout)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			began := time.Now()
			res, err := s.srv.Client().Do(req)
			if err != nil {
				cancel()
				t.Fatalf("GET %s (round %d) with %d slow connections open: %v", path, i, slow, err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			cancel()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", path, res.StatusCode)
			}
			if i == 0 {
				t.Logf("GET %s answered in %s with the slow connections open", path, time.Since(began).Round(time.Millisecond))
			}
		}
		time.Sleep(50 * time.Millisecond) // the rounds spread over the trickle
	}

	wg.Wait()
	t.Logf("%d slow connections answered (%v) and closed %s after they opened", slow, answers, time.Since(start).Round(time.Millisecond))
	if len(failed) > 0 {
		t.Errorf("%d slow connections got no proper answer, e.g. %s", len(failed), failed[0])
	}
	if open > 0 {
		t.Errorf("%d slow connections were still open after their answer", open)
	}
	if answers[http.StatusRequestTimeout] != slow/3 || answers[http.StatusUnauthorized] != slow-slow/3 {
		t.Errorf("answers %v, want %d 408 and %d 401", answers, slow/3, slow-slow/3)
	}
}

// TestStreamOutlivesBodyTimeout: the body deadline is lifted once the body
// has been read, so a streamed turn runs for longer than the body timeout,
// and the connection then serves another request.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	const bodyTimeout = 250 * time.Millisecond
	g := newGate()
	s := newServer(t, func(o *httpapi.Options) { o.BodyTimeout = bodyTimeout }, &service.Agent{Name: "gateAgent", ServerManaged: true, Turn: g.turn})

	res := openStream(t, s, context.Background(), "gateAgent")
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	first := readFrame(t, br)
	// The body deadline is the server's wall clock: only time past it
	// shows it was lifted.
	time.Sleep(3 * bodyTimeout)
	close(g.release)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("stream cut after %s: %v", 3*bodyTimeout, err)
	}
	frames := parseFrames(t, first+string(rest))
	if last := frames[len(frames)-1]; last.Result == nil {
		t.Fatalf("stream %q does not end with the result", first+string(rest))
	}
	if res.Close {
		t.Error("a stream whose body was read closes its connection")
	}
	// The idle connection goes back to the pool and serves the next turn.
	r := s.postJSON(t, s.base+"/echoAgent", map[string]any{"data": userMessage("again")}, false)
	var out service.AgentOutput
	resultOf(t, r, &out)
}

func TestAddressRateLimit(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, func(o *httpapi.Options) { o.IPRateLimit = 0.5; o.IPRateBurst = 3 })
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)

	// The bucket is the address's, whatever the credential: made-up ones
	// use it up as well as real ones.
	for i, cred := range []string{"", "hp_made-up", admin} {
		if r := s.call(t, http.MethodGet, "/api/agents", cred, nil); r.status == http.StatusTooManyRequests {
			t.Fatalf("request %d within the burst: 429", i)
		}
	}
	for _, cred := range []string{admin, "hp_made-up"} {
		r := s.call(t, http.MethodGet, "/api/agents", cred, nil)
		e := errorOf(t, r, http.StatusTooManyRequests, service.CodeResourceExhausted)
		if !strings.Contains(e.Message, "address") {
			t.Errorf("message %q", e.Message)
		}
		if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 || secs > 2 {
			t.Errorf("Retry-After %q, want 1-2 seconds", r.header.Get("Retry-After"))
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if r := s.call(t, http.MethodGet, path, "", nil); r.status != http.StatusOK {
			t.Errorf("%s: %d, want 200: health checks are not limited", path, r.status)
		}
	}
}

func TestAddressRateLimitOffInDevMode(t *testing.T) {
	t.Parallel()
	// Dev mode's limit per address is RateLimit's; this one is off there.
	s := newServer(t, func(o *httpapi.Options) { o.IPRateLimit = 0.5; o.IPRateBurst = 1 })
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodGet, s.base, nil)
		if r := s.do(t, req); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
}

func TestEventStreamsPerCredential(t *testing.T) {
	t.Parallel()
	s := newAuthServer(t, func(o *httpapi.Options) { o.MaxEventStreams = 2 })
	s.tenant(t, "acme")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	other, _ := s.key(t, "acme", tenants.RoleAdmin)

	open := func(cred string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+cred)
		res, err := s.srv.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() { cancel(); res.Body.Close() })
		return res, cancel
	}
	streaming := func(res *http.Response) bool {
		if res.StatusCode != http.StatusOK {
			return false
		}
		line, err := bufio.NewReader(res.Body).ReadString('\n')
		return err == nil && line == ": subscribed\n"
	}
	first, closeFirst := open(admin)
	second, _ := open(admin)
	if !streaming(first) || !streaming(second) {
		t.Fatalf("streams within the cap: %d, %d", first.StatusCode, second.StatusCode)
	}
	third, _ := open(admin)
	b, _ := io.ReadAll(third.Body)
	errorOf(t, response{status: third.StatusCode, header: third.Header, body: b}, http.StatusTooManyRequests, service.CodeResourceExhausted)

	// The cap is per credential.
	if res, _ := open(other); !streaming(res) {
		t.Fatalf("another key's stream: %d", res.StatusCode)
	}

	// A stream that ends gives its slot back.
	closeFirst()
	for deadline := time.Now().Add(time.Minute); ; {
		res, cancel := open(admin)
		if streaming(res) {
			break
		}
		cancel()
		if time.Now().After(deadline) {
			t.Fatal("the slot of a closed stream was not released within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
