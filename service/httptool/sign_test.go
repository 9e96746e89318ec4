package httptool_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

// TestSignKnownVector checks Sign against the example of the Standard
// Webhooks specification.
func TestSignKnownVector(t *testing.T) {
	t.Parallel()
	secret, err := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := httptool.Sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

func signedHeader(id string, ts time.Time, body []byte, secrets ...[]byte) http.Header {
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = httptool.Sign(s, id, ts, body)
	}
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("webhook-signature", strings.Join(sigs, " "))
	return h
}

func TestVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"amount":12.5}`)
	h := signedHeader("call_1", now, body, secret)
	if err := httptool.Verify([][]byte{secret}, h, body, now.Add(30*time.Second), time.Minute); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"amount":12.5}`)
	good := func() http.Header { return signedHeader("call_1", now, body, secret) }
	tests := []struct {
		name    string
		secrets [][]byte
		header  func() http.Header
		body    []byte
		now     time.Time
		want    string
	}{
		{"wrong secret", [][]byte{[]byte("other")}, good, body, now, "no valid signature"},
		{"old timestamp", [][]byte{secret}, good, body, now.Add(6 * time.Minute), "too old"},
		{"future timestamp", [][]byte{secret}, good, body, now.Add(-6 * time.Minute), "too new"},
		{"tampered body", [][]byte{secret}, good, []byte(`{"amount":1250}`), now, "no valid signature"},
		{"no secrets", nil, good, body, now, "no secret"},
		{"missing id", [][]byte{secret}, func() http.Header { h := good(); h.Del("webhook-id"); return h }, body, now, "missing webhook-id"},
		{"missing timestamp", [][]byte{secret}, func() http.Header { h := good(); h.Del("webhook-timestamp"); return h }, body, now, "missing webhook-timestamp"},
		{"missing signature", [][]byte{secret}, func() http.Header { h := good(); h.Del("webhook-signature"); return h }, body, now, "missing webhook-signature"},
		{"bad timestamp", [][]byte{secret}, func() http.Header { h := good(); h.Set("webhook-timestamp", "soon"); return h }, body, now, "invalid webhook-timestamp"},
		{"other id", [][]byte{secret}, func() http.Header { h := good(); h.Set("webhook-id", "call_2"); return h }, body, now, "no valid signature"},
		{"other version", [][]byte{secret}, func() http.Header {
			h := good()
			h.Set("webhook-signature", "v2,"+strings.TrimPrefix(h.Get("webhook-signature"), "v1,"))
			return h
		}, body, now, "no valid signature"},
		{"garbage signature", [][]byte{secret}, func() http.Header { h := good(); h.Set("webhook-signature", "v1,!!!"); return h }, body, now, "no valid signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := httptool.Verify(tt.secrets, tt.header(), tt.body, tt.now, 5*time.Minute)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Verify = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestVerifyRotation checks both sides of a secret rotation: a receiver
// holding two secrets accepts a call signed with either, and a receiver
// holding one accepts a header carrying two signatures.
func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	oldSecret, newSecret := []byte("old"), []byte("new")
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{}`)
	for _, s := range [][]byte{oldSecret, newSecret} {
		h := signedHeader("call_1", now, body, s)
		if err := httptool.Verify([][]byte{oldSecret, newSecret}, h, body, now, 0); err != nil {
			t.Errorf("Verify with two secrets, signed by %q: %v", s, err)
		}
	}
	h := signedHeader("call_1", now, body, oldSecret, newSecret)
	for _, s := range [][]byte{oldSecret, newSecret} {
		if err := httptool.Verify([][]byte{s}, h, body, now, 0); err != nil {
			t.Errorf("Verify of two signatures with %q: %v", s, err)
		}
	}
}
