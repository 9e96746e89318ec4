// Package statesig signs the state a client-managed agent hands its client,
// so that a client cannot make the history it sends back claim that the
// model asked for a tool: only tool requests of a state whose signature
// verifies can be answered or restarted. The signature travels inside the
// state (state.signature), which the Genkit client round-trips unchanged.
//
// A signature is "hp1.<key id>.<mac>": an HMAC-SHA256, with one of the
// tenant's state keys (service/keys), over the RFC 8785 (JCS) canonical
// form of the state without its signature, bound to the tenant, the end
// user and the agent. JCS makes it survive a JSON parse and re-encode by
// the client (key order, number forms, string escapes); a number a
// JavaScript client cannot hold exactly (an integer beyond 2^53) changes in
// that round trip and voids the signature.
//
// It is part of the foundation: it imports service/protocol and the
// standard library's crypto only. The engine finds the keys and calls Sign
// and Verify.
package statesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/holdpoint/holdpoint/service/protocol"
)

const prefix = "hp1"

// Binding is what a signature binds a state to besides the key.
type Binding struct {
	TenantID, EndUser, Agent string
}

// Sign returns the signature of st with the key (id and secret).
func Sign(keyID int, secret []byte, b Binding, st protocol.SessionState) (string, error) {
	m, err := mac(secret, b, st)
	if err != nil {
		return "", err
	}
	return prefix + "." + strconv.Itoa(keyID) + "." + base64.RawURLEncoding.EncodeToString(m), nil
}

// KeyID returns the id of the key sig names; ok is false when sig is not a
// well-formed signature of this format (and so verifies for no key).
func KeyID(sig string) (id int, ok bool) {
	id, _, ok = parse(sig)
	return id, ok
}

// Verify reports whether sig is st's signature with the key secret, for b.
func Verify(sig string, secret []byte, b Binding, st protocol.SessionState) bool {
	_, got, ok := parse(sig)
	if !ok {
		return false
	}
	want, err := mac(secret, b, st)
	return err == nil && hmac.Equal(got, want)
}

func parse(sig string) (int, []byte, bool) {
	p, rest, ok := strings.Cut(sig, ".")
	if !ok || p != prefix {
		return 0, nil, false
	}
	idText, macText, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, nil, false
	}
	id, err := strconv.Atoi(idText)
	if err != nil || id <= 0 {
		return 0, nil, false
	}
	got, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil || len(got) != sha256.Size {
		return 0, nil, false
	}
	return id, got, true
}

// signedForm is SessionState without its MarshalJSON.
type signedForm protocol.SessionState

// mac is the HMAC of the canonical state for b.
func mac(secret []byte, b Binding, st protocol.SessionState) ([]byte, error) {
	st.Signature = ""
	// The MAC covers the form with empty lists left out, as states were
	// signed before the wire form always carried them: a state signed then
	// still verifies, and [] and an absent list sign alike.
	raw, err := json.Marshal(signedForm(st))
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	v := jsontext.Value(raw)
	if err := v.Canonicalize(); err != nil {
		return nil, fmt.Errorf("canonicalize state: %w", err)
	}
	m := hmac.New(sha256.New, secret)
	for _, s := range []string{"holdpoint state v1", b.TenantID, b.EndUser, b.Agent} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	m.Write(v)
	return m.Sum(nil), nil
}
