package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
)

// startStandby makes a streaming replica of primary (pg_basebackup -R) in
// a directory of its own, starts it on a free loopback port and stops it
// when the test ends.
func startStandby(t *testing.T, primary *pgCluster) *pgCluster {
	t.Helper()
	if !isExec(filepath.Join(primary.bindir, "pg_basebackup")) {
		if os.Getenv("CI") != "" {
			t.Fatalf("tests/cluster: no pg_basebackup in %s; CI must run the failover test", primary.bindir)
		}
		t.Skipf("tests/cluster: SKIPPED, no pg_basebackup in %s to make the streaming replica", primary.bindir)
	}
	c := &pgCluster{bindir: primary.bindir, port: freePort(t), asOwner: primary.asOwner}
	dir, err := os.MkdirTemp("", "holdpoint-pg-standby-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", c.data(), "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pg_basebackup: %v\n%s", err, out)
	}
	c.startOnFreePort(t, "pg_ctl start (standby)")
	t.Cleanup(func() {
		// It may be stopped already; only its log matters then.
		_, _ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
		if t.Failed() {
			t.Logf("--- log of the standby (promoted) cluster ---\n%s", tail([]byte(c.log()), 80))
		}
	})
	return c
}

// makeSynchronous makes primary's commits wait for the standby's flush and
// waits until the standby streams synchronously.
func makeSynchronous(t *testing.T, primary *pgCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", primary.port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'",
		"ALTER SYSTEM SET synchronous_commit = 'on'", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'").Scan(&n)
		if err != nil {
			t.Fatalf("waiting for the synchronous standby: %v", err)
		}
		if n == 1 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fence makes primary take no more writes, on its open sessions too.
func fence(t *testing.T, primary *pgCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", primary.port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{"ALTER SYSTEM SET default_transaction_read_only = on", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// reply is one HTTP answer of the failover test, with its Retry-After.
type reply struct {
	status     int
	body       []byte
	retryAfter string
	err        error
}

func (r reply) String() string {
	if r.err != nil {
		return "transport error: " + r.err.Error()
	}
	return fmt.Sprintf("%d (Retry-After %q) %s", r.status, r.retryAfter, bytes.TrimSpace(r.body))
}

// failoverClient sends the test's requests and tallies every answer that
// is not a success, by kind.
type failoverClient struct {
	mu    sync.Mutex
	tally map[string]int
	bad   []string // answers a client must never see: 500, 503 without Retry-After, transport errors
	seen  []string // every answer that was not a success, logged at the end
}

func (fc *failoverClient) do(method, url string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := httpClient.Do(req)
	r := reply{err: err}
	if err == nil {
		r.status, r.retryAfter = res.StatusCode, res.Header.Get("Retry-After")
		r.body, r.err = io.ReadAll(res.Body)
		res.Body.Close()
	}
	fc.record(method+" "+url, r)
	return r
}

// record tallies r, logging the failures; a 503 must carry Retry-After, and
// nothing else 5xx (nor a transport error: the instances stay up) may
// happen.
func (fc *failoverClient) record(what string, r reply) {
	if r.err == nil && r.status < 300 && !retryable(r) {
		return
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	line := time.Now().Format("15:04:05.000 ") + what + ": " + r.String()
	if len(line) > 400 {
		line = line[:400] + "..."
	}
	fc.seen = append(fc.seen, line)
	switch {
	case r.err == nil && r.status < 300:
		fc.tally["200 with a turn failed UNAVAILABLE"]++
	case r.err != nil:
		fc.tally["transport error"]++
		fc.bad = append(fc.bad, what+": "+r.String())
	case r.status == http.StatusServiceUnavailable && r.retryAfter != "":
		fc.tally["503 with Retry-After"]++
	case r.status >= 500:
		fc.tally[strconv.Itoa(r.status)]++
		fc.bad = append(fc.bad, what+": "+r.String())
	default:
		fc.tally[strconv.Itoa(r.status)]++
	}
}

// retryable reports whether r asks the client to come back: a 503, or a 200
// whose turn failed UNAVAILABLE (the database went away mid-turn).
func retryable(r reply) bool {
	if r.err == nil && r.status == http.StatusServiceUnavailable {
		return true
	}
	if r.err != nil || r.status != http.StatusOK {
		return false
	}
	var env struct {
		Result *service.AgentOutput `json:"result"`
		Output *service.AgentOutput `json:"output"`
	}
	_ = json.Unmarshal(r.body, &env)
	out := env.Result
	if out == nil {
		out = env.Output
	}
	return out != nil && out.FinishReason == service.FinishFailed && out.Error != nil && out.Error.Status == service.CodeUnavailable
}

// untilSettled repeats send while its answer asks for a retry, pausing
// 50 ms in between as a client would, for at most bound.
func untilSettled(bound time.Duration, send func() reply) reply {
	deadline := time.Now().Add(bound)
	for {
		r := send()
		if !retryable(r) || time.Now().After(deadline) {
			return r
		}
		time.Sleep(50 * time.Millisecond) // a client's pause before its retry
	}
}

// failoverCycle is one approval cycle of the failover test: a transfer to
// an account of its own asked on one instance and approved on the other,
// through the protocol's JSON resume or the inbox API.
type failoverCycle struct {
	account    string
	inbox      bool
	startedAt  time.Time
	snapshotID string // the paused turn; "" if the ask never succeeded
	approved   bool   // the client saw the approved transfer done
	outcome    string // the last answer when not approved
}

// run asks, then approves, each retried while the answer says to retry
// (a 503, or a turn that failed UNAVAILABLE), for at most two minutes each.
func (cy *failoverCycle) run(fc *failoverClient, from, to *server) {
	const bound = 2 * time.Minute
	agentURL := func(s *server) string { return s.base + "/api/agents/" + demo.BankingAgentName }
	session := uuid.NewString()
	ask := untilSettled(bound, func() reply {
		return fc.do(http.MethodPost, agentURL(from), map[string]any{"init": service.AgentInit{SessionID: session},
			"data": service.AgentInput{Message: userMessage("Transfer $25 to account " + cy.account)}})
	})
	first, err := answer{status: ask.status, body: ask.body, err: ask.err}.output()
	if err != nil || first.FinishReason != service.FinishInterrupted {
		cy.outcome = "ask: " + ask.String()
		return
	}
	cy.snapshotID = first.SnapshotID
	var res reply
	if cy.inbox {
		res = cy.approveInInbox(fc, to, session, bound)
	} else {
		resume := service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{ToolResponse: &service.ToolResponse{
			Name: demo.ToolUserApproval, Ref: approvalRefOf(first), Output: json.RawMessage(`{"approved":true}`)}}}}}
		res = untilSettled(bound, func() reply {
			return fc.do(http.MethodPost, agentURL(to), map[string]any{"init": service.AgentInit{SnapshotID: first.SnapshotID}, "data": resume})
		})
	}
	var env struct {
		Result *service.AgentOutput `json:"result"`
		Output *service.AgentOutput `json:"output"`
	}
	_ = json.Unmarshal(res.body, &env)
	out := env.Result
	if cy.inbox {
		out = env.Output
	}
	want := "Done: transferred $25.00 to account " + cy.account
	if res.err == nil && res.status == http.StatusOK && out != nil && out.Message != nil && strings.HasPrefix(out.Message.Text(), want) {
		cy.approved = true
		return
	}
	cy.outcome = "approve: " + res.String()
}

