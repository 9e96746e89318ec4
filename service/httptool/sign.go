package httptool

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers.
const (
	headerID        = "webhook-id"
	headerTimestamp = "webhook-timestamp"
	headerSignature = "webhook-signature"
)

// defaultTolerance is Verify's tolerance when it is given none.
const defaultTolerance = 5 * time.Minute

// Sign returns the Standard Webhooks signature header value for one secret:
// "v1," + base64(HMAC-SHA256(secret, id + "." + unixSeconds + "." + body)).
func Sign(secret []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(secret, id, ts.Unix(), body))
}

func mac(secret []byte, id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks the webhook-id, webhook-timestamp (within tolerance of now)
// and webhook-signature headers of a received call against any of secrets
// (the header may carry several space-separated "v1,..." signatures). A
// tolerance of zero or less means five minutes. Signatures of versions other
// than v1 are ignored.
//
// Verify is enough for a webhook, whose secret is the endpoint's own. A
// tool receiver must use VerifyToolCall instead: every tool of a tenant is
// signed with the one tool secret, so Verify would accept at one tool's
// endpoint a call the model made to another.
func Verify(secrets [][]byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secrets) == 0 {
		return errors.New("webhook: no secret to verify with")
	}
	if tolerance <= 0 {
		tolerance = defaultTolerance
	}
	id := h.Get(headerID)
	if id == "" {
		return errors.New("webhook: missing webhook-id header")
	}
	tsText := h.Get(headerTimestamp)
	if tsText == "" {
		return errors.New("webhook: missing webhook-timestamp header")
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: invalid webhook-timestamp header %q", tsText)
	}
	sent := time.Unix(ts, 0)
	if sent.Before(now.Add(-tolerance)) {
		return errors.New("webhook: webhook-timestamp is too old")
	}
	if sent.After(now.Add(tolerance)) {
		return errors.New("webhook: webhook-timestamp is too new")
	}
	sigs := strings.Fields(strings.Join(h.Values(headerSignature), " "))
	if len(sigs) == 0 {
		return errors.New("webhook: missing webhook-signature header")
	}
	want := make([][]byte, 0, len(secrets))
	for _, s := range secrets {
		if len(s) > 0 {
			want = append(want, mac(s, id, ts, body))
		}
	}
	for _, sig := range sigs {
		version, enc, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				return nil
			}
		}
	}
	return errors.New("webhook: no valid signature")
}
