package approval_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// TestPolicyDefaults checks the zero policy's approvals, runs and stored
// form, and what makes a policy maker-checker.
func TestPolicyDefaults(t *testing.T) {
	var p approval.Policy
	if p.Approvers() != 1 || p.Runs() != approval.DefaultAttempts || p.MakerChecker() {
		t.Fatalf("zero policy: approvers %d, runs %d, maker-checker %v", p.Approvers(), p.Runs(), p.MakerChecker())
	}
	if need, err := p.Requires(t.Context(), nil); !need || err != nil {
		t.Fatalf("Requires without When = %v, %v", need, err)
	}
	p = approval.Policy{Scope: "approve:payments", Approvals: 2, AllowEdit: true,
		Escalate: &approval.Escalation{After: time.Minute, Scope: "approve:lead"}}
	s := p.Stored()
	if !p.MakerChecker() || !s.MakerChecker() || s.Approvals != 2 || s.Attempts != approval.DefaultAttempts ||
		s.Escalate == nil || s.Escalate.AfterMs != 60000 || s.Escalate.Scope != "approve:lead" {
		t.Fatalf("stored = %+v", s)
	}
}

// TestValidate checks the bounds a policy is held to.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		p    approval.Policy
		want string
	}{
		{approval.Policy{Approvals: approval.MaxApprovals + 1}, "approvals must be between"},
		{approval.Policy{Attempts: approval.MaxAttempts + 1}, "attempts must be between"},
		{approval.Policy{Scope: "approve payments"}, "must be 1-64 letters"},
		{approval.Policy{Scope: "a", Escalate: &approval.Escalation{Scope: "b"}}, "escalate.after"},
		{approval.Policy{Escalate: &approval.Escalation{After: time.Minute, Scope: "b"}}, "escalate needs a scope"},
		{approval.Policy{Scope: "a", Approvals: approval.MaxApprovals, Attempts: approval.MaxAttempts}, ""},
	} {
		err := tc.p.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// TestGateMarker checks the gate's marker is read back from the metadata
// the gate writes, and lost by a tool's own metadata.
func TestGateMarker(t *testing.T) {
	p := approval.Policy{Scope: "approve:payments", Approvals: 2, AllowEdit: true}
	meta := p.GateMeta("pay", "paying the invoice")
	g := approval.GateOf(meta)
	if g == nil || *g != (approval.Gate{Scope: "approve:payments", Approvals: 2, AllowEdit: true}) {
		t.Fatalf("GateOf(%s) = %+v", meta, g)
	}
	stripped := approval.StripGate(meta)
	if approval.GateOf(stripped) != nil || !strings.Contains(string(stripped), "paying the invoice") {
		t.Fatalf("StripGate(%s) = %s", meta, stripped)
	}
	if approval.GateOf(nil) != nil || approval.GateOf(json.RawMessage(`true`)) != nil {
		t.Fatal("a pause the gate did not make reads as a gate")
	}
}

// TestSameAndEdited checks which restarts approve the same call, and what
// an approver's edit leaves in the history.
func TestSameAndEdited(t *testing.T) {
	a := json.RawMessage(`{"restart":true,"input":{"a":1,"b":2},"note":"x"}`)
	if !approval.Same(a, json.RawMessage(`{"input":{"b":2,"a":1},"restart":true}`)) ||
		approval.Same(a, json.RawMessage(`{"restart":true,"input":{"a":2}}`)) ||
		approval.Same(a, json.RawMessage(`{"output":{}}`)) {
		t.Fatal("Same misjudges restarts")
	}
	p := protocol.Part{ToolRequest: &protocol.ToolRequest{Name: "pay", Input: json.RawMessage(`{"amount":5}`)}}
	e := approval.Edited(p, json.RawMessage(`{"amount":4}`))
	if string(e.ToolRequest.Input) != `{"amount":4}` || string(e.Metadata[approval.MetaEditedFrom]) != `{"amount":5}` ||
		string(p.ToolRequest.Input) != `{"amount":5}` || p.Metadata != nil {
		t.Fatalf("Edited = %+v (from %+v)", e, p)
	}
}
