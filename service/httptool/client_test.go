package httptool_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

var dev = httptool.Policy{AllowLoopback: true}

// callError returns err as a *CallError, failing the test when it is not one.
func callError(t *testing.T, err error) *httptool.CallError {
	t.Helper()
	var ce *httptool.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want a *CallError", err, err)
	}
	return ce
}

// checkFailure checks that a call failed with kind after attempts, the
// result agreeing with the error.
func checkFailure(t *testing.T, res *httptool.Result, err error, kind httptool.Kind, attempts int) *httptool.CallError {
	t.Helper()
	if err == nil {
		t.Fatalf("Do succeeded (%+v), want a %s failure", res, kind)
	}
	ce := callError(t, err)
	if ce.Kind != kind || ce.Attempts != attempts {
		t.Errorf("CallError kind %s after %d attempts (%v), want %s after %d", ce.Kind, ce.Attempts, err, kind, attempts)
	}
	if res == nil {
		t.Fatal("Do returned a nil Result")
	}
	if res.Attempts != ce.Attempts || res.Status != ce.Status {
		t.Errorf("Result %d attempts, status %d; CallError %d, %d", res.Attempts, res.Status, ce.Attempts, ce.Status)
	}
	return ce
}

// TestDoHappyPath sends a call signed with two secrets (a rotation) to a TLS
// receiver that checks every header and the signature, and echoes the body.
func TestDoHappyPath(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := []byte("old-secret"), []byte("new-secret")
	now := time.Unix(1_700_000_000, 0)
	var (
		mu  sync.Mutex
		got http.Header
	)
	s := newServer(t, true, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		for _, secret := range [][]byte{oldSecret, newSecret} {
			if err := httptool.Verify([][]byte{secret}, r.Header, body, now, time.Minute); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
		}
		if r.Method != http.MethodPost {
			http.Error(w, "method", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	c := newClient(t, dev, s)
	c.Now = func() time.Time { return now }
	req := request(s.URL + "/tools/lookup?v=1")
	req.Secrets = [][]byte{oldSecret, newSecret}
	res, err := c.Do(t.Context(), req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if res.Status != http.StatusOK || !bytes.Equal(res.Body, testBody) || res.Attempts != 1 || res.Duration <= 0 {
		t.Errorf("Result = %d %q after %d attempts in %v, want 200 echoing the body after 1", res.Status, res.Body, res.Attempts, res.Duration)
	}
	mu.Lock()
	defer mu.Unlock()
	for name, want := range map[string]string{
		"Content-Type":      "application/json",
		"User-Agent":        "holdpoint-tool/1",
		"Webhook-Id":        "call_0123",
		"Webhook-Timestamp": "1700000000",
	} {
		if v := got.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	if sigs := strings.Fields(got.Get("webhook-signature")); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Errorf("webhook-signature = %q, want two v1 signatures", got.Get("webhook-signature"))
	}
}

// TestDoRetriesKeepID has the receiver answer 503 twice, then 200: the call
// succeeds on its third attempt, every attempt carrying the same webhook-id
// and a valid signature of its own timestamp.
func TestDoRetriesKeepID(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		ids []string
		tss []string
	)
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := httptool.Verify([][]byte{testSecret}, r.Header, body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		tss = append(tss, r.Header.Get("webhook-timestamp"))
		n := len(ids)
		mu.Unlock()
		if n <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	c := newClient(t, dev, s)
	res, err := c.Do(t.Context(), request(s.URL))
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if res.Status != http.StatusOK || res.Attempts != 3 || string(res.Body) != `{"ok":true}` {
		t.Errorf("Result = %d %q after %d attempts, want 200 after 3", res.Status, res.Body, res.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 3 || ids[0] != "call_0123" || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Errorf("webhook-ids = %q, want call_0123 three times", ids)
	}
	if len(tss) != 3 {
		t.Errorf("webhook-timestamps = %q, want three", tss)
	}
}

func TestDoNoRetryOn4xx(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"error":"nope"}`))
			})
			c := newClient(t, dev, s)
			res, err := c.Do(t.Context(), request(s.URL))
			ce := checkFailure(t, res, err, httptool.KindStatus, 1)
			if ce.Status != status || res.Status != status || string(res.Body) != `{"error":"nope"}` {
				t.Errorf("status %d / %d, body %q; want %d and the error body", ce.Status, res.Status, res.Body, status)
			}
			if n := s.requests.Load(); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

// TestDo5xxExhausted has the receiver always answer 500: three attempts,
// the delays between them growing from Backoff.
func TestDo5xxExhausted(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, strings.Repeat("x", 100), http.StatusInternalServerError)
	})
	c := newClient(t, dev, s)
	c.Backoff = 20 * time.Millisecond
	c.MaxBody = 10 // a larger error body is cut, not an error
	res, err := c.Do(t.Context(), request(s.URL))
	ce := checkFailure(t, res, err, httptool.KindStatus, 3)
	if ce.Status != http.StatusInternalServerError || len(res.Body) != 10 {
		t.Errorf("status %d, body %q; want 500 and a body cut to 10 bytes", ce.Status, res.Body)
	}
	if n := s.requests.Load(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
	// 20ms and 40ms, each at least 80%.
	if min := 48 * time.Millisecond; res.Duration < min {
		t.Errorf("Duration = %v, want at least %v of backoff", res.Duration, min)
	}
	if !strings.Contains(err.Error(), "status 500") {
		t.Errorf("error %q does not name the status", err)
	}
}

// TestDoTimeout has the receiver hang: each attempt ends at its timeout, and
// the call soon after the last one.
func TestDoTimeout(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, hang)
	c := newClient(t, dev, s)
	c.Attempts = 2
	req := request(s.URL)
	req.Timeout = 100 * time.Millisecond
	start := time.Now()
	res, err := c.Do(t.Context(), req)
	elapsed := time.Since(start)
	ce := checkFailure(t, res, err, httptool.KindTimeout, 2)
	if ce.Status != 0 {
		t.Errorf("Status = %d, want 0 (no answer)", ce.Status)
	}
	if elapsed < 200*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("call took %v, want about 200ms", elapsed)
	}
}

func TestDoTooLarge(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		n := 1024
		if r.URL.Path == "/large" {
			n = 1025
		}
		_, _ = w.Write(bytes.Repeat([]byte("a"), n))
	})
	c := newClient(t, dev, s)
	c.MaxBody = 1024
	res, err := c.Do(t.Context(), request(s.URL+"/exact"))
	if err != nil || len(res.Body) != 1024 {
		t.Fatalf("Do of a MaxBody body: %d bytes, %v", len(res.Body), err)
	}
	res, err = c.Do(t.Context(), request(s.URL+"/large"))
	ce := checkFailure(t, res, err, httptool.KindTooLarge, 1)
	if ce.Status != http.StatusOK || res.Body != nil {
		t.Errorf("status %d, body of %d bytes; want 200 and no body", ce.Status, len(res.Body))
	}
}

// TestDoConnectionClosedEarly has the receiver hijack the connection and
// close it without answering: a network error, retried.
func TestDoConnectionClosedEarly(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		_ = conn.Close()
	})
	c := newClient(t, dev, s)
	res, err := c.Do(t.Context(), request(s.URL))
	ce := checkFailure(t, res, err, httptool.KindNetwork, 3)
	if ce.Status != 0 {
		t.Errorf("Status = %d, want 0", ce.Status)
	}
	if n := s.requests.Load(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

// TestDoRedirectRefused has the receiver redirect: the call is refused, not
// retried, and the redirect's target never hit.
func TestDoRedirectRefused(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		target int
	)
	s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/target" {
			mu.Lock()
			target++
			mu.Unlock()
			return
		}
		http.Redirect(w, r, "/target", http.StatusFound)
	})
	c := newClient(t, dev, s)
	res, err := c.Do(t.Context(), request(s.URL+"/hook"))
	ce := checkFailure(t, res, err, httptool.KindRefused, 1)
	if ce.Status != http.StatusFound || !strings.Contains(err.Error(), "tool URL answered a redirect") {
		t.Errorf("status %d, error %v; want 302 and a redirect refusal", ce.Status, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if target != 0 {
		t.Errorf("redirect target hit %d times", target)
	}
}

func TestDoContextCancelled(t *testing.T) {
	t.Parallel()
	t.Run("during an attempt", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, false, hang)
		c := newClient(t, dev, s)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		res, err := c.Do(ctx, request(s.URL))
		checkFailure(t, res, err, httptool.KindNetwork, 1)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v is not context.Canceled", err)
		}
		// The server hangs for 5 s: a call that ignored its cancellation
		// would end with the server's answer, not context.Canceled.
	})
	t.Run("before the call", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, false, func(http.ResponseWriter, *http.Request) {})
		c := newClient(t, dev, s)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res, err := c.Do(ctx, request(s.URL))
		checkFailure(t, res, err, httptool.KindNetwork, 0)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v is not context.Canceled", err)
		}
		s.untouched(t)
	})
	t.Run("during the backoff", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		})
		c := newClient(t, dev, s)
		// The deadline falls in the hour-long backoff, after the first
		// attempt's 502 (10 s leaves room for a loaded machine to make
		// that attempt): the call ends at the deadline, not the backoff's
		// end.
		c.Backoff = time.Hour
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		res, err := c.Do(ctx, request(s.URL))
		ce := checkFailure(t, res, err, httptool.KindTimeout, 1)
		if !errors.Is(err, context.DeadlineExceeded) || ce.Status != http.StatusBadGateway {
			t.Errorf("error %v, status %d; want context.DeadlineExceeded and the 502 kept", err, ce.Status)
		}
		if d := time.Since(start); d > 30*time.Second { // a backoff that ignored ctx takes 48 s or more
			t.Errorf("call took %v, the backoff did not honour the context", d)
		}
	})
}

// TestDoInvalidRequest checks that a malformed request is a plain error and
// sends nothing.
func TestDoInvalidRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t, false, func(http.ResponseWriter, *http.Request) {})
	c := newClient(t, dev, s)
	for name, mutate := range map[string]func(*httptool.Request){
		"no ID":        func(r *httptool.Request) { r.ID = "" },
		"ID with a LF": func(r *httptool.Request) { r.ID = "call\n1" },
		"no secret":    func(r *httptool.Request) { r.Secrets = nil },
		"empty secret": func(r *httptool.Request) { r.Secrets = [][]byte{testSecret, {}} },
		"not JSON":     func(r *httptool.Request) { r.Body = []byte("{") },
		"no body":      func(r *httptool.Request) { r.Body = nil },
	} {
		req := request(s.URL)
		mutate(&req)
		res, err := c.Do(t.Context(), req)
		var ce *httptool.CallError
		if err == nil || errors.As(err, &ce) || res == nil || res.Attempts != 0 {
			t.Errorf("%s: Do = %+v, %v; want a plain error and no attempt", name, res, err)
		}
	}
	s.untouched(t)
}

// TestDoMayHaveRun: a call whose request reached the receiver and got no
// answer (cut off, or its context ended while the receiver held it) may
// have run; one that was never sent, or was answered (even 5xx), did not.
func TestDoMayHaveRun(t *testing.T) {
	t.Parallel()
	t.Run("received, then cancelled", func(t *testing.T) {
		t.Parallel()
		got := make(chan struct{}, 1)
		s := newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
			got <- struct{}{}
			hang(w, r)
		})
		c := newClient(t, dev, s)
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-got
			cancel()
		}()
		res, err := c.Do(ctx, request(s.URL))
		if ce := checkFailure(t, res, err, httptool.KindNetwork, 1); !ce.MayHaveRun {
			t.Errorf("a call the receiver held until it was cancelled: MayHaveRun false")
		}
	})
	t.Run("received, connection closed", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err)
			}
			_ = conn.Close()
		})
		res, err := newClient(t, dev, s).Do(t.Context(), request(s.URL))
		if ce := checkFailure(t, res, err, httptool.KindNetwork, 3); !ce.MayHaveRun {
			t.Errorf("a call the receiver read and never answered: MayHaveRun false")
		}
	})
	t.Run("answered 5xx", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, false, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
		res, err := newClient(t, dev, s).Do(t.Context(), request(s.URL))
		if ce := checkFailure(t, res, err, httptool.KindStatus, 3); ce.MayHaveRun {
			t.Errorf("a call the receiver answered 502: MayHaveRun true")
		}
	})
	t.Run("never sent", func(t *testing.T) {
		t.Parallel()
		s := newServer(t, false, func(http.ResponseWriter, *http.Request) {})
		u := s.URL
		s.Close() // nothing listens on its port any more
		res, err := newClient(t, dev, nil).Do(t.Context(), request(u))
		if ce := checkFailure(t, res, err, httptool.KindNetwork, 3); ce.MayHaveRun {
			t.Errorf("a call whose connection was refused: MayHaveRun true")
		}
	})
}
