package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/hostile"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
)

// The chaos run (issue 30): conversations with a tenant agent whose
// attacker-scripted model asks for one `transfer` each, an HTTP tool that
// needs approval, decided through every path a client has while instances
// are killed and PostgreSQL restarts; then a ledger of what the receiver,
// outside the database, executed against what the clients were told.

// Conversation kinds: approvals through the four paths, denials through
// two, and approvals never answered.
const (
	chaosApproveJSON   = "approve-json"
	chaosApproveStream = "approve-stream"
	chaosApproveInbox  = "approve-inbox"
	chaosApproveDetach = "approve-detach"
	chaosDenyJSON      = "deny-json"
	chaosDenyInbox     = "deny-inbox"
	chaosUnanswered    = "unanswered"
)

// chaosConversations is the run's size: HOLDPOINT_CHAOS_CONVERSATIONS, or
// 200 (40 with -short).
func chaosConversations(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("HOLDPOINT_CHAOS_CONVERSATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 || n > 5000 {
			t.Fatalf("HOLDPOINT_CHAOS_CONVERSATIONS=%q: want a whole number from 10 to 5000", v)
		}
		return n
	}
	if testing.Short() {
		return 40
	}
	return 200
}

// chaosPlan is the kind of every conversation, shuffled: of 200, 146
// approvals (about a quarter per path), 36 denials, 18 unanswered.
func chaosPlan(n int, rng *rand.Rand) []string {
	approve := n * 146 / 200
	deny := n * 36 / 200
	kinds := make([]string, 0, n)
	paths := []string{chaosApproveJSON, chaosApproveStream, chaosApproveInbox, chaosApproveDetach}
	for i := range approve {
		kinds = append(kinds, paths[i%len(paths)])
	}
	for i := range deny {
		kinds = append(kinds, []string{chaosDenyJSON, chaosDenyInbox}[i%2])
	}
	for len(kinds) < n {
		kinds = append(kinds, chaosUnanswered)
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	return kinds
}

func chaosApproves(kind string) bool { return strings.HasPrefix(kind, "approve-") }

// chaosReceiver is the tenant's transfer endpoint: it records every call
// it executes (by the ref the conversation put in the input, with the
// Idempotency-Key), after a short delay that widens the window between a
// transfer and the write of its outcome.
type chaosReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string][]delivery // ref -> each call it executed
}

// delivery is one call the receiver got: its Idempotency-Key and when.
type delivery struct {
	key string
	at  time.Time
}

func (d delivery) String() string { return d.key + "@" + d.at.Format("15:04:05.000") }

