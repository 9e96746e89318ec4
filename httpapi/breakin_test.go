package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/demo"
	"github.com/holdpoint/holdpoint/service/inbox"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// Markers: text only tenant acme's rows (and user-y's session) contain. An
// answer to an attacker that carries one has leaked.
const (
	markerAcme    = "acme-confidential-7f3a"
	markerAccount = "88446622" // the account of acme's transfers
	markerUserY   = "y-private-91c2"
)

// breakIn counts the attacks and the answers that gave something away.
type breakIn struct {
	t        *testing.T
	s        *authServer
	attempts int
	leaks    int
	// secrets are the markers and acme's ids: none may appear in an
	// answer unless the attacker sent it.
	secrets []string
}

// try sends one attack and checks its answer has status want and carries
// no secret the request did not itself contain. It returns the answer.
func (b *breakIn) try(name, cred, method, path string, body any, want int, headers ...string) response {
	b.t.Helper()
	b.attempts++
	r := b.s.call(b.t, method, path, cred, body, headers...)
	sent, _ := json.Marshal(body)
	request := path + string(sent)
	if got := answeredStatus(b.t, r); got != want {
		b.leak("%s: %s %s answered %d, want %d: %s", name, method, path, got, want, r.body)
		return r
	}
	for _, secret := range b.secrets {
		if strings.Contains(string(r.body), secret) && !strings.Contains(request, secret) {
			b.leak("%s: %s %s answer carries %q: %s", name, method, path, secret, r.body)
		}
	}
	return r
}

// leak records one leak.
func (b *breakIn) leak(format string, args ...any) {
	b.t.Helper()
	b.leaks++
	b.t.Errorf("LEAK "+format, args...)
}

// fingerprint describes every row of a tenant that an attack could change:
// counts of every table and the status of every snapshot and interrupt.
func (s *authServer) fingerprint(t *testing.T, tenant string) string {
	t.Helper()
	var out strings.Builder
	for _, q := range []string{
		"SELECT count(*)::text FROM sessions WHERE tenant_id = $1",
		"SELECT count(*)::text FROM snapshots WHERE tenant_id = $1",
		"SELECT count(*)::text FROM messages WHERE tenant_id = $1",
		"SELECT count(*)::text FROM interrupts WHERE tenant_id = $1",
		"SELECT count(*)::text FROM interrupt_events WHERE tenant_id = $1",
		"SELECT count(*)::text FROM tool_calls WHERE tenant_id = $1",
		"SELECT coalesce(string_agg(turn_id || ':' || call_key || ':' || status, ',' ORDER BY turn_id, call_key), '') FROM tool_calls WHERE tenant_id = $1",
		"SELECT coalesce(string_agg(id || ':' || coalesce(latest_snapshot_id, '') || ':' || coalesce(end_user, ''), ',' ORDER BY id), '') FROM sessions WHERE tenant_id = $1",
		"SELECT coalesce(string_agg(id || ':' || status, ',' ORDER BY id), '') FROM snapshots WHERE tenant_id = $1",
		"SELECT coalesce(string_agg(id::text || ':' || status || ':' || coalesce(resolved_by, ''), ',' ORDER BY id), '') FROM interrupts WHERE tenant_id = $1",
	} {
		var v string
		if err := s.owner.QueryRow(context.Background(), q, tenant).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out.WriteString(v + "\n")
	}
	return out.String()
}

// interruptOf returns the id of the interrupt a snapshot paused on.
func (s *authServer) interruptOf(t *testing.T, snapshotID string) string {
	t.Helper()
	var id string
	if err := s.owner.QueryRow(context.Background(), "SELECT id::text FROM interrupts WHERE snapshot_id = $1", snapshotID).Scan(&id); err != nil {
		t.Fatalf("interrupt of %s: %v", snapshotID, err)
	}
	return id
}

// toolRequest returns the tool request of an interrupted output.
func toolRequest(t *testing.T, out service.AgentOutput) *service.ToolRequest {
	t.Helper()
	if out.FinishReason != service.FinishInterrupted || out.Message == nil {
		t.Fatalf("output %+v: want an interrupted turn", out)
	}
	for _, p := range out.Message.Content {
		if p.ToolRequest != nil {
			return p.ToolRequest
		}
	}
	t.Fatalf("output %+v has no tool request", out)
	return nil
}

