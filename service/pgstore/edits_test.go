package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// pausedRequests is a model message of two tool requests, both paused.
func pausedRequests() protocol.Message {
	part := func(ref string, meta protocol.Metadata) protocol.Part {
		return protocol.Part{ToolRequest: &protocol.ToolRequest{Name: "transfer", Ref: ref, Input: json.RawMessage(`{"amount":50}`)}, Metadata: meta}
	}
	return protocol.Message{Role: protocol.RoleModel, Content: []protocol.Part{
		part("a", protocol.Metadata{"interrupt": json.RawMessage(`{"reason":"large"}`)}),
		part("b", protocol.Metadata{"interrupt": json.RawMessage(`true`)}),
	}}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resolved is m with the interrupts of its parts at parts resolved, as a
// resume leaves it.
func resolved(m protocol.Message, parts ...int) protocol.Message {
	out := m
	out.Content = append([]protocol.Part(nil), m.Content...)
	for _, k := range parts {
		out.Content[k].Metadata = protocol.ResolvedMetadata(out.Content[k].Metadata)
	}
	return out
}

func TestMessageEdit(t *testing.T) {
	paused := pausedRequests()
	base := marshal(t, paused)
	withNote := pausedRequests() // metadata.note sorts between interrupt and resolvedInterrupt
	withNote.Content[0].Metadata["note"] = json.RawMessage(`"x"`)
	inInput := pausedRequests()
	inInput.Content[0].Metadata = protocol.Metadata{"interrupt": json.RawMessage(`true`)}
	inInput.Content[0].ToolRequest.Input = json.RawMessage(`{"metadata":{"interrupt":1}}`)
	// The second request's interrupt is not metadata's first member: the
	// text edit would leave it, as a resume that answered only the first
	// does, but SQL's reading of the edit would resolve it.
	behind := pausedRequests()
	behind.Content[1].Metadata["aside"] = json.RawMessage(`1`)
	other := resolved(paused, 0, 1)
	other.Content[0].ToolRequest = &protocol.ToolRequest{Name: "transfer", Ref: "a", Input: json.RawMessage(`{"amount":60}`)}
	for _, c := range []struct {
		name       string
		base, body []byte
		want       string
	}{
		{"every paused request resolved", base, marshal(t, resolved(paused, 0, 1)), `["resolved"]`},
		{"one of two", base, marshal(t, resolved(paused, 0)), ""},
		{"the second, after the first", marshal(t, resolved(paused, 0)), marshal(t, resolved(paused, 0, 1)), `["resolved"]`},
		{"metadata with another member", marshal(t, withNote), marshal(t, resolved(withNote, 0, 1)), ""},
		{"an input holding the same text", marshal(t, inInput), marshal(t, resolved(inInput, 0, 1)), ""},
		{"an input changed too", base, marshal(t, other), ""},
		{"a request left paused behind another member", marshal(t, behind), marshal(t, resolved(behind, 0)), ""},
		{"no interrupt resolved", base, base, ""},
		{"a message without interrupts", marshal(t, resolved(paused, 0, 1)), marshal(t, resolved(paused, 0, 1)), ""},
	} {
		edit := messageEdit(c.base, c.body)
		if string(edit) != c.want {
			t.Errorf("%s: edit %s, want %q", c.name, edit, c.want)
			continue
		}
		if edit == nil {
			continue
		}
		got, err := applyEdit(c.base, edit)
		if err != nil || !bytes.Equal(got, c.body) {
			t.Errorf("%s: the edit applied gives %s %v, want %s", c.name, got, err, c.body)
		}
	}
	for _, bad := range []string{`[0]`, `["resolved",1]`, `{"a":1}`, `["resolved"`} {
		if got, err := applyEdit(base, []byte(bad)); err == nil {
			t.Errorf("applyEdit(%s) = %s, want an error", bad, got)
		}
	}
}

// TestResolvedRewritesAreStoredAsEdits writes a paused turn, a resume that
// answers one of its two requests and leaves the other paused (stored
// whole), a resume of that which answers the other (an edit), a turn that
// rewrites the message otherwise (whole). The histories read back on
// another instance (no cache) are the bodies written, byte for byte; the
// messages view and holdpoint_history_message show each edited message
// whole.
func TestResolvedRewritesAreStoredAsEdits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	stores := storesOn(t, url, 2)
	paused := pausedRequests()
	user := marshal(t, protocol.Message{Role: protocol.RoleUser, Content: []protocol.Part{protocol.TextPart("pay")}})
	bodies := map[string][][]byte{"s1": {user, marshal(t, paused)}}
	tool := marshal(t, protocol.Message{Role: protocol.RoleTool, Content: []protocol.Part{protocol.TextPart("done")}})
	edited := resolved(paused, 1)
	edited.Content[0].Metadata = protocol.Metadata{"pendingOutput": json.RawMessage(`1`)}
	bodies["s2"] = [][]byte{user, marshal(t, resolved(paused, 0))}
	bodies["s3"] = [][]byte{user, marshal(t, resolved(paused, 0, 1)), tool}
	bodies["s4"] = [][]byte{user, marshal(t, edited), tool}
	parents := map[string]string{"s1": "", "s2": "s1", "s3": "s2", "s4": "s3"}
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		w := &store.SnapshotWrite{TenantID: "default", Agent: "a", SessionID: "s", SnapshotID: id, ParentID: parents[id],
			Status: protocol.StatusCompleted, FinishReason: "stop", MessageCount: len(bodies[id]), Actor: "test"}
		for p, b := range bodies[id] {
			var base []byte
			if parent := bodies[parents[id]]; p < len(parent) {
				if bytes.Equal(parent[p], b) {
					continue
				}
				base = parent[p]
			}
			w.Messages = append(w.Messages, store.PositionedMessage{Position: p, Body: b, Base: base})
		}
		if ok, err := stores[0].CommitTurn(ctx, w); err != nil || !ok {
			t.Fatalf("writing %s: %v %v", id, ok, err)
		}
	}
	owner := testdb.OwnerPool(t, url)
	for id, want := range map[string]string{"s2": `[` + string(bodies["s2"][1]) + `]`, "s3": `[["resolved"],` + string(tool) + `]`, "s4": `[` + string(bodies["s4"][1]) + `]`} {
		var stored string
		if err := owner.QueryRow(ctx, `SELECT turn_messages::text FROM snapshots WHERE id = $1`, id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if stored != want {
			t.Errorf("%s stores %s, want %s", id, stored, want)
		}
	}
	for id, want := range bodies {
		snap, err := stores[1].LoadSnapshot(ctx, store.LoadSnapshotParams{Scope: store.Scope{TenantID: "default"}, Agent: "a", ID: id, WithState: true})
		if err != nil {
			t.Fatalf("loading %s: %v", id, err)
		}
		if len(snap.Bodies) != len(want) {
			t.Fatalf("%s: %d messages, want %d", id, len(snap.Bodies), len(want))
		}
		for p := range want {
			if !bytes.Equal(snap.Bodies[p], want[p]) {
				t.Errorf("%s position %d: %s, want %s", id, p, snap.Bodies[p], want[p])
			}
			if got := marshal(t, snap.State.Messages[p]); !bytes.Equal(got, want[p]) {
				t.Errorf("%s position %d: message %s, want %s", id, p, got, want[p])
			}
		}
	}
	// SQL sees each edited message whole, as jsonb.
	for _, c := range []struct {
		id  string
		pos int
	}{{"s2", 1}, {"s3", 1}, {"s4", 1}, {"s1", 1}} {
		var view, fn bool
		want := bodies[c.id][c.pos]
		if err := owner.QueryRow(ctx, `SELECT body = $3::jsonb FROM messages WHERE snapshot_id = $1 AND position = $2`, c.id, c.pos, want).Scan(&view); err != nil {
			t.Fatalf("the view's %s:%d: %v", c.id, c.pos, err)
		}
		if err := owner.QueryRow(ctx, `SELECT holdpoint_history_message('default', $1, $2) = $3::jsonb`, c.id, c.pos, want).Scan(&fn); err != nil {
			t.Fatal(err)
		}
		if !view || !fn {
			t.Errorf("%s:%d: the view's body matches %v, holdpoint_history_message's %v", c.id, c.pos, view, fn)
		}
	}
}

// BenchmarkMessageEdit is what a resume's write spends finding its edit.
func BenchmarkMessageEdit(b *testing.B) {
	paused := pausedRequests()
	base, _ := json.Marshal(paused)
	body, _ := json.Marshal(resolved(paused, 0, 1))
	for b.Loop() {
		if messageEdit(base, body) == nil {
			b.Fatal("no edit")
		}
	}
}
