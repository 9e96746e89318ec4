package httptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/holdpoint/holdpoint/service/httptool"
)

// Example shows a tenant's receiver of the tool lookup, which verifies
// each call with VerifyToolCall, and the platform calling it with a Client
// (AllowLoopback, since the receiver here listens on loopback).
func Example() {
	secret := []byte("whsec-of-this-tool")
	var toolURL string // where the receiver serves lookup, as the tenant's definition says
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		call, err := httptool.VerifyToolCall([][]byte{secret}, r, body, httptool.Expect{Tool: "lookup", URL: toolURL})
		switch {
		case errors.Is(err, httptool.ErrBadSignature):
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, "not a call of this tool", http.StatusForbidden)
			return
		}
		// call.CallID is the same on every retry: a receiver executes
		// each one once.
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"output":{"received":%q}}`, call.CallID)
	}))
	defer receiver.Close()
	toolURL = receiver.URL + "/tools/lookup"

	body, _ := json.Marshal(httptool.ToolCall{Tenant: "acme", Agent: "bankingAgent", AgentVersion: 1, Tool: "lookup",
		URL: toolURL, CallID: "call_42", Input: json.RawMessage(`{"account":"acc_1"}`), SessionID: "s1"})
	c := &httptool.Client{Policy: httptool.Policy{AllowLoopback: true}}
	res, err := c.Do(context.Background(), httptool.Request{
		URL:     toolURL,
		ID:      "call_42",
		Body:    body,
		Secrets: [][]byte{secret},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, string(res.Body))
	// Output: 200 {"output":{"received":"call_42"}}
}
