package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/httptool"
)

// invokeAgent runs a turn of agent on s and returns its output.
func (s *server) invokeAgent(t *testing.T, agent string, init service.AgentInit, in service.AgentInput) *service.AgentOutput {
	t.Helper()
	body, err := json.Marshal(map[string]any{"data": in, "init": init})
	if err != nil {
		t.Fatal(err)
	}
	res, err := httpClient.Post(s.base+"/api/agents/"+agent, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	out, err := answer{status: res.StatusCode, body: b}.output()
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	return out
}

// TestKilledWorkerRetriesTheHTTPToolWithTheSameCallID kills the instance
// that is calling a tenant's HTTP tool (the receiver holds the call open):
// the instance that takes the detached turn over calls again with the same
// call id, the receiver executes it once, and the turn completes.
func TestKilledWorkerRetriesTheHTTPToolWithTheSameCallID(t *testing.T) {
	t.Parallel()
	url := testdb.URL(t)
	pool := testdb.OwnerPool(t, url)

	// The tenant's backend: verifies the signature, executes each call id
	// once; it holds the first call open until A is dead.
	var mu sync.Mutex
	var calls []string
	executed := map[string]string{}
	firstCall := make(chan struct{})
	aDead := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var secrets [][]byte
		rows, err := pool.Query(context.Background(), "SELECT secret FROM tenant_secrets WHERE tenant_id = 'default' AND purpose = 'tool'")
		if err == nil {
			for rows.Next() {
				var s []byte
				_ = rows.Scan(&s)
				secrets = append(secrets, s)
			}
			rows.Close()
		}
		if err := httptool.Verify(secrets, req.Header, body, time.Now(), time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var call struct{ CallID string }
		_ = json.Unmarshal(body, &call)
		mu.Lock()
		calls = append(calls, call.CallID)
		n := len(calls)
		tx, seen := executed[call.CallID]
		if !seen {
			tx = "txn-" + strconv.Itoa(len(executed)+1)
			executed[call.CallID] = tx
		}
		mu.Unlock()
		if n == 1 {
			close(firstCall)
			select {
			case <-aDead:
			case <-time.After(30 * time.Second):
			}
			return // A is gone: nobody reads this answer
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output":{"success":true,"transactionId":"` + tx + `"}}`))
	}))
	defer recv.Close()

	a := startServer(t, "A", url, serverOpts{})
	b := startServer(t, "B", url, serverOpts{})
	src, err := os.ReadFile("../../examples/tenant/banking.prompt")
	if err != nil {
		t.Fatal(err)
	}
	prompt := strings.NewReplacer("name: bankingAgent", "name: tenantBanking", "http://127.0.0.1:8090", recv.URL).Replace(string(src))
	req, _ := http.NewRequest(http.MethodPut, a.base+"/api/v1/agents/tenantBanking", strings.NewReader(prompt))
	req.Header.Set("Content-Type", "text/x-dotprompt")
	res, err := httpClient.Do(req)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT the agent: %v %v", err, res)
	}
	res.Body.Close()

	account := strconv.Itoa(100000 + rand.IntN(900000))
	first := a.invokeAgent(t, "tenantBanking", service.AgentInit{}, service.AgentInput{Message: userMessage("Transfer $50 to account " + account)})
	ref := approvalRef(t, first)
	out := a.invokeAgent(t, "tenantBanking", service.AgentInit{SnapshotID: first.SnapshotID}, service.AgentInput{
		Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
			Name: "userApproval", Ref: ref, Output: json.RawMessage(`{"approved":true}`)}}}},
		Detach: true,
	})
	if out.FinishReason != service.FinishDetached {
		t.Fatalf("detached resume answered %+v", out)
	}
	select {
	case <-firstCall:
	case <-time.After(30 * time.Second):
		t.Fatal("A never called the tool")
	}
	a.kill(t)
	close(aDead)

	waitUntil(t, "B to complete the taken-over turn", 2*time.Minute, func() bool {
		snap := b.mustSnapshotOf(t, "tenantBanking", out.SnapshotID)
		if snap.Status == service.StatusFailed || snap.Status == service.StatusAborted {
			t.Fatalf("the taken-over turn ended %s: %+v", snap.Status, snap.Error)
		}
		return snap.Status == service.StatusCompleted
	})
	mu.Lock()
	defer mu.Unlock()
	// A's call and B's retry, with one call id, executed once. On a loaded
	// machine B's own lease can lapse while its retry runs, and B takes the
	// turn over again: a third call, with the same id, still executed once.
	if len(calls) < 2 || slices.ContainsFunc(calls, func(c string) bool { return c != calls[0] }) || len(executed) != 1 {
		t.Fatalf("receiver saw calls %v and executed %v: want the same call id at least twice, executed once", calls, executed)
	}
	if len(calls) > 2 {
		t.Logf("the call was retried %d times (a lease lapsed under load)", len(calls)-1)
	}
	snap := b.mustSnapshotOf(t, "tenantBanking", out.SnapshotID)
	msgs := snap.State.Messages
	if last := msgs[len(msgs)-1].Text(); !strings.HasPrefix(last, "Done: transferred $50.00 to account "+account+" (transaction txn-1)") {
		t.Fatalf("the turn ended with %q", last)
	}
	if n := count(t, pool, "SELECT count(*) FROM tool_calls WHERE turn_id = $1 AND tool = 'transferMoney' AND status = 'succeeded' AND http_status = 200", out.SnapshotID); n != 1 {
		t.Errorf("%d succeeded transferMoney rows, want 1", n)
	}
	if !b.logContains("running again an idempotent tool call") {
		t.Errorf("B's log does not show the call run again")
	}
}

// mustSnapshotOf looks a snapshot of agent up by id.
func (s *server) mustSnapshotOf(t *testing.T, agent, id string) *service.Snapshot {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"data": service.SnapshotLookup{SnapshotID: id}})
	res, err := httpClient.Post(s.base+"/api/agents/"+agent+"/getSnapshot", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var r struct{ Result *service.Snapshot }
	if err := json.Unmarshal(b, &r); err != nil || r.Result == nil {
		t.Fatalf("%s getSnapshot %s: %d %s", s.name, id, res.StatusCode, b)
	}
	return r.Result
}
