package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

// loadCounter is a store that counts its session reads.
type loadCounter struct {
	*pgstore.PgStore
	loads atomic.Int32
}

func (s *loadCounter) LoadSession(ctx context.Context, scope service.Scope, id string) (*service.StoredSession, error) {
	s.loads.Add(1)
	return s.PgStore.LoadSession(ctx, scope, id)
}

// headMoves counts the turns run again for a moved session head.
type headMoves struct {
	observe.Nop
	n atomic.Int32
}

func (o *headMoves) SessionHeadMoved() { o.n.Add(1) }

// node is one instance of the platform, over a shared database.
type node struct {
	rt    *service.Runtime
	store *loadCounter
	moves *headMoves
	// calls counts model calls; paid counts runs of the pay tool.
	calls, paid atomic.Int32
	// seen is what the model saw last: the texts of the history.
	seen atomic.Value
}

// newInstances starts n runtimes over one fresh database, each with the
// same "chat" agent: its model answers "pay" with a call of the pay tool
// (a tool with an effect), and anything else with the number of messages
// it was given.
func newInstances(t *testing.T, n int) ([]*node, *pgxpool.Pool) {
	t.Helper()
	url := testdb.URL(t)
	admin := testdb.OwnerPool(t, url)
	var out []*node
	for range n {
		in := &node{moves: &headMoves{}}
		in.rt = servicetest.New(t, servicetest.Options{
			URL: url,
			Store: func(s *pgstore.PgStore) service.Store {
				in.store = &loadCounter{PgStore: s}
				return in.store
			},
			Runtime: service.Options{Observer: in.moves},
		}).Runtime
		model := &scriptModel{fn: func(req *service.ModelRequest) service.Message {
			in.calls.Add(1)
			var texts []string
			for _, m := range req.Messages {
				for _, p := range m.Content {
					if p.Text != nil {
						texts = append(texts, *p.Text)
					}
				}
			}
			in.seen.Store(strings.Join(texts, "|"))
			last := req.Messages[len(req.Messages)-1]
			if last.Role == service.RoleUser && last.Content[0].Text != nil && *last.Content[0].Text == "pay" {
				return service.Message{Role: service.RoleModel, Content: []service.Part{
					{ToolRequest: &service.ToolRequest{Name: "pay", Ref: "p", Input: json.RawMessage(`{}`)}}}}
			}
			return text(service.RoleModel, "ok")
		}}
		err := in.rt.Register(&service.Agent{Name: "chat", ServerManaged: true, Model: model, Tools: []*service.Tool{
			{Name: "pay", Run: func(context.Context, service.ToolCall) (json.RawMessage, error) {
				in.paid.Add(1)
				return json.RawMessage(`{"ok":true}`), nil
			}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, in)
	}
	return out, admin
}

func (in *node) say(t *testing.T, session, msg string) *service.AgentOutput {
	t.Helper()
	out, err := in.rt.InvokeOne(context.Background(), testCaller, "chat", service.AgentInit{SessionID: session},
		service.AgentInput{Message: ptr(text(service.RoleUser, msg))}, nil)
	if err != nil || out.FinishReason != "stop" {
		t.Fatalf("%q: %v %+v", msg, err, out)
	}
	return out
}

func snapshotsOf(t *testing.T, admin *pgxpool.Pool, session string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM snapshots WHERE session_id = $1`, session).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCachedHeadSkipsTheRead: a turn that continues a session this
// instance wrote last starts from the head it cached, without reading the
// session, and sees the whole history.
func TestCachedHeadSkipsTheRead(t *testing.T) {
	t.Parallel()
	ins, _ := newInstances(t, 1)
	a := ins[0]
	a.say(t, "s", "one")
	before := a.store.loads.Load()
	a.say(t, "s", "two")
	a.say(t, "s", "three")
	if n := a.store.loads.Load() - before; n != 0 {
		t.Errorf("%d session reads for two turns continuing the session this instance wrote, want 0", n)
	}
	if got, want := a.seen.Load(), "one|ok|two|ok|three"; got != want {
		t.Errorf("the model saw %q, want %q", got, want)
	}
	// Streamed turns and resumes read the head as before.
	if _, err := a.rt.InvokeOne(context.Background(), testCaller, "chat", service.AgentInit{SessionID: "s"},
		service.AgentInput{Message: ptr(text(service.RoleUser, "four"))}, func(service.StreamChunk) {}); err != nil {
		t.Fatal(err)
	}
	if n := a.store.loads.Load() - before; n != 1 {
		t.Errorf("%d session reads after a streamed turn, want 1", n)
	}
}

// TestMovedHeadRunsTheTurnAgain: instance A caches the head of a session,
// instance B then moves the session on; A's next turn starts from its
// stale head, its write is refused (the session is no longer at that
// head), and the turn runs again from the head in the table: it sees B's
// turn, and the session has one snapshot per turn, no fork.
func TestMovedHeadRunsTheTurnAgain(t *testing.T) {
	t.Parallel()
	ins, admin := newInstances(t, 2)
	a, b := ins[0], ins[1]
	a.say(t, "s", "from a")
	b.say(t, "s", "from b")
	calls := a.calls.Load()
	out := a.say(t, "s", "again from a")
	if got, want := a.seen.Load(), "from a|ok|from b|ok|again from a"; got != want {
		t.Errorf("the turn's model saw %q, want %q (B's turn lost: the session forked)", got, want)
	}
	if n := a.calls.Load() - calls; n != 2 {
		t.Errorf("%d model calls for the turn, want 2 (the stale one and the one written)", n)
	}
	if n := a.moves.n.Load(); n != 1 {
		t.Errorf("%d head moves observed, want 1", n)
	}
	if n := snapshotsOf(t, admin, "s"); n != 3 {
		t.Errorf("%d snapshots in the session, want 3", n)
	}
	var latest string
	if err := admin.QueryRow(context.Background(), `SELECT latest_snapshot_id FROM sessions WHERE id = 's'`).Scan(&latest); err != nil {
		t.Fatal(err)
	}
	if latest != out.SnapshotID {
		t.Errorf("session head %s, want the turn's snapshot %s", latest, out.SnapshotID)
	}
}

// TestMovedHeadRunsNoTool: a tool with an effect never runs on a history
// that may be stale: before it runs, the cached head is read and
// compared; when it moved, the turn runs again from the table's head, and
// the tool runs once, there.
func TestMovedHeadRunsNoTool(t *testing.T) {
	t.Parallel()
	ins, admin := newInstances(t, 2)
	a, b := ins[0], ins[1]
	a.say(t, "s", "from a")
	b.say(t, "s", "from b")
	a.say(t, "s", "pay")
	if n := a.paid.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if got := a.seen.Load().(string); !strings.Contains(got, "from b") {
		t.Errorf("the turn's model saw %q, without B's turn", got)
	}
	if n := snapshotsOf(t, admin, "s"); n != 3 {
		t.Errorf("%d snapshots in the session, want 3", n)
	}
	// With the head current, the check reads it once and the tool runs.
	loads := a.store.loads.Load()
	a.say(t, "s", "pay")
	if n := a.paid.Load(); n != 2 {
		t.Errorf("the tool ran %d times in all, want 2", n)
	}
	if n := a.store.loads.Load() - loads; n != 1 {
		t.Errorf("%d session reads for a turn running a tool from a cached head, want 1 (the check)", n)
	}
}

// TestCachedHeadIsNotAnotherUsers: a session this instance remembers is
// one end user's; another end user of the tenant who sends its id gets
// what a read gives (the id is taken: NOT_FOUND), never the remembered
// history, and the session does not move. Two checks stand in the way:
// the remembered head's end user, and the scope check of loading its
// snapshot; this asserts the outcome either way.
func TestCachedHeadIsNotAnotherUsers(t *testing.T) {
	t.Parallel()
	ins, admin := newInstances(t, 1)
	a := ins[0]
	alice := service.Caller{TenantID: "default", Actor: "alice", EndUser: "alice"}
	bob := service.Caller{TenantID: "default", Actor: "bob", EndUser: "bob"}
	first, err := a.rt.InvokeOne(context.Background(), alice, "chat", service.AgentInit{SessionID: "s"},
		service.AgentInput{Message: ptr(text(service.RoleUser, "alice's secret"))}, nil)
	if err != nil || first.FinishReason != "stop" {
		t.Fatalf("alice: %v %+v", err, first)
	}
	a.seen.Store("")
	out, err := a.rt.InvokeOne(context.Background(), bob, "chat", service.AgentInit{SessionID: "s"},
		service.AgentInput{Message: ptr(text(service.RoleUser, "bob here"))}, nil)
	if statusOf(err) != service.CodeNotFound {
		t.Errorf("bob on alice's session: %v %+v, want NOT_FOUND", err, out)
	}
	if seen := a.seen.Load().(string); strings.Contains(seen, "secret") {
		t.Errorf("bob's turn saw alice's history: %q", seen)
	}
	var latest string
	if err := admin.QueryRow(context.Background(), `SELECT latest_snapshot_id FROM sessions WHERE id = 's'`).Scan(&latest); err != nil {
		t.Fatal(err)
	}
	if latest != first.SnapshotID || snapshotsOf(t, admin, "s") != 1 {
		t.Errorf("alice's session moved: head %s (want %s), %d snapshots", latest, first.SnapshotID, snapshotsOf(t, admin, "s"))
	}
}