// forge signs a token with any algorithm and key, as an attacker would.
func forge(t *testing.T, method jwt.SigningMethod, key any, tenant, user string, exp time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, jwt.MapClaims{
		"iss": "holdpoint", "aud": "holdpoint", "sub": user, "tid": tenant,
		"iat": time.Now().Add(-time.Hour).Unix(), "exp": exp.Unix(), "jti": "forged",
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestBreakIn attacks every route with the credentials of another tenant,
// another end user, a revoked key, forged and expired tokens and a key of
// the wrong role. Every attack must be refused as if the target did not
// exist (404, or an empty list), 401 or 403, answer nothing of the
// victim's, and change none of the victim's rows.
func TestBreakIn(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newAuthServer(t, nil, &service.Agent{Name: "gateAgent", ServerManaged: true, Turn: g.turn})
	t.Cleanup(func() { close(g.release) })
	ctx := context.Background()
	s.tenant(t, "acme")
	s.tenant(t, "rival")
	acmeAdmin, _ := s.key(t, "acme", tenants.RoleAdmin)
	acmeClient, _ := s.key(t, "acme", tenants.RoleClient)
	rivalAdmin, _ := s.key(t, "rival", tenants.RoleAdmin)
	rivalClient, _ := s.key(t, "rival", tenants.RoleClient)
	userX := s.token(t, "acme", "user-x")
	userY := s.token(t, "acme", "user-y")
	rivalUser := s.token(t, "rival", "user-x") // same user name, other tenant

	// Acme's rows: a chat, an interrupt to respond to, an interrupt to
	// restart, a resolved interrupt, a running detached turn, and user-y's
	// own session.
	chat := s.send(t, acmeAdmin, "chatAgent", "hello "+markerAcme, map[string]any{"sessionId": "acme-chat"})
	bank := s.send(t, acmeClient, demo.BankingAgentName, "Transfer $50 to account "+markerAccount, nil)
	bankReq := toolRequest(t, bank)
	big := s.send(t, acmeClient, demo.BankingAgentName, "Transfer $20000 to account "+markerAccount, nil)
	approvedIrq := s.interruptOf(t, big.SnapshotID)
	var overLimit service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/"+demo.BankingAgentName, acmeClient, map[string]any{
		"data": map[string]any{"resume": map[string]any{"respond": []any{map[string]any{"toolResponse": map[string]any{
			"name": "userApproval", "ref": toolRequest(t, big).Ref, "output": map[string]any{"approved": true}}}}}},
		"init": map[string]any{"snapshotId": big.SnapshotID},
	}), &overLimit)
	restartReq := toolRequest(t, overLimit)
	if restartReq.Name != demo.ToolTransferMoney {
		t.Fatalf("want transferMoney waiting for a restart, got %+v", restartReq)
	}
	bankIrq, restartIrq := s.interruptOf(t, bank.SnapshotID), s.interruptOf(t, overLimit.SnapshotID)
	detach := userMessage("work " + markerAcme)
	detach["detach"] = true
	var pending service.AgentOutput
	resultOf(t, s.call(t, http.MethodPost, "/api/agents/gateAgent", acmeAdmin, map[string]any{"data": detach}), &pending)
	ySess := s.send(t, userY, "chatAgent", "my diary "+markerUserY, map[string]any{"sessionId": "y-chat"})
	transfersBefore := len(demo.Transfers())

	b := &breakIn{t: t, s: s, secrets: []string{
		markerAcme, markerAccount, markerUserY,
		chat.SnapshotID, bank.SnapshotID, big.SnapshotID, overLimit.SnapshotID, pending.SnapshotID, ySess.SnapshotID,
		bank.SessionID, big.SessionID, pending.SessionID,
		bankIrq, restartIrq, approvedIrq,
	}}
	before := s.fingerprint(t, "acme")

	respondBody := func(req *service.ToolRequest) map[string]any {
		return map[string]any{"respond": []any{map[string]any{"toolResponse": map[string]any{
			"name": req.Name, "ref": req.Ref, "output": map[string]any{"approved": true}}}}}
	}
	restartBody := map[string]any{"restart": []any{map[string]any{"toolRequest": map[string]any{
		"name": restartReq.Name, "ref": restartReq.Ref, "input": restartReq.Input}, "metadata": map[string]any{"resumed": map[string]any{"confirmed": true}}}}}
	post := func(agent, route string) string {
		if route == "" {
			return "/api/agents/" + agent
		}
		return "/api/agents/" + agent + "/" + route
	}

	// protocolAttacks are the protocol routes against acme's ids (or
	// user-y's, for a caller of acme acting for another user).
	type target struct {
		chatSnap, chatSess string
	}
	protocolAttacks := func(who, cred string, tg target, headers ...string) {
		nf := http.StatusNotFound
		b.try(who+" continues a snapshot", cred, http.MethodPost, post("chatAgent", ""), map[string]any{"data": userMessage("hi"), "init": map[string]any{"snapshotId": tg.chatSnap}}, nf, headers...)
		b.try(who+" continues a snapshot in its session", cred, http.MethodPost, post("chatAgent", ""), map[string]any{"data": userMessage("hi"), "init": map[string]any{"snapshotId": tg.chatSnap, "sessionId": tg.chatSess}}, nf, headers...)
		b.try(who+" streams from a snapshot", cred, http.MethodPost, post("chatAgent", "")+"?stream=true", map[string]any{"data": userMessage("hi"), "init": map[string]any{"snapshotId": tg.chatSnap}}, nf, headers...)
		b.try(who+" gets a snapshot by id", cred, http.MethodPost, post("chatAgent", "getSnapshot"), map[string]any{"data": map[string]any{"snapshotId": tg.chatSnap}}, nf, headers...)
		b.try(who+" gets a session's snapshot", cred, http.MethodPost, post("chatAgent", "getSnapshot"), map[string]any{"data": map[string]any{"sessionId": tg.chatSess}}, nf, headers...)
		for _, snap := range []string{tg.chatSnap, pending.SnapshotID} {
			agent := "chatAgent"
			if snap == pending.SnapshotID {
				agent = "gateAgent"
			}
			r := b.try(who+" aborts a snapshot", cred, http.MethodPost, post(agent, "abort"), map[string]any{"data": map[string]any{"snapshotId": snap}}, http.StatusOK, headers...)
			var res map[string]any
			resultOf(t, r, &res)
			if _, ok := res["status"]; ok {
				b.leak("%s: abort of %s reports status %v", who, snap, res["status"])
			}
		}
		// The banking interrupts: respond, restart, and by session.
		b.try(who+" answers an interrupt", cred, http.MethodPost, post(demo.BankingAgentName, ""), map[string]any{"data": map[string]any{"resume": respondBody(bankReq)}, "init": map[string]any{"snapshotId": bank.SnapshotID}}, nf, headers...)
		b.try(who+" restarts a tool", cred, http.MethodPost, post(demo.BankingAgentName, ""), map[string]any{"data": map[string]any{"resume": restartBody}, "init": map[string]any{"snapshotId": overLimit.SnapshotID}}, nf, headers...)
		b.try(who+" gets the pending snapshot", cred, http.MethodPost, post("gateAgent", "getSnapshot"), map[string]any{"data": map[string]any{"snapshotId": pending.SnapshotID}}, nf, headers...)
		b.try(who+" gets an interrupted session", cred, http.MethodPost, post(demo.BankingAgentName, "getSnapshot"), map[string]any{"data": map[string]any{"sessionId": bank.SessionID}}, nf, headers...)
	}

	// Tenant rival, with every kind of credential, against acme.
	acmeTarget := target{chatSnap: chat.SnapshotID, chatSess: "acme-chat"}
	for who, cred := range map[string]string{"rival admin": rivalAdmin, "rival client": rivalClient, "rival user": rivalUser} {
		protocolAttacks(who, cred, acmeTarget)
	}
	for _, status := range append(inbox.InterruptStatuses, "") {
		r := b.try("rival admin lists "+status+" interrupts", rivalAdmin, http.MethodGet, "/api/v1/interrupts?limit=200&status="+status, nil, http.StatusOK)
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil || len(page.Items) != 0 {
			b.leak("rival's inbox (%s) holds %d items: %s", status, len(page.Items), r.body)
		}
	}
	for _, irq := range []string{bankIrq, restartIrq, approvedIrq} {
		b.try("rival admin gets an interrupt", rivalAdmin, http.MethodGet, "/api/v1/interrupts/"+irq, nil, http.StatusNotFound)
		b.try("rival admin reads its events", rivalAdmin, http.MethodGet, "/api/v1/interrupts/"+irq+"/events", nil, http.StatusNotFound)
		b.try("rival admin responds", rivalAdmin, http.MethodPost, "/api/v1/interrupts/"+irq+"/respond", map[string]any{"output": map[string]any{"approved": true}, "note": "mine now"}, http.StatusNotFound)
		b.try("rival admin restarts", rivalAdmin, http.MethodPost, "/api/v1/interrupts/"+irq+"/restart", map[string]any{"note": "again"}, http.StatusNotFound)
	}
	for _, groupBy := range []string{"agent", "tool", "day"} {
		r := b.try("rival admin reports by "+groupBy, rivalAdmin, http.MethodGet, "/api/v1/reports/interrupts?groupBy="+groupBy, nil, http.StatusOK)
		var report struct {
			Rows []json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(r.body, &report); err != nil || len(report.Rows) != 0 {
			b.leak("rival's report by %s has rows: %s", groupBy, r.body)
		}
	}
	// An unknown sessionId starts a new session under that id (protocol),
	// so a rival naming acme's session gets a session of its own: none of
	// acme's history, and acme's rows untouched.
	for _, tc := range []struct {
		who, cred, agent, session, resumeSession string
	}{
		{"rival admin", rivalAdmin, "chatAgent", "acme-chat", big.SessionID},
		{"rival user", rivalUser, demo.BankingAgentName, bank.SessionID, big.SessionID},
	} {
		r := b.try(tc.who+" starts a session under acme's session id", tc.cred, http.MethodPost, post(tc.agent, ""),
			map[string]any{"data": userMessage("hi"), "init": map[string]any{"sessionId": tc.session}}, http.StatusOK)
		var out service.AgentOutput
		resultOf(t, r, &out)
		var snap service.Snapshot
		resultOf(t, s.call(t, http.MethodPost, post(tc.agent, "getSnapshot"), tc.cred, map[string]any{"data": map[string]any{"snapshotId": out.SnapshotID}}), &snap)
		if snap.ParentID != "" || snap.State == nil || len(snap.State.Messages) != 2 {
			b.leak("%s's session under acme's id continues acme's: %+v", tc.who, snap)
		}
		r = b.try(tc.who+" resumes under acme's interrupted session id", tc.cred, http.MethodPost, post(demo.BankingAgentName, ""),
			map[string]any{"data": map[string]any{"resume": respondBody(bankReq)}, "init": map[string]any{"sessionId": tc.resumeSession}}, http.StatusOK)
		resultOf(t, r, &out)
		if out.FinishReason != service.FinishFailed {
			b.leak("%s resumed acme's interrupt through its session id: %s", tc.who, r.body)
		}
	}

	// User-x of acme, with a token or through acme's client key, against
	// user-y's session and against a session of no end user.
	yTarget := target{chatSnap: ySess.SnapshotID, chatSess: "y-chat"}
	protocolAttacks("user-x token", userX, yTarget)
	protocolAttacks("acme client for user-x", acmeClient, yTarget, "X-End-User", "user-x")
	protocolAttacks("user-x token on tenant rows", userX, acmeTarget)
	b.try("user-x takes user-y's session id", userX, http.MethodPost, post("chatAgent", ""), map[string]any{"data": userMessage("hi"), "init": map[string]any{"sessionId": "y-chat"}}, http.StatusNotFound)
	b.try("user-x token claims user-y", userX, http.MethodPost, post("chatAgent", "getSnapshot"), map[string]any{"data": map[string]any{"sessionId": "y-chat"}}, http.StatusForbidden, "X-End-User", "user-y")

	// Credentials that must not authenticate, and roles that must not
	// reach /api/v1.
	revoked, revokedID := s.key(t, "acme", tenants.RoleAdmin)
	if err := s.acc.RevokeKey(ctx, "acme", revokedID); err != nil {
		t.Fatal(err)
	}
	acmeSecret, err := s.acc.TokenSecret(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	rivalSecret, err := s.acc.TokenSecret(ctx, "rival")
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Now().Add(time.Hour)
	bad := map[string]string{
		"revoked key":               revoked,
		"unknown key":               "hp_" + strings.Repeat("x", 43),
		"token with a wrong secret": forge(t, jwt.SigningMethodHS256, rivalSecret, "acme", "user-y", hour),
		"token with alg none":       forge(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "acme", "user-y", hour),
		"token naming another tid":  forge(t, jwt.SigningMethodHS256, acmeSecret, "rival", "user-y", hour),
		"token signed HS512":        forge(t, jwt.SigningMethodHS512, acmeSecret, "acme", "user-y", hour),
		"expired token":             forge(t, jwt.SigningMethodHS256, acmeSecret, "acme", "user-y", time.Now().Add(-time.Minute)),
	}
	v1 := []struct{ method, path string }{
		{http.MethodGet, "/api/v1/interrupts"},
		{http.MethodGet, "/api/v1/interrupts/" + bankIrq},
		{http.MethodGet, "/api/v1/interrupts/" + bankIrq + "/events"},
		{http.MethodPost, "/api/v1/interrupts/" + bankIrq + "/respond"},
		{http.MethodPost, "/api/v1/interrupts/" + restartIrq + "/restart"},
		{http.MethodGet, "/api/v1/reports/interrupts"},
		{http.MethodGet, "/api/v1/events"},
		{http.MethodPost, "/api/v1/tokens"},
	}
	for who, cred := range bad {
		b.try(who+" gets user-y's snapshot", cred, http.MethodPost, post("chatAgent", "getSnapshot"), map[string]any{"data": map[string]any{"snapshotId": ySess.SnapshotID}}, http.StatusUnauthorized)
		b.try(who+" continues user-y's session", cred, http.MethodPost, post("chatAgent", ""), map[string]any{"data": userMessage("hi"), "init": map[string]any{"sessionId": "y-chat"}}, http.StatusUnauthorized)
		b.try(who+" answers an interrupt", cred, http.MethodPost, post(demo.BankingAgentName, ""), map[string]any{"data": map[string]any{"resume": respondBody(bankReq)}, "init": map[string]any{"snapshotId": bank.SnapshotID}}, http.StatusUnauthorized)
		for _, rt := range v1 {
			b.try(who+" on "+rt.path, cred, rt.method, rt.path, map[string]any{"output": map[string]any{"approved": true}}, http.StatusUnauthorized)
		}
	}
	for who, cred := range map[string]string{"acme client": acmeClient, "user-x token": userX, "user-y token": userY} {
		for _, rt := range v1 {
			var body any
			if rt.method == http.MethodPost {
				body = map[string]any{"output": map[string]any{"approved": true}, "userId": "user-y"}
			}
			b.try(who+" on "+rt.path, cred, rt.method, rt.path, body, http.StatusForbidden)
		}
	}

	if after := s.fingerprint(t, "acme"); after != before {
		b.leak("acme's rows changed under attack:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	for _, tr := range demo.Transfers()[transfersBefore:] {
		if tr.ToAccount == markerAccount {
			b.leak("an attack moved money: %+v", tr)
		}
	}
	// The pending turn is still acme's to abort.
	var res map[string]any
	resultOf(t, s.call(t, http.MethodPost, post("gateAgent", "abort"), acmeAdmin, map[string]any{"data": map[string]any{"snapshotId": pending.SnapshotID}}), &res)
	if res["status"] != service.StatusPending {
		b.leak("acme's pending snapshot is %v after the attacks, want pending", res["status"])
	}

	b.liveEvents(acmeAdmin, rivalAdmin)

	t.Logf("break-in: %d attempts, %d leaks", b.attempts, b.leaks)
	if b.attempts < 190 {
		t.Errorf("only %d attempts: some attack families did not run", b.attempts)
	}
}

// liveEvents subscribes acme and rival to the live event stream, makes
// acme pause on a new interrupt, and checks that acme hears of it and rival
// hears nothing.
func (b *breakIn) liveEvents(acmeAdmin, rivalAdmin string) {
	t := b.t
	t.Helper()
	subscribe := func(cred string) (<-chan string, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.s.srv.URL+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+cred)
		res, err := b.s.srv.Client().Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			cancel()
			t.Fatalf("subscribe: %v %v", err, res)
		}
		lines := make(chan string, 100)
		go func() {
			defer close(lines)
			defer res.Body.Close()
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		// Wait for the subscription to be in place.
		for line := range lines {
			if strings.HasPrefix(line, ": subscribed") {
				break
			}
		}
		return lines, cancel
	}
	acmeLines, stopAcme := subscribe(acmeAdmin)
	defer stopAcme()
	rivalLines, stopRival := subscribe(rivalAdmin)
	defer stopRival()

	out := b.s.send(t, acmeAdmin, demo.BankingAgentName, "Transfer $75 to account "+markerAccount, nil)
	irq := b.s.interruptOf(t, out.SnapshotID)
	b.secrets = append(b.secrets, irq, out.SnapshotID)
	deadline := time.After(2 * time.Minute) // generous: a loaded machine
	for heard := false; !heard; {
		select {
		case line := <-acmeLines:
			heard = strings.Contains(line, irq)
		case <-deadline:
			t.Fatalf("acme never heard of its interrupt %s", irq)
		}
	}
	// Rival has had as long as acme, and then some, to hear of it.
	b.attempts++
	quiet := time.After(time.Second)
	for {
		select {
		case line, ok := <-rivalLines:
			if !ok {
				return
			}
			// Rival hears of its own turns (the attacks ran some); any
			// event of another tenant, or naming acme's turn, is a leak.
			foreign := strings.HasPrefix(line, "data: ") && !strings.Contains(line, `"tenantId":"rival"`)
			if foreign || strings.Contains(line, irq) || strings.Contains(line, out.SnapshotID) {
				b.leak("rival's event stream got %q", line)
			}
			continue
		case <-quiet:
		}
		break
	}
}
