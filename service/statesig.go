package service

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/holdpoint/holdpoint/service/keys"
)

// The state a client-managed agent returns is signed by the server, so
// that a client cannot make the history it sends back claim that the model
// asked for a tool: only tool requests of a state whose signature verifies
// can be answered or restarted. The signature travels inside the state
// (state.signature), which the Genkit client round-trips unchanged.
//
// It is an HMAC-SHA256, with the tenant's current state key, over the
// RFC 8785 (JCS) canonical form of the state without its signature,
// bound to the tenant, the end user and the agent. JCS makes it survive a
// JSON parse and re-encode by the client (key order, number forms, string
// escapes); a number a JavaScript client cannot hold exactly (an integer
// beyond 2^53) changes in that round trip and voids the signature.
const stateSigPrefix = "hp1"

// signState returns the signature of st for the caller and agent.
func (r *Runtime) signState(ctx context.Context, c Caller, agent string, st SessionState) (string, error) {
	key, err := r.keys.Signing(ctx, c.TenantID, keys.PurposeState)
	if err != nil {
		return "", err
	}
	mac, err := stateMAC(key.Secret, c, agent, st)
	if err != nil {
		return "", err
	}
	return stateSigPrefix + "." + strconv.Itoa(key.ID) + "." + base64.RawURLEncoding.EncodeToString(mac), nil
}

// verifyState reports whether st carries a valid signature of this server
// for the caller and agent. Only a failure to read the keys is an error.
func (r *Runtime) verifyState(ctx context.Context, c Caller, agent string, st SessionState) (bool, error) {
	prefix, rest, ok := strings.Cut(st.Signature, ".")
	if !ok || prefix != stateSigPrefix {
		return false, nil
	}
	idText, macText, ok := strings.Cut(rest, ".")
	if !ok {
		return false, nil
	}
	id, err := strconv.Atoi(idText)
	if err != nil || id <= 0 {
		return false, nil
	}
	got, err := base64.RawURLEncoding.DecodeString(macText)
	if err != nil || len(got) != sha256.Size {
		return false, nil
	}
	key, found, err := r.keys.Find(ctx, c.TenantID, keys.PurposeState, id)
	if err != nil || !found {
		return false, err
	}
	want, err := stateMAC(key.Secret, c, agent, st)
	if err != nil {
		return false, nil
	}
	return hmac.Equal(got, want), nil
}

// signedForm is SessionState without its MarshalJSON.
type signedForm SessionState

// stateMAC is the HMAC of the canonical state for the caller and agent.
func stateMAC(secret []byte, c Caller, agent string, st SessionState) ([]byte, error) {
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
	for _, s := range []string{"holdpoint state v1", c.TenantID, c.EndUser, agent} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	m.Write(v)
	return m.Sum(nil), nil
}
