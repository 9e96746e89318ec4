package statesig_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/statesig"
)

// TestSignAndVerify checks that a signature verifies for its key, binding
// and state only, survives a client's JSON round trip, and that malformed
// signatures name no key.
func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	b := statesig.Binding{TenantID: "acme", EndUser: "alice", Agent: "wallet"}
	var st protocol.SessionState
	if err := json.Unmarshal([]byte(`{"messages":[{"role":"user","content":[{"text":"pay Zo\u00eb 5.0"}]}],"custom":{"n":1.50}}`), &st); err != nil {
		t.Fatal(err)
	}
	sig, err := statesig.Sign(7, secret, b, st)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sig, "hp1.7.") {
		t.Fatalf("signature %q", sig)
	}
	if id, ok := statesig.KeyID(sig); !ok || id != 7 {
		t.Fatalf("KeyID = %d, %v", id, ok)
	}
	st.Signature = sig
	if !statesig.Verify(sig, secret, b, st) {
		t.Fatal("the signature does not verify")
	}

	// A client re-encodes the state: other key order and number forms.
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	raw, _ = json.Marshal(generic)
	var back protocol.SessionState
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !statesig.Verify(sig, secret, b, back) {
		t.Fatal("the signature does not survive a JSON round trip")
	}

	other := st
	other.Custom = json.RawMessage(`{"n":2}`)
	for what, ok := range map[string]bool{
		"another tenant":   statesig.Verify(sig, secret, statesig.Binding{TenantID: "other", EndUser: "alice", Agent: "wallet"}, st),
		"another end user": statesig.Verify(sig, secret, statesig.Binding{TenantID: "acme", EndUser: "bob", Agent: "wallet"}, st),
		"another agent":    statesig.Verify(sig, secret, statesig.Binding{TenantID: "acme", EndUser: "alice", Agent: "purse"}, st),
		"another key":      statesig.Verify(sig, []byte("another secret of thirty-two b."), b, st),
		"an altered state": statesig.Verify(sig, secret, b, other),
	} {
		if ok {
			t.Errorf("%s: the signature verifies", what)
		}
	}
	for _, bad := range []string{"", "hp1", "hp2.7." + sig[6:], "hp1.x." + sig[6:], "hp1.0." + sig[6:], "hp1.7.!!", "hp1.7.YWJj"} {
		if _, ok := statesig.KeyID(bad); ok {
			t.Errorf("KeyID(%q) names a key", bad)
		}
		if statesig.Verify(bad, secret, b, st) {
			t.Errorf("Verify(%q) holds", bad)
		}
	}
}
