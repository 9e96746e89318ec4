package httpapi_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// TestResumeRetryAfterLostAnswer checks a client whose resume committed
// but whose answer was lost (it never read it) gets the same answer by
// sending the same resume again: the same snapshot, message and artifacts,
// and the transfer made once.
func TestResumeRetryAfterLostAnswer(t *testing.T) {
	t.Parallel()
	s := newObservedServer(t)
	s.tenant(t, "acme")
	client, _ := s.key(t, "acme", tenants.RoleClient)
	paused := pausedTransfer(t, s, client)
	first := approve(t, s, client, paused) // the answer the client lost
	again := approve(t, s, client, paused)
	if first["snapshotId"] == nil || again["snapshotId"] != first["snapshotId"] {
		t.Fatalf("retry answered snapshot %v, want %v", again["snapshotId"], first["snapshotId"])
	}
	if !reflect.DeepEqual(again["message"], first["message"]) || !reflect.DeepEqual(again["artifacts"], first["artifacts"]) {
		t.Fatalf("retry answered %v, want %v", again, first)
	}
}

// TestClientLearnsTheOutcome checks a client key reads how a decision
// ended (GET /api/v1/interrupts/{id}/outcome) without the admin API, and
// another tenant's key finds it no more than an unknown id.
func TestClientLearnsTheOutcome(t *testing.T) {
	t.Parallel()
	s := newObservedServer(t)
	s.tenant(t, "acme")
	s.tenant(t, "other")
	admin, _ := s.key(t, "acme", tenants.RoleAdmin)
	client, _ := s.key(t, "acme", tenants.RoleClient)
	stranger, _ := s.key(t, "other", tenants.RoleClient)
	paused := pausedTransfer(t, s, client)
	r := s.call(t, "GET", "/api/v1/interrupts?sessionId="+paused["sessionId"].(string), admin, nil)
	var page struct{ Items []service.Interrupt }
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("inbox: %d %s", r.status, r.body)
	}
	id := page.Items[0].ID.String()
	outcome := func(key, id string) (int, inbox.DecisionOutcome) {
		r := s.call(t, "GET", "/api/v1/interrupts/"+id+"/outcome", key, nil)
		var o inbox.DecisionOutcome
		if r.status == 200 {
			if err := json.Unmarshal(r.body, &o); err != nil {
				t.Fatalf("outcome: %v %s", err, r.body)
			}
		}
		return r.status, o
	}
	if st, o := outcome(client, id); st != 200 || o.Status != service.InterruptPending || o.ResumedSnapshotID != "" {
		t.Fatalf("pending outcome: %d %+v", st, o)
	}
	done := approve(t, s, client, paused)
	st, o := outcome(client, id)
	if st != 200 || o.Status != service.InterruptResolved || o.DecidedAt == nil || o.DecidedBy == "" ||
		o.ResumedSnapshotID != done["snapshotId"] || o.TurnStatus != service.StatusCompleted ||
		len(o.ToolCalls) != 1 || o.ToolCalls[0].Status != service.ToolCallSucceeded {
		t.Fatalf("decided outcome: %d %+v, want resumed %v", st, o, done["snapshotId"])
	}
	for name, probe := range map[string][2]string{
		"another tenant's key": {stranger, id}, "an unknown id": {client, uuid.NewString()}, "a malformed id": {client, "x"},
	} {
		if st, _ := outcome(probe[0], probe[1]); st != 404 {
			t.Errorf("%s: %d, want 404", name, st)
		}
	}
}
