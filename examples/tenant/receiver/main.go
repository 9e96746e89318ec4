// Command receiver is a tenant's backend for examples/tenant/banking.prompt:
// it serves the transferMoney HTTP tool. It checks each call's Standard
// Webhooks signature against the tenant's tool secret, executes each call
// id once (a retried or taken-over call gets the first answer again), and
// lists what it executed at GET /calls.
//
//	platform tenants tool-secret --tenant acme          # prints whsec_...
//	TOOL_SECRET=whsec_... go run ./examples/tenant/receiver --addr 127.0.0.1:8090
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

// call is what the platform POSTs.
type call struct {
	Tool      string          `json:"tool"`
	CallID    string          `json:"callId"`
	Input     json.RawMessage `json:"input"`
	SessionID string          `json:"sessionId"`
	EndUser   string          `json:"endUser,omitempty"`
	Resumed   json.RawMessage `json:"resumed,omitempty"`
}

// transfer is transferMoney's input.
type transfer struct {
	Amount    float64 `json:"amount"`
	ToAccount string  `json:"toAccount"`
}

// executed is a transfer the receiver made.
type executed struct {
	CallID        string  `json:"callId"`
	SessionID     string  `json:"sessionId"`
	Amount        float64 `json:"amount"`
	ToAccount     string  `json:"toAccount"`
	TransactionID string  `json:"transactionId"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	flag.Parse()
	secret, err := decodeSecret(os.Getenv("TOOL_SECRET"))
	if err != nil {
		log.Fatal("receiver: TOOL_SECRET: ", err)
	}
	r := &receiver{secrets: [][]byte{secret}, done: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/transferMoney", r.transferMoney)
	mux.HandleFunc("GET /calls", r.calls)
	log.Printf("receiver: listening on http://%s", *addr)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// decodeSecret reads a "whsec_<base64>" secret.
func decodeSecret(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "whsec_"))
}

type receiver struct {
	secrets [][]byte
	mu      sync.Mutex
	done    map[string][]byte // call id -> the answer it got
	log     []executed
}

func (r *receiver) transferMoney(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if err := httptool.Verify(r.secrets, req.Header, body, time.Now(), 5*time.Minute); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var c call
	var in transfer
	if json.Unmarshal(body, &c) != nil || json.Unmarshal(c.Input, &in) != nil || in.Amount <= 0 || in.ToAccount == "" {
		http.Error(w, "bad call", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	answer, seen := r.done[c.CallID]
	if !seen {
		e := executed{CallID: c.CallID, SessionID: c.SessionID, Amount: in.Amount, ToAccount: in.ToAccount, TransactionID: "txn-" + rand.Text()[:10]}
		r.log = append(r.log, e)
		answer, _ = json.Marshal(map[string]any{"output": map[string]any{"success": true, "transactionId": e.TransactionID}})
		r.done[c.CallID] = answer
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(answer)
}

func (r *receiver) calls(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"executed": append([]executed{}, r.log...)})
}