func newChaosReceiver(t *testing.T) *chaosReceiver {
	r := &chaosReceiver{calls: map[string][]delivery{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var call struct {
			Input struct {
				Ref string `json:"ref"`
			} `json:"input"`
		}
		body, _ := io.ReadAll(req.Body)
		if req.URL.Path != "/transfer" || json.Unmarshal(body, &call) != nil || call.Input.Ref == "" {
			http.Error(w, "not a transfer", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.calls[call.Input.Ref] = append(r.calls[call.Input.Ref], delivery{req.Header.Get("Idempotency-Key"), time.Now()})
		r.mu.Unlock()
		time.Sleep(time.Duration(5+rand.IntN(45)) * time.Millisecond) // the receiver's work
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output":{"ok":true}}`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *chaosReceiver) executions(ref string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.calls[ref]...)
}

// idempotentReceiver says whether a call repeated with the same
// Idempotency-Key counts as executed once (HOLDPOINT_CHAOS_IDEMPOTENT_RECEIVER=1:
// the receiver docs/durability.md asks for, which answers a repeat from its
// first answer) or, by default, as duplicated: the repeat reached the
// receiver.
func idempotentReceiver() bool { return os.Getenv("HOLDPOINT_CHAOS_IDEMPOTENT_RECEIVER") == "1" }

// sameKey reports whether every delivery carried the first one's key.
func sameKey(ds []delivery) bool {
	for _, d := range ds {
		if d.key != ds[0].key {
			return false
		}
	}
	return true
}

// chaosPrompt is the tenant agent: the attacker's model and one transfer
// tool that a human approves (restart) or skips (respond {"ok": false}).
func chaosPrompt(receiver string) string {
	return `---
name: chaos
model: openai/gpt-4o-mini
holdpoint:
  maxToolRounds: 5
  httpTools:
    - name: transfer
      url: ` + receiver + `/transfer
      approval: true
      timeout: 5s
      input: {schema: {ref: string}}
      output:
        schema:
          ok?: boolean
---
You move money when asked.
`
}

// chaosSlot is one of the two instances, restarted (on a new port) after
// each fault that ends it; clients read its address per request.
type chaosSlot struct {
	name string
	url  string
	opts serverOpts
	mu   sync.Mutex
	s    *server
	gen  int
	all  []*server // every process the slot started, for the report
}

func (sl *chaosSlot) current() *server {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.s
}

// start starts the slot's next process and waits until it is ready.
func (sl *chaosSlot) start(t *testing.T) {
	t.Helper()
	sl.mu.Lock()
	sl.gen++
	name := fmt.Sprintf("%s%d", sl.name, sl.gen)
	sl.mu.Unlock()
	s := startServer(t, name, sl.url, sl.opts)
	sl.mu.Lock()
	sl.s = s
	sl.all = append(sl.all, s)
	sl.mu.Unlock()
}

// chaosConv is one conversation: what its client did and was told.
type chaosConv struct {
	i       int
	ref     string
	kind    string
	session string // of the first turn the client saw answered
	paused  string // its snapshot, paused on the transfer
	ask     *service.ToolRequest
	// accepted: the client saw its decision taken (an answer, or a 409 to
	// a retry after an attempt whose outcome it did not learn).
	accepted bool
	detached string   // the detached resume's snapshot
	again    bool     // the resume is sent again after an answer that took nothing
	history  []string // every answer, with its time, for the report
	body     []byte   // the body of the last answer
	refused  bool     // a final answer that took nothing
	start    time.Time
	end      time.Time
}

// chaosRun is one run: its instances, clients and tallies.
type chaosRun struct {
	t      *testing.T
	pg     *pgCluster
	direct string // the database, not through any pooler
	slots  [2]*chaosSlot
	recv   *chaosReceiver
	convs  []*chaosConv
	client *http.Client
	ctx    context.Context

	issued atomic.Int64 // conversations started
	// failed counts the requests that got no answer or a 503: a fault
	// waits for requests to meet it.
	failed atomic.Int64
	gateMu sync.Mutex
	gate   int // conversations that may start before the next fault is done
	faults []chaosFaultAt

	mu   sync.Mutex
	errs map[string]int
}

type chaosFaultAt struct {
	name       string
	start, end time.Time
}

func (r *chaosRun) tally(kind string) {
	r.mu.Lock()
	r.errs[kind]++
	r.mu.Unlock()
}

// pick is the instance a request's attempt goes to: the conversation's
// own first, the other on each retry, as behind a load balancer.
func (r *chaosRun) pick(i, attempt int) *server {
	return r.slots[(i+attempt)%2].current()
}

// chaosAnswer is one attempt's answer: a status and body, or an error.
type chaosAnswer struct {
	status int
	body   []byte
	err    error
}

// do sends one request (its answer's body noted on c, when there is one).
func (r *chaosRun) do(c *chaosConv, s *server, method, path string, body any, stream bool) chaosAnswer {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.ctx, method, s.base+path, rd)
	if err != nil {
		return chaosAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	res, err := r.client.Do(req)
	if err != nil {
		r.failed.Add(1)
		return chaosAnswer{err: err}
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusServiceUnavailable {
		r.failed.Add(1)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if c != nil {
		c.body = b
	}
	return chaosAnswer{status: res.StatusCode, body: b, err: err}
}

// verdict is what a client makes of an attempt.
type verdict int

const (
	retrySafe      verdict = iota // nothing decided yet: send it again
	retryAmbiguous                // it may have been taken: send it again, a 409 then means taken
	taken                         // the decision (or first turn) was taken
	refused                       // a final answer that took nothing
)

// retry sends a request until its answer is final, with bounded backoff,
// tallying every answer that is not the first-time success. It returns
// whether it was taken.
func (r *chaosRun) retry(c *chaosConv, try func(s *server, ambiguous bool) (verdict, string)) bool {
	ambiguous := false
	for attempt := range 30 {
		if r.ctx.Err() != nil {
			return false
		}
		v, kind := try(r.pick(c.i, attempt), ambiguous)
		if kind != "" {
			r.tally(kind)
		}
		c.history = append(c.history, fmt.Sprintf("%s@%s", cmp.Or(kind, "ok"), time.Now().Format("15:04:05.000")))
		if v == refused {
			c.history = append(c.history, fmt.Sprintf("%q", c.body))
		}
		switch v {
		case taken:
			return true
		case refused:
			c.refused = true
			return false
		case retryAmbiguous:
			ambiguous = true
		}
		d := min(50*time.Millisecond<<attempt, 2*time.Second)
		time.Sleep(d/2 + rand.N(d/2))
	}
	r.tally("gave-up")
	c.history = append(c.history, "gave-up")
	return false
}

// classify reads an answer as a client does, for a request that is
// retried on 5xx and transport errors.
func classify(a chaosAnswer, ambiguous bool) (verdict, string) {
	switch {
	case a.err != nil:
		return retryAmbiguous, "transport"
	case a.status == http.StatusServiceUnavailable || a.status == http.StatusTooManyRequests:
		// Refused before anything was done (a 429 is the bound on
		// detached turns): the request again, later.
		return retrySafe, strconv.Itoa(a.status)
	case a.status >= 500:
		return retryAmbiguous, strconv.Itoa(a.status)
	case a.status == http.StatusConflict && ambiguous:
		return taken, "409-after-retry"
	case a.status != http.StatusOK:
		var e errorBody
		_ = json.Unmarshal(a.body, &e)
		return refused, fmt.Sprintf("%d-%s", a.status, e.Status)
	}
	return taken, ""
}

// turnVerdict reads a protocol turn's output: a failed turn for want of
// the database is retried; another failed one is final. An aborted turn
// is retried too: a turn that lost its guard (its heartbeat failed while
// PostgreSQL was down) gives its claim back and ends aborted, leaving the
// approval pending for the client to send again; a retry that finds it
// taken after all counts as taken (409 after a retry).
func turnVerdict(out *service.AgentOutput) (verdict, string) {
	if out.FinishReason == service.FinishAborted {
		return retryAmbiguous, "200-aborted"
	}
	if out.FinishReason != service.FinishFailed {
		return taken, ""
	}
	status := ""
	if out.Error != nil {
		status = out.Error.Status
	}
	switch status {
	case service.CodeUnavailable, service.CodeInternal:
		return retryAmbiguous, "200-failed-" + status
	}
	return taken, "200-failed-" + status
}

// firstTurn asks for the transfer: the turn pauses on its approval.
func (r *chaosRun) firstTurn(c *chaosConv) bool {
	msg := fmt.Sprintf(`CALL transfer x1 {"ref":%q}`, c.ref)
	return r.retry(c, func(s *server, ambiguous bool) (verdict, string) {
		a := r.do(c, s, http.MethodPost, "/api/agents/chaos", map[string]any{"data": service.AgentInput{Message: userMessage(msg)}}, false)
		v, kind := classify(a, false)
		if v != taken {
			return v, "first-turn-" + kind
		}
		out, err := answer{status: a.status, body: a.body}.output()
		if err != nil {
			return retryAmbiguous, "first-turn-undecodable"
		}
		if out.FinishReason != service.FinishInterrupted {
			v, kind := turnVerdict(out)
			if v == taken {
				return refused, "first-turn-" + string(out.FinishReason)
			}
			return v, "first-turn-" + kind
		}
		for _, p := range out.Message.Content {
			if _, ok := p.Metadata["interrupt"]; ok && p.ToolRequest != nil {
				c.ask = p.ToolRequest
			}
		}
		if c.ask == nil {
			return refused, "first-turn-no-interrupt"
		}
		c.session, c.paused = out.SessionID, out.SnapshotID
		return taken, ""
	})
}

// resume decides through the protocol: a restart approves, a respond
// denies; streamed or detached as the kind says.
func (r *chaosRun) resume(c *chaosConv) bool {
	in := service.AgentInput{Resume: &service.Resume{Restart: []service.Part{{ToolRequest: c.ask}}}}
	if !chaosApproves(c.kind) {
		in = service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
			Name: c.ask.Name, Ref: c.ask.Ref, Output: json.RawMessage(`{"ok":false}`)}}}}}
	}
	in.Detach = c.kind == chaosApproveDetach
	stream := c.kind == chaosApproveStream
	body := map[string]any{"init": service.AgentInit{SnapshotID: c.paused}, "data": in}
	return r.retry(c, func(s *server, ambiguous bool) (verdict, string) {
		a := r.do(c, s, http.MethodPost, "/api/agents/chaos", body, stream)
		if v, kind := classify(a, ambiguous || c.again); v != taken || kind != "" {
			return v, kind
		}
		var out *service.AgentOutput
		if stream {
			var v verdict
			var kind string
			if out, v, kind = streamResult(a.body, ambiguous); out == nil {
				return v, kind
			}
		} else if o, err := (answer{status: a.status, body: a.body}).output(); err == nil {
			out = o
		} else {
			return retryAmbiguous, "undecodable"
		}
		if out.FinishReason == service.FinishDetached {
			c.detached = out.SnapshotID
		}
		return turnVerdict(out)
	})
}

// streamResult reads a streamed turn's frames: its result, or what the
// client does about an error frame or a stream cut short.
func streamResult(body []byte, ambiguous bool) (*service.AgentOutput, verdict, string) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var f struct {
			Result *service.AgentOutput `json:"result"`
			Error  *errorBody           `json:"error"`
		}
		if json.Unmarshal([]byte(data), &f) != nil {
			continue
		}
		switch {
		case f.Result != nil:
			return f.Result, taken, ""
		case f.Error != nil && f.Error.Status == service.CodeAborted && ambiguous:
			return nil, taken, "stream-error-ABORTED-after-retry"
		case f.Error != nil && (f.Error.Status == service.CodeUnavailable || f.Error.Status == service.CodeInternal):
			return nil, retryAmbiguous, "stream-error-" + f.Error.Status
		case f.Error != nil:
			return nil, refused, "stream-error-" + f.Error.Status
		}
	}
	return nil, retryAmbiguous, "stream-cut"
}