// approveInInbox finds the cycle's pending approval in the inbox and
// responds to it.
func (cy *failoverCycle) approveInInbox(fc *failoverClient, to *server, session string, bound time.Duration) reply {
	list := untilSettled(bound, func() reply {
		return fc.do(http.MethodGet, to.base+"/api/v1/interrupts?status=pending&sessionId="+session, nil)
	})
	var page struct {
		Items []service.Interrupt `json:"items"`
	}
	if list.err != nil || list.status != http.StatusOK || json.Unmarshal(list.body, &page) != nil {
		return list
	}
	for _, it := range page.Items {
		if it.SnapshotID == cy.snapshotID && it.Tool == demo.ToolUserApproval {
			return untilSettled(bound, func() reply {
				return fc.do(http.MethodPost, to.base+"/api/v1/interrupts/"+it.ID.String()+"/respond",
					map[string]any{"output": map[string]bool{"approved": true}})
			})
		}
	}
	return reply{status: list.status, body: list.body, err: fmt.Errorf("no pending approval of %s in the inbox", cy.snapshotID)}
}

// approvalRefOf is the ref of the userApproval request of an interrupted
// turn ("" if none: the resume then fails, and the test with it).
func approvalRefOf(out *service.AgentOutput) string {
	if out.Message != nil {
		for _, p := range out.Message.Content {
			if p.ToolRequest != nil && p.ToolRequest.Name == demo.ToolUserApproval {
				return p.ToolRequest.Ref
			}
		}
	}
	return ""
}

// failoverLoad runs approval cycles on four workers, alternating the
// instances and the approval path, until stop closes or max cycles began.
type failoverLoad struct {
	fc     *failoverClient
	a, b   *server
	max    int
	next   atomic.Int64
	mu     sync.Mutex
	cycles []*failoverCycle
	stop   chan struct{}
	wg     sync.WaitGroup
}

