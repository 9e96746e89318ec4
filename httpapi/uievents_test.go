package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service"
)

// TestAuditTrailSentences: each event of an interrupt's audit trail, those
// of policies' votes and escalations included, reads as a sentence.
func TestAuditTrailSentences(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 14, 2, 9, 0, time.UTC)
	for _, tc := range []struct {
		typ, actor, payload string
		want, with, note    string
	}{
		{"created", "key:app", `{"snapshotId":"s1"}`, "Raised by a turn of key:app", "", ""},
		{"resolved", "key:ops/alice", `{"respond":{"approved":true},"note":"checked"}`, "Approved by key:ops/alice", "", "checked"},
		{"resolved", "key:ops/alice", `{"respond":{"approved":false}}`, "Denied by key:ops/alice", "", ""},
		{"resolved", "key:ops/alice", `{"respond":{ "city": "Paris" }}`, "Answered by key:ops/alice", `{"city":"Paris"}`, ""},
		{"resolved", "system", `{"respond":{"approved":false},"reason":"deadline"}`, "Denied by the deadline", "", ""},
		{"resolved", "key:ops/bob", `{"restart":true,"note":"again"}`, "Restarted by key:ops/bob", "", "again"},
		{"resolved", "key:app", `{"resumedSnapshotId":"s2"}`, "Answered by key:app through a resume (snapshot s2)", "", ""},
		{"claimed", "key:app", ``, "Claimed by a resume of key:app", "", ""},
		{"released", "key:app", ``, "Released: the resume failed before it changed anything", "", ""},
		{"expired", "system", ``, "Expired", "", ""},
		{"cancelled", "system", ``, "Cancelled because the session moved on", "", ""},
		{"voted", "key:ops/k1", `{"vote":"approve","voter":"key:k1","approvals":1,"needed":2,"note":"fine"}`, "Approval 1 of 2 by key:ops/k1", "", "fine"},
		{"voted", "key:ops/k1", `{"vote":"approve","voter":"user:alice","approvals":1,"needed":2}`, "Approval 1 of 2 by alice (through key:ops/k1)", "", ""},
		{"voted", "key:ops/k2", `{"vote":"deny","voter":"key:k2","approvals":1,"needed":2}`, "Denied by key:ops/k2", "", ""},
		{"escalated", "system", `{"scope":"approve:x"}`, "Escalated to approve:x", "", ""},
	} {
		ev := service.InterruptEvent{Type: tc.typ, Actor: tc.actor, CreatedAt: at}
		if tc.payload != "" {
			ev.Payload = json.RawMessage(tc.payload)
		}
		l := eventSentence(ev)
		if l.Text != tc.want || l.With != tc.with || l.Note != tc.note || l.Clock() != "14:02" {
			t.Errorf("%s %s: %+v (at %s), want %q with %q, note %q at 14:02", tc.typ, tc.payload, l, l.Clock(), tc.want, tc.with, tc.note)
		}
	}
}

// TestReportDaysWithoutData: the daily charts have a group for each day
// of the range, zero where there was nothing, and one day is not drawn as
// a bar half the chart wide.
func TestReportDaysWithoutData(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	days := everyDay(from, from.Add(7*24*time.Hour), []service.ReportRow{{Key: "2026-11-28", Approved: 3, Denied: 1}})
	if len(days) != 7 || days[0].Key != "2026-11-26" || days[2].Approved != 3 || days[6].Key != "2026-12-02" || days[3].Approved != 0 {
		t.Fatalf("days %+v", days)
	}
	c := barChart("Decisions per day", "", []string{"2026-12-02"}, []series{{"approved", "#000", []float64{2}}})
	if len(c.Bars) != 1 || c.Bars[0].W > 60 || c.Labels[0].Text != "12-02" {
		t.Fatalf("one day's chart: %+v", c)
	}
}