// inbox decides through the inbox API, as an operator: restart approves,
// respond denies.
func (r *chaosRun) inbox(c *chaosConv) bool {
	var id string
	found := r.retry(c, func(s *server, _ bool) (verdict, string) {
		a := r.do(c, s, http.MethodGet, "/api/v1/interrupts?sessionId="+url.QueryEscape(c.session), nil, false)
		if v, kind := classify(a, false); v != taken {
			return v, "inbox-list-" + kind
		}
		var page struct {
			Items []service.Interrupt `json:"items"`
		}
		if json.Unmarshal(a.body, &page) != nil || len(page.Items) != 1 {
			return refused, "inbox-list-unexpected"
		}
		id = page.Items[0].ID.String()
		return taken, ""
	})
	if !found {
		return false
	}
	path, body := "/api/v1/interrupts/"+id+"/restart", map[string]any{"note": "chaos " + c.ref}
	if !chaosApproves(c.kind) {
		path, body["output"] = "/api/v1/interrupts/"+id+"/respond", json.RawMessage(`{"ok":false}`)
	}
	return r.retry(c, func(s *server, ambiguous bool) (verdict, string) {
		a := r.do(c, s, http.MethodPost, path, body, false)
		if v, kind := classify(a, ambiguous); v != taken || kind != "" {
			return v, "inbox-" + kind
		}
		var res struct {
			Status string               `json:"status"`
			Output *service.AgentOutput `json:"output"`
		}
		if json.Unmarshal(a.body, &res) != nil {
			return retryAmbiguous, "inbox-undecodable"
		}
		if res.Output != nil && res.Output.FinishReason == service.FinishFailed {
			_, kind := turnVerdict(res.Output)
			return taken, "inbox-" + kind
		}
		return taken, ""
	})
}

