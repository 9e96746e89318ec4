package httpapi_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
)

// TestHostileInputIsRefused sends what PostgreSQL or the JSON encoder
// cannot take (U+0000, numbers past numeric's range, invalid UTF-8, years
// past 9999, NUL in a filter) and JSON that decoders read differently
// (duplicate member names) to every route that stores or queries it. Each
// gets 400 INVALID_ARGUMENT with a message saying what is wrong, nothing in
// the database changes, and the interrupt they aim at stays pending.
func TestHostileInputIsRefused(t *testing.T) {
	t.Parallel()
	s := newInboxServer(t, inboxConfig{})
	snap, it := s.pausedTransfer(t, "hostile", "Transfer $7 to account "+newAccount())
	ref := it.Ref
	respond := "/api/v1/interrupts/" + it.ID.String() + "/respond"
	restart := "/api/v1/interrupts/" + it.ID.String() + "/restart"
	protocol := "/api/agents/" + demo.BankingAgentName
	resume := func(output string) string {
		return `{"init":{"snapshotId":"` + snap + `"},"data":{"resume":{"respond":[{"toolResponse":{"name":"userApproval","ref":"` + ref + `","output":` + output + `}}]}}}`
	}
	message := func(part string) string {
		return `{"data":{"message":{"role":"user","content":[` + part + `]}},"init":{"sessionId":"hostile-new"}}`
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

	fingerprint := func() string {
		var f string
		err := s.owner.QueryRow(context.Background(), `SELECT concat_ws('/',
			(SELECT md5(coalesce(string_agg(i::text, ',' ORDER BY tenant_id, id), '')) FROM interrupts i),
			(SELECT md5(coalesce(string_agg(s::text, ',' ORDER BY tenant_id, id), '')) FROM sessions s),
			(SELECT md5(coalesce(string_agg(p::text, ',' ORDER BY tenant_id, id), '')) FROM snapshots p),
			(SELECT count(*) FROM interrupt_events), (SELECT count(*) FROM messages), (SELECT count(*) FROM turn_jobs))`).Scan(&f)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	before := fingerprint()

	for _, tc := range []struct {
		name, method, path, body string
		message                  string // a piece of the expected message
	}{
		// The payloads of the issue, each a 500 before.
		{"NUL in a text part", "POST", protocol, message(`{"text":"pay\u0000me"}`), "U+0000"},
		{"NUL in a resumed output", "POST", protocol, resume(`{"approved":true,"feedback":"ok\u0000"}`), "U+0000"},
		{"NUL in a respond output", "POST", respond, `{"output":{"approved":true,"feedback":"ok\u0000"}}`, "U+0000"},
		{"number past numeric in a part", "POST", protocol, message(`{"data":{"amount":1e999999}}`), "out of range"},
		{"number past numeric in a respond output", "POST", respond, `{"output":{"approved":false,"amount":1e999999}}`, "out of range"},
		{"number past numeric in a resumed output", "POST", protocol, resume(`{"approved":false,"amount":-1e999999}`), "out of range"},
		{"invalid UTF-8 in a text part", "POST", protocol, message("{\"text\":\"caf\xe9\"}"), "UTF-8"},
		{"invalid UTF-8 in a respond note", "POST", respond, "{\"output\":{\"approved\":true},\"note\":\"\xff\xfe\"}", "UTF-8"},
		{"duplicate output", "POST", respond, `{"output":{"approved":false},"output":{"approved":true}}`, "duplicate"},
		{"report to the last day", "GET", "/api/v1/reports/interrupts?to=9999-12-31", "", "to"},
		{"NUL in the tool filter", "GET", "/api/v1/interrupts?tool=%00", "", "tool"},

		// Their relatives.
		{"duplicate approved", "POST", respond, `{"output":{"approved":false,"approved":true}}`, "duplicate"},
		{"duplicate in a resume", "POST", protocol, resume(`{"approved":false,"approved":true}`), "duplicate"},
		{"duplicate data", "POST", protocol, `{"data":{},"data":{"message":{"role":"user","content":[{"text":"hi"}]}}}`, "duplicate"},
		{"duplicate restart note", "POST", restart, `{"note":"a","note":"b"}`, "duplicate"},
		{"NUL in a member name", "POST", respond, `{"output":{"approved":true,"x\u0000":1}}`, "U+0000"},
		{"NUL in a session id", "POST", protocol, `{"data":{"message":{"role":"user","content":[{"text":"hi"}]}},"init":{"sessionId":"s\u0000"}}`, "U+0000"},
		{"NUL in a note", "POST", respond, `{"output":{"approved":true},"note":"\u0000"}`, "U+0000"},
		{"lone surrogate", "POST", respond, `{"output":{"approved":true,"feedback":"\ud800"}}`, "surrogate"},
		{"overflowing float", "POST", respond, `{"output":{"approved":true,"n":1e400}}`, "out of range"},
		{"underflowing float", "POST", respond, `{"output":{"approved":true,"n":1e-400}}`, "close to zero"},
		{"zero with a huge exponent", "POST", respond, `{"output":{"approved":true,"n":0e-99999}}`, "exponent"},
		{"number literal too long", "POST", protocol, message(`{"data":` + strings.Repeat("9", 200) + `}`), "200 characters"},
		{"nested too deep", "POST", respond, `{"output":{"approved":true,"x":` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}}`, "nested deeper than 64"},
		{"two values", "POST", respond, `{"output":{"approved":true}} {"output":{"approved":false}}`, "second JSON value"},
		{"invalid UTF-8 in the agent filter", "GET", "/api/v1/interrupts?agent=%ff", "", "agent"},
		{"control character in the sessionId filter", "GET", "/api/v1/interrupts?sessionId=a%07b", "", "sessionId"},
		{"C1 control character in the tool filter", "GET", "/api/v1/interrupts?tool=%C2%85", "", "tool"},
		{"report to a time past 9999 in UTC", "GET", "/api/v1/reports/interrupts?to=9999-12-31T23:00:00-05:00", "", "to"},
		{"report from year 0", "GET", "/api/v1/reports/interrupts?from=0000-12-31&to=0001-01-02", "", "from"},
		{"report whose default from is before year 1", "GET", "/api/v1/reports/interrupts?to=0001-01-03", "", "from"},
		{"inbox created before year 1", "GET", "/api/v1/interrupts?createdBefore=0000-06-01T00:00:00Z", "", "createdBefore"},
		{"cursor in year 0", "GET", "/api/v1/interrupts?cursor=" + b64("0000-01-01T00:00:00Z|"+it.ID.String()), "", "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := s.call(t, tc.method, tc.path, body)
			e := errorOf(t, r, http.StatusBadRequest, service.CodeInvalidArgument)
			if !strings.Contains(e.Message, tc.message) {
				t.Errorf("message %q does not mention %q", e.Message, tc.message)
			}
			checkNoLeak(t, r.body)
		})
	}
	if after := fingerprint(); after != before {
		t.Fatalf("refused requests changed the database:\n before %s\n after  %s", before, after)
	}
	if got := s.onlyPending(t, "hostile"); got.ID != it.ID || got.Status != "pending" {
		t.Fatalf("the interrupt is %+v after the attacks, want it pending", got)
	}

	// The same routes still take well-formed input: the interrupt is
	// decided once, as denied.
	var d decisionAnswer
	okJSON(t, s.call(t, http.MethodPost, respond, `{"output":{"approved":false,"feedback":"ok","amount":1e300,"tiny":1e-300,"zero":0e-5}}`), &d)
	if d.Status != "resumed" || d.Output == nil || !strings.Contains(d.Output.Message.Text(), "Cancelled") {
		t.Fatalf("decision after the attacks: %s", mustJSON(d))
	}
}
