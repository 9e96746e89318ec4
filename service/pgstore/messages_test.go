package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

func TestMessageRun(t *testing.T) {
	msg := func(p int) store.PositionedMessage {
		return store.PositionedMessage{Position: p, Body: []byte(fmt.Sprintf(`{"n":%d}`, p))}
	}
	for _, c := range []struct {
		msgs []store.PositionedMessage
		from int32
		want string
	}{
		{[]store.PositionedMessage{msg(0), msg(1)}, 0, `[{"n":0},{"n":1}]`},
		{[]store.PositionedMessage{msg(7)}, 7, `[{"n":7}]`},
		{[]store.PositionedMessage{msg(3), msg(1), msg(6)}, 1, `[{"n":1},null,{"n":3},null,null,{"n":6}]`},
	} {
		from, got := messageRun(c.msgs, true)
		if from == nil || *from != c.from || string(got) != c.want {
			t.Errorf("messageRun(%v) = %v %s, want %d %s", c.msgs, from, got, c.from, c.want)
		}
	}
	if from, got := messageRun(nil, true); from != nil || got != nil {
		t.Errorf("messageRun(nil, true) = %v %s, want nil nil", from, got)
	}
}

// TestSnapshotRowsHoldTheirMessages writes a turn, then one that rewrites
// two positions that are not adjacent and appends one (as a client's
// history replaced wholesale can), and reads both back on another
// instance (no cache): each position comes from the nearest snapshot that
// wrote it, and the messages view lists what each snapshot wrote.
func TestSnapshotRowsHoldTheirMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	stores := storesOn(t, url, 2)
	body := func(role, text string) []byte {
		return []byte(fmt.Sprintf(`{"role":%q,"content":[{"text":%q}]}`, role, text))
	}
	write := func(id, parent string, count int, msgs map[int][]byte) {
		t.Helper()
		w := &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: "s", SnapshotID: id, ParentID: parent,
			Status: protocol.StatusCompleted, FinishReason: "stop", MessageCount: count, Actor: "test"}
		for p := range count {
			if b, ok := msgs[p]; ok {
				w.Messages = append(w.Messages, store.PositionedMessage{Position: p, Body: b})
			}
		}
		if ok, err := stores[0].CommitTurn(ctx, w); err != nil || !ok {
			t.Fatalf("writing %s: %v %v", id, ok, err)
		}
	}
	first := map[int][]byte{0: body("user", "m0"), 1: body("model", "m1"), 2: body("user", "m2"), 3: body("model", "m3")}
	write("s1", "", 4, first)
	write("s2", "s1", 5, map[int][]byte{1: body("model", "m1 again"), 3: body("model", "m3 again"), 4: body("user", "m4")})
	write("s3", "s2", 2, nil) // a history cut to its first two messages

	history := func(id string) []string {
		t.Helper()
		snap, err := stores[1].LoadSnapshot(ctx, store.LoadSnapshotParams{Scope: store.Scope{TenantID: "default"}, Agent: "a", ID: id, WithState: true})
		if err != nil {
			t.Fatalf("loading %s: %v", id, err)
		}
		var out []string
		for i, m := range snap.State.Messages {
			var b struct {
				Content []struct{ Text string }
			}
			if err := json.Unmarshal(snap.Bodies[i], &b); err != nil || len(b.Content) != 1 {
				t.Fatalf("%s body %d: %s %v", id, i, snap.Bodies[i], err)
			}
			text := m.Content[0].Text
			if text == nil || *text != b.Content[0].Text {
				t.Fatalf("%s position %d: message %v, body %q", id, i, text, b.Content[0].Text)
			}
			out = append(out, string(m.Role)+":"+*text)
		}
		return out
	}
	for id, want := range map[string][]string{
		"s1": {"user:m0", "model:m1", "user:m2", "model:m3"},
		"s2": {"user:m0", "model:m1 again", "user:m2", "model:m3 again", "user:m4"},
		"s3": {"user:m0", "model:m1 again"},
	} {
		if got := history(id); !reflect.DeepEqual(got, want) {
			t.Errorf("history of %s = %q, want %q", id, got, want)
		}
	}

	owner := testdb.OwnerPool(t, url)
	var from *int32
	var stored string
	if err := owner.QueryRow(ctx, `SELECT messages_from, turn_messages::jsonb::text FROM snapshots WHERE id = 's2'`).Scan(&from, &stored); err != nil {
		t.Fatal(err)
	}
	if from == nil || *from != 1 {
		t.Errorf("s2 messages_from = %v, want 1", from)
	}
	if want := `[{"role": "model", "content": [{"text": "m1 again"}]}, null, {"role": "model", "content": [{"text": "m3 again"}]}, {"role": "user", "content": [{"text": "m4"}]}]`; stored != want {
		t.Errorf("s2 messages = %s, want %s", stored, want)
	}
	rows, err := owner.Query(ctx, `SELECT snapshot_id || ':' || position || ':' || role FROM messages WHERE tenant_id = 'default' ORDER BY snapshot_id, position`)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		listed = append(listed, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"s1:0:user", "s1:1:model", "s1:2:user", "s1:3:model", "s2:1:model", "s2:3:model", "s2:4:user"}; !reflect.DeepEqual(listed, want) {
		t.Errorf("the messages view lists %q, want %q", listed, want)
	}
}

// storesOn is n stores on the database at url, each with a pool and a
// cache of its own, closed when the test ends.
func storesOn(t *testing.T, url string, n int) []*PgStore {
	t.Helper()
	stores := make([]*PgStore, n)
	for i := range stores {
		pool, err := NewAppPool(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		stores[i] = New(pool)
		t.Cleanup(stores[i].Close)
	}
	return stores
}