func (l *failoverLoad) start(workers int) {
	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				i := int(l.next.Add(1)) - 1
				if i >= l.max {
					return
				}
				from, to := l.a, l.b
				if i%2 == 1 {
					from, to = l.b, l.a
				}
				cy := &failoverCycle{account: strconv.Itoa(300000 + i), inbox: i%4 >= 2, startedAt: time.Now()}
				cy.run(l.fc, from, to)
				l.mu.Lock()
				l.cycles = append(l.cycles, cy)
				l.mu.Unlock()
			}
		})
	}
}

// approvedSince counts the cycles begun after t whose approval succeeded.
func (l *failoverLoad) approvedSince(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, cy := range l.cycles {
		if cy.approved && cy.startedAt.After(t) {
			n++
		}
	}
	return n
}

// readyz reports whether s answers /readyz with 200.
func readyz(s *server) bool {
	res, err := httpClient.Get(s.base + "/readyz")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// TestFailover: a primary with a synchronous streaming replica, two
// instances on a multi-host URL with target_session_attrs=read-write (for
// the pool and for LISTEN), approval cycles running through the JSON
// resume and the inbox, and mid-run the primary stopped with -m immediate
// and the replica promoted: "immediate" stops it under load, "fenced" makes
// it read-only first, as a failover manager may. Every answer is a success
// or a 503 with Retry-After; every approval the client saw succeed ran its
// transfer exactly once; no decision is lost (the repair leaves no session
// paused on a decided interrupt), none ran twice; and both instances serve
// again without a restart.
func TestFailover(t *testing.T) {
	t.Parallel()
	if findBindir() == "" && os.Getenv("CI") != "" {
		t.Fatal("tests/cluster: no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup); CI must run the failover test")
	}
	// One after the other: each runs two clusters and two instances.
	t.Run("immediate", func(t *testing.T) { runFailover(t, false) })
	t.Run("fenced", func(t *testing.T) { runFailover(t, true) })
}

// failoverSetup is a primary, its synchronous standby, and two instances
// on the multi-host URL of both.
type failoverSetup struct {
	primary, standby *pgCluster
	primaryDown      atomic.Bool
	dbURL, ledger    string
	a, b             *server
}

func startFailoverSetup(t *testing.T) *failoverSetup {
	t.Helper()
	f := &failoverSetup{primary: startPrivateCluster(t)}
	f.primary.createDatabase(t, "holdpoint")
	f.standby = startStandby(t, f.primary)
	makeSynchronous(t, f.primary)
	// The primary's own cleanup stops it, so it must run then; it comes
	// back as a lone server after the instances stopped (LIFO cleanups).
	t.Cleanup(func() {
		if f.primaryDown.Load() {
			if out, err := f.primary.pgctl("start"); err != nil {
				t.Logf("restarting the old primary for its cleanup: %v\n%s", err, out)
			}
		}
	})
	f.dbURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/holdpoint?sslmode=disable&target_session_attrs=read-write",
		f.primary.port, f.standby.port)
	f.ledger = filepath.Join(t.TempDir(), "ledger.jsonl")
	// A pause after every tool message widens the window in which the
	// primary dies with turns between their transfer and their end.
	o := serverOpts{env: []string{"HOLDPOINT_LISTEN_DATABASE_URL=" + f.dbURL + "&application_name=holdpoint-listen",
		demo.EnvLedger + "=" + f.ledger, demo.EnvToolDelay + "=200ms"}}
	f.a = startServer(t, "A", f.dbURL, o)
	f.b = startServer(t, "B", f.dbURL, o)
	return f
}

// failOver stops the primary at once (fenced first, if asked: both
// instances must then stop being ready) and promotes the standby. It
// returns when the promotion is done.
func (f *failoverSetup) failOver(t *testing.T, fenced bool) {
	t.Helper()
	if fenced {
		fence(t, f.primary)
		notReady := waitUntil(t, "both instances' /readyz to answer 503 on the fenced primary", time.Minute, func() bool {
			return !readyz(f.a) && !readyz(f.b)
		})
		t.Logf("FIGURE failover: /readyz 503 on both %s after the primary was fenced read-only", ms(notReady))
	}
	downAt := time.Now()
	if out, err := f.primary.pgctl("stop", "-m", "immediate"); err != nil {
		t.Fatalf("pg_ctl stop -m immediate (primary): %v\n%s", err, out)
	}
	f.primaryDown.Store(true)
	if out, err := f.standby.run("pg_ctl", "-D", f.standby.data(), "-w", "-t", "60", "promote"); err != nil {
		t.Fatalf("pg_ctl promote: %v\n%s", err, out)
	}
	t.Logf("FIGURE failover: stop -m immediate and promotion took %s", ms(time.Since(downAt)))
}

