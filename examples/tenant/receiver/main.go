// Command receiver is a tenant's backend for examples/tenant/banking.prompt:
// it serves the transferMoney HTTP tool. It checks each call with
// httptool.VerifyToolCall: the Standard Webhooks signature against the
// tenant's tool secret, the timestamp, and that the call was made for
// transferMoney at the URL it serves (a call the model made to another tool
// of the tenant, signed with the same secret, is refused with 403 and
// nothing is executed). It executes each call id once (a retried or
// taken-over call gets the first answer again), and lists what it executed
// at GET /calls.
//
//	platform tenants tool-secret --tenant acme          # prints whsec_...
//	TOOL_SECRET=whsec_... go run ./examples/tenant/receiver --addr 127.0.0.1:8090
//
// --url is the tool URL of the agent definition when it is not
// http://ADDR/tools/transferMoney (behind a proxy, say).
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	toolURL := flag.String("url", "", "the URL transferMoney is served at, as the agent definition says (default http://ADDR/tools/transferMoney)")
	tenant := flag.String("tenant", "", "accept the calls of this tenant id only (default: any the secret signs for)")
	flag.Parse()
	secret, err := decodeSecret(os.Getenv("TOOL_SECRET"))
	if err != nil {
		log.Fatal("receiver: TOOL_SECRET: ", err)
	}
	if *toolURL == "" {
		*toolURL = "http://" + *addr + "/tools/transferMoney"
	}
	r := newReceiver([][]byte{secret}, httptool.Expect{Tool: "transferMoney", URL: *toolURL, Tenant: *tenant, Tolerance: 5 * time.Minute})
	log.Printf("receiver: listening on http://%s, serving transferMoney at %s", *addr, *toolURL)
	log.Fatal(http.ListenAndServe(*addr, r.routes()))
}

// decodeSecret reads a "whsec_<base64>" secret.
func decodeSecret(s string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "whsec_"))
}

type receiver struct {
	secrets [][]byte
	want    httptool.Expect // the tool and URL served
	mu      sync.Mutex
	done    map[string][]byte // call id -> the answer it got
	log     []executed
}

func newReceiver(secrets [][]byte, want httptool.Expect) *receiver {
	return &receiver{secrets: secrets, want: want, done: map[string][]byte{}}
}

func (r *receiver) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tools/transferMoney", r.transferMoney)
	mux.HandleFunc("GET /calls", r.calls)
	return mux
}

func (r *receiver) transferMoney(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	// The one check: signed by the platform, recently, for transferMoney
	// at this URL. A genuine call of another tool is not one of ours.
	c, err := httptool.VerifyToolCall(r.secrets, req, body, r.want)
	switch {
	case errors.Is(err, httptool.ErrBadSignature):
		log.Printf("receiver: refused a call: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	case errors.Is(err, httptool.ErrWrongTarget):
		log.Printf("receiver: refused a call: %v", err)
		http.Error(w, "not a transferMoney call", http.StatusForbidden)
		return
	case err != nil:
		http.Error(w, "bad call", http.StatusBadRequest)
		return
	}
	var in transfer
	if json.Unmarshal(c.Input, &in) != nil || in.Amount <= 0 || in.ToAccount == "" {
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
