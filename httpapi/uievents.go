package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/events"
)

// eventLine is one event of an interrupt's audit trail as a sentence:
// Text, then With (compact JSON, shown as code) when there is one, the
// time, and the note the decider left.
type eventLine struct {
	Text string
	With string
	At   time.Time
	Note string
	// Fields and Raw are a decision's answer, field by field, and its
	// whole resolution as JSON (the history and the decision page show
	// the JSON only when asked: a details element).
	Fields []field
	Raw    string
}

// Clock is the event's time of day; the page shows the full time beside
// it on hover.
func (l eventLine) Clock() string { return l.At.UTC().Format("15:04") }

// Full is the event's time in full.
func (l eventLine) Full() string { return l.At.UTC().Format("2006-01-02 15:04:05 UTC") }

// eventPayload is what the events of the audit trail carry: a decision's
// resolution ({"respond": ..., "note"} or {"restart": true, "note"}, with
// "reason": "deadline" for a deadline's answer), a resume's snapshot, a
// vote, an escalation's scope.
type eventPayload struct {
	Respond           json.RawMessage `json:"respond"`
	Restart           bool            `json:"restart"`
	Note              string          `json:"note"`
	Reason            string          `json:"reason"`
	ResumedSnapshotID string          `json:"resumedSnapshotId"`
	SnapshotID        string          `json:"snapshotId"`
	Vote              string          `json:"vote"`
	Voter             string          `json:"voter"`
	Approvals         int             `json:"approvals"`
	Needed            int             `json:"needed"`
	Scope             string          `json:"scope"`
}

// eventLines says each event of an audit trail as a sentence.
func eventLines(events []service.InterruptEvent) []eventLine {
	out := make([]eventLine, 0, len(events))
	for _, ev := range events {
		out = append(out, eventSentence(ev))
	}
	return out
}

// eventSentence says what an event of the audit trail did, and who did it.
func eventSentence(ev service.InterruptEvent) eventLine {
	var p eventPayload
	_ = json.Unmarshal(ev.Payload, &p)
	l := eventLine{At: ev.CreatedAt, Note: p.Note}
	switch ev.Type {
	case events.Created:
		l.Text = "Raised by a turn of " + ev.Actor
	case events.Claimed:
		l.Text = "Claimed by a resume of " + ev.Actor
	case events.Resolved:
		l.Text, l.With = decisionSentence(ev.Actor, p)
	case events.Expired:
		l.Text = "Expired"
	case events.Released:
		l.Text = "Released: the resume failed before it changed anything"
	case events.Cancelled:
		l.Text = "Cancelled because the session moved on"
	case "voted":
		l.Text = voteSentence(ev.Actor, p)
	case "escalated":
		l.Text = "Escalated to " + p.Scope
	default:
		l.Text = fmt.Sprintf("%s by %s", ev.Type, ev.Actor)
		l.With = compactJSON(ev.Payload)
	}
	return l
}

// decisionSentence says a resolved event: an approval, a denial, an answer
// with its output, a restart, or a protocol resume.
func decisionSentence(actor string, p eventPayload) (string, string) {
	by := "by " + actor
	if p.Reason == "deadline" {
		by = "by the deadline"
	}
	switch {
	case p.Restart:
		return "Restarted " + by, ""
	case len(p.Respond) > 0:
		var approval struct {
			Approved *bool `json:"approved"`
		}
		if json.Unmarshal(p.Respond, &approval) == nil && approval.Approved != nil {
			if *approval.Approved {
				return "Approved " + by, ""
			}
			return "Denied " + by, ""
		}
		return "Answered " + by, compactJSON(p.Respond)
	case p.ResumedSnapshotID != "":
		return "Answered " + by + " through a resume (snapshot " + p.ResumedSnapshotID + ")", ""
	default:
		return "Decided " + by, ""
	}
}

// voteSentence says one vote of a policy that needs several approvals.
func voteSentence(actor string, p eventPayload) string {
	// The actor names the key (key:NAME/ID); a vote for an end user
	// (X-End-User) names them too.
	voter := actor
	if strings.HasPrefix(p.Voter, "user:") {
		voter = strings.TrimPrefix(p.Voter, "user:") + " (through " + actor + ")"
	} else if actor == "" {
		voter = p.Voter
	}
	if p.Vote == "deny" {
		return "Denied by " + voter
	}
	if p.Needed > 0 {
		return fmt.Sprintf("Approval %d of %d by %s", p.Approvals, p.Needed, voter)
	}
	return "Approved by " + voter
}

// compactJSON is raw on one line ("" for none).
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return unescapeHidden(b.String())
}

// outcomeLine says how an interrupt that is no longer pending ended, as
// the history and its decision page show it.
func outcomeLine(it service.Interrupt) eventLine {
	l := eventLine{At: it.CreatedAt}
	if it.ResolvedAt != nil {
		l.At = *it.ResolvedAt
	}
	switch it.Status {
	case service.InterruptExpired:
		l.Text = "Expired"
	case service.InterruptCancelled:
		l.Text = "Cancelled because the session moved on"
	case service.InterruptPending:
		l.Text = "Waiting for a decision"
	default:
		var p eventPayload
		_ = json.Unmarshal(it.Resolution, &p)
		l.Text, l.With = decisionSentence(it.ResolvedBy, p)
		l.Note = p.Note
		l.Fields, l.With = decisionFields(p.Respond, l.With)
		l.Raw = compactJSON(it.Resolution)
	}
	return l
}

// decisionFields are the fields of a decision's answer as the history and
// the decision page list them, but "approved", which the sentence says;
// an answer that is not an object stays in with, as it was.
func decisionFields(respond json.RawMessage, with string) ([]field, string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(respond, &obj) != nil {
		return nil, with
	}
	var out []field
	for _, f := range inputFields(respond) {
		if f.Name != "approved" {
			out = append(out, f)
		}
	}
	return out, ""
}
