package httptool_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

const transferURL = "https://bank.example.com/tools/transferMoney"

// toolCallBody is a call body as the platform sends it.
func toolCallBody(t *testing.T, tool, url string) []byte {
	t.Helper()
	b, err := json.Marshal(httptool.ToolCall{Tenant: "acme", Agent: "bankingAgent", AgentVersion: 3, Tool: tool, URL: url,
		CallID: "call_1", Input: json.RawMessage(`{"amount":5000,"toAccount":"ATTACKER"}`), SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signedRequest is the request a receiver gets for body, signed at ts.
func signedRequest(body []byte, ts time.Time) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/tools/transferMoney", nil)
	r.Header = signedHeader("call_1", ts, body, testSecret)
	r.Header.Set("Idempotency-Key", "call_1")
	return r
}

func TestVerifyToolCallAccepts(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	body := toolCallBody(t, "transferMoney", transferURL)
	// The receiver's URL may be written in another but equivalent form.
	for _, u := range []string{transferURL, "HTTPS://Bank.Example.COM./tools/transferMoney", "https://bank.example.com:443/tools/transferMoney?x=1"} {
		c, err := httptool.VerifyToolCall([][]byte{testSecret}, signedRequest(body, now), body,
			httptool.Expect{Tool: "transferMoney", URL: u, Tenant: "acme", Now: now.Add(time.Minute)})
		if err != nil {
			t.Fatalf("VerifyToolCall with URL %s: %v", u, err)
		}
		if c.CallID != "call_1" || c.Tenant != "acme" || c.Agent != "bankingAgent" || c.AgentVersion != 3 || string(c.Input) != `{"amount":5000,"toAccount":"ATTACKER"}` {
			t.Fatalf("parsed call %+v", c)
		}
	}
}

// TestVerifyToolCallRefuses checks each way a genuine or forged call may
// reach the wrong receiver: the attacker's quoteFee call replayed to
// transferMoney, a call to another URL, a tampered body, a stale
// timestamp.
func TestVerifyToolCallRefuses(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	good := toolCallBody(t, "transferMoney", transferURL)
	want := httptool.Expect{Tool: "transferMoney", URL: transferURL, Now: now}
	cases := []struct {
		name   string
		body   []byte // signed
		sent   []byte // received (nil: body)
		at     time.Time
		edit   func(r *http.Request)
		expect httptool.Expect
		is     error
	}{
		{name: "tool mismatch", body: toolCallBody(t, "quoteFee", transferURL), is: httptool.ErrWrongTarget},
		{name: "quoteFee at its own URL", body: toolCallBody(t, "quoteFee", "https://bank.example.com/tools/quoteFee"), is: httptool.ErrWrongTarget},
		{name: "URL mismatch", body: toolCallBody(t, "transferMoney", "https://bank.example.com/tools/transferMoney/"), is: httptool.ErrWrongTarget},
		{name: "other host", body: toolCallBody(t, "transferMoney", "https://evil.example.com/tools/transferMoney"), is: httptool.ErrWrongTarget},
		{name: "other scheme", body: toolCallBody(t, "transferMoney", "http://bank.example.com/tools/transferMoney"), is: httptool.ErrWrongTarget},
		{name: "other port", body: toolCallBody(t, "transferMoney", "https://bank.example.com:8443/tools/transferMoney"), is: httptool.ErrWrongTarget},
		{name: "no URL", body: toolCallBody(t, "transferMoney", ""), is: httptool.ErrWrongTarget},
		{name: "other tenant", body: good, expect: httptool.Expect{Tool: "transferMoney", URL: transferURL, Tenant: "rival", Now: now}, is: httptool.ErrWrongTarget},
		{name: "tampered body", body: toolCallBody(t, "quoteFee", transferURL), sent: good, is: httptool.ErrBadSignature},
		{name: "stale timestamp", body: good, at: now.Add(-6 * time.Minute), is: httptool.ErrBadSignature},
		{name: "future timestamp", body: good, at: now.Add(6 * time.Minute), is: httptool.ErrBadSignature},
		{name: "unsigned", body: good, edit: func(r *http.Request) { r.Header.Del("webhook-signature") }, is: httptool.ErrBadSignature},
		{name: "other idempotency key", body: good, edit: func(r *http.Request) { r.Header.Set("Idempotency-Key", "call_2") }, is: httptool.ErrWrongTarget},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at := tc.at
			if at.IsZero() {
				at = now
			}
			r := signedRequest(tc.body, at)
			if tc.edit != nil {
				tc.edit(r)
			}
			sent := tc.sent
			if sent == nil {
				sent = tc.body
			}
			expect := tc.expect
			if expect.Tool == "" {
				expect = want
			}
			c, err := httptool.VerifyToolCall([][]byte{testSecret}, r, sent, expect)
			if c != nil || !errors.Is(err, tc.is) {
				t.Fatalf("VerifyToolCall = %+v, %v; want an error wrapping %v", c, err, tc.is)
			}
		})
	}
}

// TestVerifyToolCallNeedsTheTarget checks a receiver cannot skip the tool
// and URL checks by leaving them out.
func TestVerifyToolCallNeedsTheTarget(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := toolCallBody(t, "transferMoney", transferURL)
	for _, want := range []httptool.Expect{{URL: transferURL}, {Tool: "transferMoney"}, {Tool: "transferMoney", URL: "/tools/transferMoney"}} {
		if _, err := httptool.VerifyToolCall([][]byte{testSecret}, signedRequest(body, now), body, want); err == nil {
			t.Errorf("VerifyToolCall with %+v accepted the call", want)
		}
	}
}

// TestClientSendsIdempotencyKey checks a call carries its id as
// Idempotency-Key, the same as webhook-id, and that what a Client sends
// passes VerifyToolCall at the URL it was sent to.
func TestClientSendsIdempotencyKey(t *testing.T) {
	t.Parallel()
	var got error
	var key, id string
	var srv *server
	srv = newServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key, id = r.Header.Get("Idempotency-Key"), r.Header.Get("webhook-id")
		_, got = httptool.VerifyToolCall([][]byte{testSecret}, r, body, httptool.Expect{Tool: "lookup", URL: srv.URL + "/tools/lookup"})
		w.Write([]byte(`{}`))
	})
	c := newClient(t, httptool.Policy{AllowLoopback: true}, srv)
	req := request(srv.URL + "/tools/lookup")
	req.ID = "call_1"
	req.Body = toolCallBody(t, "lookup", srv.URL+"/tools/lookup")
	if _, err := c.Do(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if key != "call_1" || id != "call_1" || got != nil {
		t.Fatalf("Idempotency-Key %q, webhook-id %q, VerifyToolCall: %v", key, id, got)
	}
}
