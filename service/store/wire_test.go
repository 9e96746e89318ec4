package store_test

import (
	"cmp"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// TestInterruptWireHasEveryField fails when a field of the interrupt
// record is missing from its wire form (protocol.InboxInterrupt, which
// the Go client shares) or is not copied by Wire.
func TestInterruptWireHasEveryField(t *testing.T) {
	t.Parallel()
	wire := reflect.TypeFor[protocol.InboxInterrupt]()
	rec := reflect.TypeFor[store.Interrupt]()
	for f := range rec.Fields() {
		if f.Tag.Get("json") == "-" {
			continue
		}
		if _, ok := wire.FieldByName(f.Name); !ok {
			t.Errorf("store.Interrupt.%s is not in protocol.InboxInterrupt", f.Name)
		}
	}

	at := time.Date(2026, 12, 6, 9, 30, 0, 0, time.UTC)
	prev := uuid.New()
	it := store.Interrupt{
		ID: uuid.New(), Agent: "bank", SessionID: "s1", SnapshotID: "snap", Tool: "pay", Ref: "r1",
		Input: json.RawMessage(`{"amount":5}`), Metadata: json.RawMessage(`{"m":1}`), Status: "resolved",
		CreatedAt: at, ExpiresAt: &at, ResolvedAt: &at, ResolvedBy: "key:ops", Resolution: json.RawMessage(`{"respond":true}`),
		ResumedSnapshotID: "snap2", PreviousID: &prev, OnExpire: json.RawMessage(`{"respond":false}`), EndUser: "alice",
		Policy: &store.StoredPolicy{Scope: "approve:payments", Approvals: 2, AllowEdit: true, Attempts: 3,
			Escalate: &store.StoredEscalation{AfterMs: 60000, Scope: "approve:lead"}},
		Scope: "approve:lead", Approvals: 1, ApprovalsNeeded: 2, ProposedInput: json.RawMessage(`{"amount":4}`), EscalatedAt: &at,
	}
	w := it.Wire()
	got := reflect.ValueOf(w)
	for i := range got.NumField() {
		if got.Field(i).IsZero() {
			t.Errorf("Wire leaves %s empty", wire.Field(i).Name)
		}
	}
	if w.ID != it.ID.String() || w.PreviousID != prev.String() || *w.Policy.Escalate != (protocol.InboxEscalation{AfterMs: 60000, Scope: "approve:lead"}) {
		t.Errorf("Wire = %+v", w)
	}
	back0, err := store.InterruptOfWire(w)
	it.OnExpire = nil
	if err != nil || !reflect.DeepEqual(back0, it) {
		t.Errorf("InterruptOfWire(Wire()) = %+v, %v; want %+v", back0, err, it)
	}
	if _, err := store.InterruptOfWire(protocol.InboxInterrupt{ID: "x"}); err == nil {
		t.Error("InterruptOfWire accepts a malformed id")
	}
	raw, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	var back protocol.InboxInterrupt
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back.Policy, w.Policy) || back.ID != w.ID {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

// TestEventWiresHaveEveryField fails when a field of a live event or of an
// audit-trail entry is missing from its wire form (protocol.Event,
// protocol.AuditEvent, which the Go client shares) or is left empty by
// Wire.
func TestEventWiresHaveEveryField(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 9, 30, 0, 0, time.UTC)
	id := uuid.New()
	pos := store.EventPos{Xid: 7, ID: 9}
	n := store.Notification{TenantID: "acme", EventID: "ev_1", Pos: pos, Type: "interrupt.created", InterruptID: &id,
		Agent: "bank", Tool: "pay", SessionID: "s1", SnapshotID: "snap", Actor: "key:ops", At: at}
	ev := store.InterruptEvent{ID: "ev_1", Pos: pos, InterruptID: id, Type: "interrupt.created", Actor: "key:ops",
		Payload: json.RawMessage(`{"a":1}`), CreatedAt: at}
	for _, c := range []struct {
		rec, wire any
		renamed   map[string]string // record field -> wire field
	}{
		{n, n.Wire(), map[string]string{"EventID": "ID"}},
		{ev, ev.Wire(), nil},
	} {
		rec, wire := reflect.ValueOf(c.rec), reflect.ValueOf(c.wire)
		for i := range rec.NumField() {
			f := rec.Type().Field(i)
			if f.Name == "Pos" {
				continue // never shown
			}
			if rec.Field(i).IsZero() {
				t.Fatalf("the test's %s leaves %s empty", rec.Type(), f.Name)
			}
			name := cmp.Or(c.renamed[f.Name], f.Name)
			if w := wire.FieldByName(name); !w.IsValid() {
				t.Errorf("%s.%s is not in %s", rec.Type(), f.Name, wire.Type())
			} else if w.IsZero() {
				t.Errorf("%s.Wire leaves %s empty", rec.Type(), name)
			}
		}
		if rec.NumField()-1 != wire.NumField() {
			t.Errorf("%s has %d fields shown, %s %d", rec.Type(), rec.NumField()-1, wire.Type(), wire.NumField())
		}
	}
	if w := n.Wire(); w.InterruptID != id.String() || w.ID != "ev_1" {
		t.Errorf("Notification.Wire = %+v", w)
	}
	n.InterruptID = nil
	if w := n.Wire(); w.InterruptID != "" {
		t.Errorf("an event about no interrupt shows interrupt %q", w.InterruptID)
	}
	raw, err := json.Marshal(ev.Wire())
	if err != nil || !strings.Contains(string(raw), `"interruptId":"`+id.String()+`"`) || !strings.Contains(string(raw), `"payload":{"a":1}`) {
		t.Errorf("audit entry on the wire: %s %v", raw, err)
	}
}
