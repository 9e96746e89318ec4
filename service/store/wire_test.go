package store_test

import (
	"encoding/json"
	"reflect"
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
