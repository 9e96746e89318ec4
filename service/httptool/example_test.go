package httptool_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

// Example shows a tenant's receiver, which verifies each call with Verify,
// and the platform calling it with a Client (AllowLoopback, since the
// receiver here listens on loopback).
func Example() {
	secret := []byte("whsec-of-this-tool")
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if err := httptool.Verify([][]byte{secret}, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// webhook-id is the call id: a receiver dedupes retries with it.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"received":%q}`, r.Header.Get("webhook-id"))
	}))
	defer receiver.Close()

	c := &httptool.Client{Policy: httptool.Policy{AllowLoopback: true}}
	res, err := c.Do(context.Background(), httptool.Request{
		URL:     receiver.URL + "/tools/lookup",
		ID:      "call_42",
		Body:    []byte(`{"account":"acc_1"}`),
		Secrets: [][]byte{secret},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, string(res.Body))
	// Output: 200 {"received":"call_42"}
}