// converse runs one conversation to its decision.
func (r *chaosRun) converse(c *chaosConv) {
	c.start = time.Now()
	defer func() { c.end = time.Now() }()
	if !r.firstTurn(c) || c.kind == chaosUnanswered {
		return
	}
	if strings.HasSuffix(c.kind, "-inbox") {
		c.accepted = r.inbox(c)
	} else {
		c.accepted = r.resume(c)
	}
	if c.accepted && c.kind == chaosApproveDetach {
		r.followDetached(c)
	}
}

// followDetached polls the detached resume's snapshot, as its client
// does, until it ends; one that ended failed for want of the database
// says the resume may be sent again, and the client sends it (a 409 then
// means the decision was taken after all).
func (r *chaosRun) followDetached(c *chaosConv) {
	for range 5 {
		status, errStatus := r.detachedEnd(c)
		if status != service.StatusFailed || errStatus != service.CodeUnavailable {
			return
		}
		r.tally("detached-failed-UNAVAILABLE")
		c.history = append(c.history, "detached-failed-UNAVAILABLE@"+time.Now().Format("15:04:05.000"))
		c.again, c.detached = true, ""
		if !r.resume(c) || c.detached == "" {
			return
		}
	}
}

// detachedEnd polls c's detached snapshot until it is no longer pending
// (bounded), and returns its status and its error's status.
func (r *chaosRun) detachedEnd(c *chaosConv) (status, errStatus string) {
	body := map[string]any{"data": service.SnapshotLookup{SnapshotID: c.detached}}
	for attempt := range 1200 {
		if r.ctx.Err() != nil {
			return "", ""
		}
		a := r.do(nil, r.pick(c.i, attempt), http.MethodPost, "/api/agents/chaos/getSnapshot", body, false)
		var res struct{ Result *service.Snapshot }
		if a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &res) == nil && res.Result != nil &&
			res.Result.Status != service.StatusPending {
			if res.Result.Error != nil {
				errStatus = res.Result.Error.Status
			}
			return res.Result.Status, errStatus
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", ""
}

// worker takes conversations in order, each once the faults scheduled
// before it have been injected.
func (r *chaosRun) worker() {
	for {
		k := int(r.issued.Add(1)) - 1
		if k >= len(r.convs) {
			return
		}
		for {
			r.gateMu.Lock()
			open := k < r.gate
			r.gateMu.Unlock()
			if open || r.ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		r.converse(r.convs[k])
	}
}

func (r *chaosRun) setGate(n int) {
	r.gateMu.Lock()
	r.gate = n
	r.gateMu.Unlock()
}

// chaosFault is one injected fault.
type chaosFault struct {
	name string
	do   func(t *testing.T, r *chaosRun)
}

func killSlot(i int) chaosFault {
	return chaosFault{name: "kill -9 " + []string{"A", "B"}[i], do: func(t *testing.T, r *chaosRun) {
		r.slots[i].current().kill(t)
		r.slots[i].start(t)
	}}
}

func sigtermSlot(i int) chaosFault {
	return chaosFault{name: "SIGTERM " + []string{"A", "B"}[i], do: func(t *testing.T, r *chaosRun) {
		s := r.slots[i].current()
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := s.exitCode(t, time.Minute); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", s.name, code)
		}
		r.slots[i].start(t)
	}}
}

func restartPostgres(mode string) chaosFault {
	return chaosFault{name: "postgres stop -m " + mode + " + start", do: func(t *testing.T, r *chaosRun) {
		if out, err := r.pg.pgctl("stop", "-m", mode); err != nil {
			t.Fatalf("pg_ctl stop -m %s: %v\n%s", mode, err, out)
		}
		// The outage lasts until requests met it.
		from := r.failed.Load()
		waitUntil(t, "requests to meet the database outage", time.Minute, func() bool { return r.failed.Load() >= from+3 })
		if out, err := r.pg.pgctl("start"); err != nil {
			t.Fatalf("pg_ctl start: %v\n%s", err, out)
		}
	}}
}

// chaosFaults are the faults of the run, each injected once a share of
// the conversations have started.
var chaosFaults = []struct {
	at    float64
	fault chaosFault
}{
	{0.12, killSlot(0)},
	{0.28, restartPostgres("fast")},
	{0.45, killSlot(1)},
	{0.62, sigtermSlot(0)},
	{0.78, restartPostgres("immediate")},
}

// drive runs the clients and injects the faults: each when its share of
// conversations has started, while the conversations after it, up to a
// window of a worker each, keep going; the rest wait until it is done.
func (r *chaosRun) drive(workers int) {
	t := r.t
	n := len(r.convs)
	r.setGate(int(chaosFaults[0].at*float64(n)) + workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(r.worker)
	}
	for j, f := range chaosFaults {
		at := int(f.at * float64(n))
		waitUntil(t, fmt.Sprintf("%d conversations started before %s", at, f.fault.name), 2*time.Minute, func() bool {
			return int(r.issued.Load()) > at
		})
		fa := chaosFaultAt{name: f.fault.name, start: time.Now()}
		f.fault.do(t, r)
		fa.end = time.Now()
		r.faults = append(r.faults, fa)
		t.Logf("fault %s at conversation %d: %s", f.fault.name, at, ms(fa.end.Sub(fa.start)))
		next := n
		if j+1 < len(chaosFaults) {
			next = int(chaosFaults[j+1].at*float64(n)) + workers
		}
		r.setGate(next)
	}
	wg.Wait()
}

// settle waits (bounded) until nothing is left for the platform to finish:
// no pending snapshot or job, no call running, no decision without its
// turn. What is left after the bound is stuck.
func settle(t *testing.T, pool *pgxpool.Pool, bound time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < bound {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var left int
		err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM snapshots WHERE status = 'pending')
			+ (SELECT count(*) FROM turn_jobs) + (SELECT count(*) FROM tool_calls WHERE status = 'running')
			+ (SELECT count(*) FROM interrupts WHERE status = 'resolved' AND resumed_snapshot_id IS NULL)`).Scan(&left)
		cancel()
		if err == nil && left == 0 {
			return time.Since(start)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the platform had not settled %s after the run", bound)
	return time.Since(start)
}

// startChaos starts the run's private cluster (behind PgBouncer when
// pooled), migrates it, starts instances A and B on it and defines the
// tenant agent.
func startChaos(t *testing.T, pooled bool, n int) *chaosRun {
	t.Helper()
	if findBindir() == "" && os.Getenv("CI") != "" {
		t.Fatal("tests/cluster: no PostgreSQL server binaries (initdb, pg_ctl); CI must run the chaos test")
	}
	if pooled {
		pgbouncerBin(t)
	}
	pg := startPrivateCluster(t)
	direct := pg.createDatabase(t, "holdpoint")
	migrate := exec.Command(platformBin, "migrate", "up")
	migrate.Env = append(cleanEnv(), "DATABASE_URL="+direct)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("platform migrate up: %v\n%s", err, out)
	}
	model := httptest.NewServer(&hostile.Model{})
	t.Cleanup(model.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &chaosRun{t: t, pg: pg, direct: direct, recv: newChaosReceiver(t), ctx: ctx, errs: map[string]int{},
		client: &http.Client{Timeout: 30 * time.Second}}
	// A 6 s heartbeat timeout: a loaded machine does not make a live
	// instance look dead, and takeovers come within seconds. Calls left
	// running by a synchronous turn are marked unknown after 15 s.
	o := serverOpts{heartbeat: time.Second, heartbeatTimeout: 6 * time.Second, grace: 10 * time.Second,
		env:  []string{"OPENAI_API_KEY=attacker", "OPENAI_BASE_URL=" + model.URL + "/v1"},
		args: []string{"--migrate=false", "--lost-tool-call-after", "15s", "--sweep-interval", "1s"}}
	dbURL := direct
	if pooled {
		dbURL = startPgBouncer(t, direct, "postgres")
		o.args = append(o.args, "--database-pooler", "transaction")
		o.env = append(o.env, "HOLDPOINT_LISTEN_DATABASE_URL="+withParam(t, direct, "application_name", "holdpoint-listen"))
	}
	for i, name := range []string{"A", "B"} {
		r.slots[i] = &chaosSlot{name: name, url: dbURL, opts: o}
		r.slots[i].start(t)
	}
	req, _ := http.NewRequest(http.MethodPut, r.slots[0].current().base+"/api/v1/agents/chaos", strings.NewReader(chaosPrompt(r.recv.srv.URL)))
	req.Header.Set("Content-Type", "text/x-dotprompt")
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT the chaos agent: %d %s", res.StatusCode, b)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("chaos plan seed %d", seed)
	for i, kind := range chaosPlan(n, rand.New(rand.NewPCG(seed, 30))) {
		r.convs = append(r.convs, &chaosConv{i: i, ref: fmt.Sprintf("c%d", i), kind: kind})
	}
	return r
}

// chaosFacts is what the database says after the run, by conversation
// (the ref of its transfer).
type chaosFacts struct {
	// resolved: the ref's interrupt in the client's session is resolved.
	resolved map[string]bool
	// unknown: the ref's calls that may have run.
	unknown map[string][]unknownCall
	// stuck: what is left unfinished, by ref.
	stuck map[string][]string
}

type unknownCall struct{ id, session, turn, key string }

// gate reports whether the call was the approval gate of the first turn
// (not a restart): it only pauses the turn and never reaches the receiver,
// yet a first turn cut off before its write leaves it running, and the
// sweep then marks it unknown like any call.
func (u unknownCall) gate() bool { return !strings.HasPrefix(u.key, "restart:") }

// stuckSQL lists what the platform left unfinished, by session: a pending
// snapshot, a job, a call still running, a decision no turn carries out,
// or a head paused on an interrupt already resolved that no call which
// may have run explains.
const stuckSQL = `
SELECT session_id, 'pending snapshot ' || id FROM snapshots WHERE status = 'pending'
UNION ALL SELECT session_id, 'job ' || snapshot_id || ' owner ' || coalesce(owner, '-') || ' attempts ' || attempts FROM turn_jobs
UNION ALL SELECT session_id, 'tool call running ' || turn_id || ' ' || call_key FROM tool_calls WHERE status = 'running'
UNION ALL SELECT session_id, 'decision without its turn: interrupt ' || id FROM interrupts
	WHERE status = 'resolved' AND resumed_snapshot_id IS NULL
UNION ALL SELECT ses.id, 'head ' || h.id || ' paused on resolved interrupt ' || i.id FROM sessions ses
	CROSS JOIN LATERAL (SELECT s.id, s.finish_reason FROM snapshots s WHERE s.tenant_id = ses.tenant_id
		AND s.session_id = ses.id AND s.status = 'completed' ORDER BY s.created_at DESC LIMIT 1) h
	JOIN interrupts i ON i.tenant_id = ses.tenant_id AND i.snapshot_id = h.id AND i.status = 'resolved'
	WHERE h.finish_reason = 'interrupted' AND NOT EXISTS (SELECT 1 FROM tool_calls c
		WHERE c.tenant_id = ses.tenant_id AND c.session_id = ses.id AND c.status = 'unknown')`

func readFacts(t *testing.T, pool *pgxpool.Pool) chaosFacts {
	t.Helper()
	f := chaosFacts{resolved: map[string]bool{}, unknown: map[string][]unknownCall{}, stuck: map[string][]string{}}
	refOf := map[string]string{} // session -> ref
	scan(t, pool, "SELECT session_id, input->>'ref', status FROM interrupts WHERE tool = 'transfer'", func(v []string) {
		refOf[v[0]] = v[1]
		if v[2] == "resolved" {
			f.resolved[v[0]+" "+v[1]] = true
		}
	})
	scan(t, pool, "SELECT id::text, session_id, turn_id, call_key, coalesce(input->>'ref', '') FROM tool_calls WHERE status = 'unknown'", func(v []string) {
		f.unknown[v[4]] = append(f.unknown[v[4]], unknownCall{id: v[0], session: v[1], turn: v[2], key: v[3]})
	})
	scan(t, pool, stuckSQL, func(v []string) {
		ref := refOf[v[0]]
		if ref == "" {
			ref = "session " + v[0]
		}
		f.stuck[ref] = append(f.stuck[ref], v[1])
	})
	return f
}

// scan runs a query whose columns are all text and hands each row over.
func scan(t *testing.T, pool *pgxpool.Pool, sql string, row func([]string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		v := make([]string, len(vals))
		for i, x := range vals {
			v[i] = fmt.Sprint(x)
		}
		row(v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// chaosLedger is the run's outcome.
type chaosLedger struct {
	conversations, approved, once, lost, duplicated, sameKey, unapproved, mayHaveRun, gates, unsurfaced, stuck int
	errs                                                                                                       map[string]int
	flagged                                                                                                    map[string]string // ref -> why
}

func (l chaosLedger) String() string {
	keys := make([]string, 0, len(l.errs))
	for k := range l.errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []string
	for _, k := range keys {
		errs = append(errs, fmt.Sprintf("%s:%d", k, l.errs[k]))
	}
	return fmt.Sprintf("chaos: conversations %d approved %d executed-once %d lost %d duplicated %d (same-key repeats %d) unapproved %d may-have-run %d (approval gates %d, unsurfaced %d) stuck %d client-errors {%s}",
		l.conversations, l.approved, l.once, l.lost, l.duplicated, l.sameKey, l.unapproved, l.mayHaveRun, l.gates, l.unsurfaced, l.stuck, strings.Join(errs, " "))
}

// ledger classifies every conversation against the receiver's executions
// and the database.
func (r *chaosRun) ledger(f chaosFacts) chaosLedger {
	l := chaosLedger{conversations: len(r.convs), errs: r.errs, flagged: map[string]string{}}
	flag := func(c *chaosConv, why string) { l.flagged[c.ref] = strings.TrimSpace(l.flagged[c.ref] + " " + why) }
	for _, c := range r.convs {
		got := r.recv.executions(c.ref)
		ran := len(got)
		approved := chaosApproves(c.kind) && c.paused != "" && (c.accepted || f.resolved[c.session+" "+c.ref])
		unknown := len(f.unknown[c.ref]) > 0
		switch {
		case ran > 1 && sameKey(got) && idempotentReceiver():
			// Counted as the receiver the docs ask for counts it:
			// executed once, the repeat answered from its first answer.
			l.sameKey++
			if approved {
				l.once++
			}
		case ran > 1:
			// Counted even when the key is the same every time: a
			// receiver that honours it absorbs the repeat, one that
			// does not moves the money twice.
			l.duplicated++
			if sameKey(got) {
				l.sameKey++
			}
			flag(c, "duplicated")
		case ran == 1 && !chaosApproves(c.kind):
			l.unapproved++
			flag(c, "unapproved")
		case approved && ran == 1:
			l.once++
		case approved && ran == 0 && !unknown:
			l.lost++
			flag(c, "lost")
		}
		if approved {
			l.approved++
		}
		if unknown {
			l.mayHaveRun++
			if !slices.ContainsFunc(f.unknown[c.ref], func(u unknownCall) bool { return !u.gate() }) {
				l.gates++
			}
			for _, u := range f.unknown[c.ref] {
				if why := r.unsurfaced(u); why != "" {
					l.unsurfaced++
					flag(c, "unsurfaced ("+why+")")
					break
				}
			}
		}
		if len(f.stuck[c.ref]) > 0 {
			l.stuck++
			flag(c, "stuck")
		}
	}
	for ref := range f.stuck {
		if strings.HasPrefix(ref, "session ") {
			l.stuck++
			l.flagged[ref] = "stuck"
		}
	}
	for _, c := range r.convs {
		if c.refused && l.flagged[c.ref] == "" {
			l.flagged[c.ref] = "refused (reported, not a failure)"
		}
	}
	return l
}

// unsurfaced says why a call that may have run is not listed as unknown
// by its session's tool calls and by /api/v1/tool-calls/{id} ("" when it
// is).
func (r *chaosRun) unsurfaced(u unknownCall) string {
	s := r.slots[0].current()
	a := r.do(nil, s, http.MethodGet, "/api/v1/sessions/"+url.PathEscape(u.session)+"/tool-calls?limit=200", nil, false)
	var page struct {
		Items []service.ToolCallRecord `json:"items"`
	}
	if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil {
		return fmt.Sprintf("session %s tool-calls: %d %s %v", u.session, a.status, a.body, a.err)
	}
	listed := false
	for _, it := range page.Items {
		listed = listed || (it.ID.String() == u.id && it.Status == service.ToolCallUnknown)
	}
	if !listed {
		return fmt.Sprintf("session %s tool-calls does not list %s as unknown: %s", u.session, u.id, a.body)
	}
	one := r.do(nil, s, http.MethodGet, "/api/v1/tool-calls/"+u.id, nil, false)
	var rec service.ToolCallRecord
	if one.status != http.StatusOK || json.Unmarshal(one.body, &rec) != nil || rec.Status != service.ToolCallUnknown {
		return fmt.Sprintf("tool-calls/%s: %d %s %v", u.id, one.status, one.body, one.err)
	}
	return ""
}

// report logs, for every flagged conversation, what its client did and
// was told, the faults it lived through, what the receiver executed and
// the rows of its session: the reproduction of each defect.
func (r *chaosRun) report(t *testing.T, pool *pgxpool.Pool, l chaosLedger, f chaosFacts) {
	byRef := map[string]*chaosConv{}
	for _, c := range r.convs {
		byRef[c.ref] = c
	}
	refs := make([]string, 0, len(l.flagged))
	for ref := range l.flagged {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	for _, fa := range r.faults {
		t.Logf("fault %s from %s to %s", fa.name, fa.start.Format("15:04:05.000"), fa.end.Format("15:04:05.000"))
	}
	for _, ref := range refs {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %s; stuck: %v", ref, l.flagged[ref], f.stuck[ref])
		if c := byRef[ref]; c != nil {
			var during []string
			for _, fa := range r.faults {
				if fa.start.Before(c.end) && fa.end.After(c.start) {
					during = append(during, fa.name)
				}
			}
			fmt.Fprintf(&b, "\n  client: %s accepted=%v session=%s paused=%s detached=%s faults=%v receiver=%v answers=%v",
				c.kind, c.accepted, c.session, c.paused, c.detached, during, r.recv.executions(ref), c.history)
			r.sessionRows(t, pool, &b, c.session)
			for _, u := range f.unknown[ref] {
				if u.session != c.session {
					fmt.Fprintf(&b, "\n  another session of %s, with a call that may have run:", ref)
					r.sessionRows(t, pool, &b, u.session)
				}
			}
			r.serverLines(t, pool, &b, c.session)
		}
		t.Log(b.String())
	}
}

// serverLines writes the servers' log lines that name the session, one
// of its snapshots or one of its interrupts, in the order each server
// wrote them: what the instances did for the conversation, which the
// cut tail of each log printed at the end may not hold.
func (r *chaosRun) serverLines(t *testing.T, pool *pgxpool.Pool, b *strings.Builder, session string) {
	if session == "" {
		return
	}
	ids := []string{session}
	scan(t, pool, "SELECT id::text FROM snapshots WHERE session_id = '"+strings.ReplaceAll(session, "'", "''")+"' UNION ALL SELECT id::text FROM interrupts WHERE session_id = '"+strings.ReplaceAll(session, "'", "''")+"'", func(v []string) {
		ids = append(ids, v[0])
	})
	const most = 80
	for _, sl := range r.slots {
		sl.mu.Lock()
		all := slices.Clone(sl.all)
		sl.mu.Unlock()
		for _, s := range all {
			log, _ := os.ReadFile(s.logPath)
			var lines []string
			for line := range strings.SplitSeq(string(log), "\n") {
				if slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(line, id) }) {
					lines = append(lines, line)
				}
			}
			if len(lines) == 0 {
				continue
			}
			if len(lines) > most {
				lines = append([]string{fmt.Sprintf("[... %d earlier lines]", len(lines)-most)}, lines[len(lines)-most:]...)
			}
			fmt.Fprintf(b, "\n  server %s logged:\n    %s", s.name, strings.Join(lines, "\n    "))
		}
	}
}

// sessionRows writes a session's snapshots, interrupts (with their audit
// trails) and tool calls.
func (r *chaosRun) sessionRows(t *testing.T, pool *pgxpool.Pool, b *strings.Builder, session string) {
	if session == "" {
		return
	}
	q := strings.ReplaceAll
	for _, sql := range []string{
		"SELECT 'snapshot', id, coalesce(parent_id, '-'), status, coalesce(finish_reason, '-'), coalesce(error::text, '-') FROM snapshots WHERE session_id = $S ORDER BY created_at",
		"SELECT 'interrupt', i.id::text, i.status, coalesce(i.resumed_snapshot_id, '-'), coalesce(i.resolved_by, '-'), (SELECT string_agg(e.type || '/' || e.actor, ',' ORDER BY e.id) FROM interrupt_events e WHERE e.tenant_id = i.tenant_id AND e.interrupt_id = i.id) FROM interrupts i WHERE session_id = $S",
		"SELECT 'tool_call', turn_id, call_key, status, restart::text, coalesce(decision, '-') FROM tool_calls WHERE session_id = $S ORDER BY started_at",
		"SELECT 'job', snapshot_id, coalesce(owner, '-'), attempts::text, heartbeat_at::text, array_to_string(preclaimed, ',') FROM turn_jobs WHERE session_id = $S",
	} {
		scan(t, pool, q(sql, "$S", "'"+q(session, "'", "''")+"'"), func(v []string) {
			fmt.Fprintf(b, "\n  %s", strings.Join(v, " "))
		})
	}
}

// runChaos is the whole run: clients and faults, the settling, the ledger.
func runChaos(t *testing.T, pooled bool) {
	n := chaosConversations(t)
	started := time.Now()
	r := startChaos(t, pooled, n)
	const workers = 16
	r.drive(workers)
	ran := time.Since(started)
	pool := testdb.OwnerPool(t, r.direct)
	settled := settle(t, pool, 2*time.Minute)
	f := readFacts(t, pool)
	l := r.ledger(f)
	fmt.Println(l)
	t.Log(l)
	t.Logf("FIGURE chaos run (pooled %v): %d conversations with %d workers in %s, settled %s later; total %s",
		pooled, n, workers, ms(ran), ms(settled), ms(time.Since(started)))
	r.report(t, pool, l, f)
	if l.lost+l.duplicated+l.unapproved+l.stuck+l.unsurfaced > 0 {
		t.Errorf("lost %d, duplicated %d, unapproved %d, stuck %d, may-have-run calls not surfaced %d: want all 0",
			l.lost, l.duplicated, l.unapproved, l.stuck, l.unsurfaced)
	}
	if l.approved < n/2 {
		t.Errorf("only %d of %d conversations approved: the clients gave up too often (%v)", l.approved, n, l.errs)
	}
}

// TestChaos is issue 30's fault run: two instances on a private cluster,
// 200 conversations approved through the JSON resume, the streamed
// resume, the inbox and a detached resume, denied or left unanswered,
// while each instance is killed (-9) once, one gets SIGTERM, and
// PostgreSQL restarts (fast) and stops immediately. Every approved
// transfer must run once, or be listed as may-have-run; nothing denied or
// unanswered runs; nothing is left unfinished.
func TestChaos(t *testing.T) {
	t.Parallel()
	runChaos(t, false)
}

// TestChaosPgBouncer is the same run through PgBouncer in transaction
// pooling mode, LISTEN on a direct connection.
func TestChaosPgBouncer(t *testing.T) {
	t.Parallel()
	runChaos(t, true)
}