func runFailover(t *testing.T, fenced bool) {
	f := startFailoverSetup(t)
	fc := &failoverClient{tally: map[string]int{}}
	// Checked even when the test stops early: what clients saw then is
	// the finding.
	defer checkFailoverAnswers(t, fc)
	load := &failoverLoad{fc: fc, a: f.a, b: f.b, max: 80, stop: make(chan struct{})}
	begin := time.Now()
	load.start(4)
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(load.stop)
			load.wg.Wait()
		}
	}
	defer stopLoad()
	waitUntil(t, "6 approval cycles before the failover", 2*time.Minute, func() bool { return load.approvedSince(begin) >= 6 })

	f.failOver(t, fenced)
	promotedAt := time.Now()
	ready := waitUntil(t, "both instances' /readyz to answer 200 after the promotion", 2*time.Minute, func() bool {
		return readyz(f.a) && readyz(f.b)
	})
	served := waitUntil(t, "4 approval cycles begun after the promotion to succeed", 3*time.Minute, func() bool {
		return load.approvedSince(promotedAt) >= 4
	})
	stopLoad()
	t.Logf("FIGURE failover: /readyz 200 on both %s after the promotion; 4 new cycles approved %s after it", ms(ready), ms(served))

	pool, err := pgxpool.New(context.Background(), f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if port := count(t, pool, "SELECT inet_server_port()"); port != f.standby.port {
		t.Fatalf("the multi-host URL reaches port %d, want the promoted standby's %d", port, f.standby.port)
	}
	waitUntil(t, "both instances' abort listeners on the promoted standby", time.Minute, func() bool {
		return listeners(t, pool, true, "holdpoint_abort") == 2
	})
	checkFailoverCycles(t, pool, load.cycles, f.ledger)
}

// checkFailoverAnswers fails on any answer a client must never see during
// a failover and logs the tally of the others.
func checkFailoverAnswers(t *testing.T, fc *failoverClient) {
	t.Helper()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	t.Logf("FIGURE failover client errors: %v", fc.tally)
	for i, s := range fc.seen {
		if i == 30 {
			t.Logf("[... %d more client errors]", len(fc.seen)-i)
			break
		}
		t.Logf("client error: %s", s)
	}
	for _, b := range fc.bad {
		t.Errorf("answer during the failover, want a success or a 503 with Retry-After: %s", b)
	}
}

// checkFailoverCycles waits until the repair and the sweep of lost calls
// left nothing pending behind (no session paused on a decided interrupt,
// no transfer call still running), then checks every cycle: an approval
// the client saw ran once; a decided one ran once or is unknown; an
// undecided one never ran; nothing ran twice.
func checkFailoverCycles(t *testing.T, pool *pgxpool.Pool, cycles []*failoverCycle, ledger string) {
	t.Helper()
	settled := waitUntil(t, "the repair of stranded decisions and the sweep of lost calls", 3*time.Minute, func() bool {
		return count(t, pool, "SELECT count(*) FROM holdpoint_stranded_decisions(0, 1000)") == 0 &&
			count(t, pool, "SELECT count(*) FROM tool_calls WHERE tool = $1 AND status = 'running'", demo.ToolTransferMoney) == 0
	})
	ran := map[string]int{}
	for _, l := range ledgerLines(t, ledger) {
		ran[l.ToAccount]++
	}
	tally := map[string]int{}
	for _, cy := range cycles {
		n := ran[cy.account]
		unknown := count(t, pool, `SELECT count(*) FROM tool_calls WHERE tool = $1 AND status = 'unknown' AND input->>'toAccount' = $2`,
			demo.ToolTransferMoney, cy.account)
		decided := cy.snapshotID != "" && count(t, pool, `SELECT count(*) FROM interrupts WHERE snapshot_id = $1 AND tool = $2 AND status = 'resolved'`,
			cy.snapshotID, demo.ToolUserApproval) > 0
		switch {
		case n > 1:
			t.Errorf("account %s: the transfer ran %d times", cy.account, n)
		case cy.approved && n != 1:
			t.Errorf("account %s: the client saw the approval succeed, the transfer ran %d times", cy.account, n)
		case decided && n == 0 && unknown == 0:
			t.Errorf("account %s: approved (the interrupt is resolved) and lost: the transfer never ran and is not unknown (client: %s)", cy.account, cy.outcome)
		case !decided && n > 0:
			t.Errorf("account %s: the transfer ran without a recorded approval", cy.account)
		}
		switch {
		case cy.approved:
			tally["approved, ran once"]++
		case decided && unknown > 0:
			tally["decided, may have run (unknown)"]++
		case decided:
			tally["decided, carried out without the client"]++
			t.Logf("account %s: decided and ran once; the client was told %s", cy.account, cy.outcome)
		default:
			tally["not decided"]++
			t.Logf("account %s: not decided: %s", cy.account, cy.outcome)
		}
	}
	t.Logf("FIGURE failover cycles: %d in all, %v; repair and sweep settled %s after the run", len(cycles), tally, ms(settled))
}
