package service

import (
	"context"

	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/statesig"
)

// signState returns the signature of st for the caller and agent, with the
// tenant's current state key (service/statesig says what it covers).
func (r *Runtime) signState(ctx context.Context, c Caller, agent string, st SessionState) (string, error) {
	key, err := r.keys.Signing(ctx, c.TenantID, keys.PurposeState)
	if err != nil {
		return "", err
	}
	return statesig.Sign(key.ID, key.Secret, statesig.Binding{TenantID: c.TenantID, EndUser: c.EndUser, Agent: agent}, st)
}

// verifyState reports whether st carries a valid signature of this server
// for the caller and agent. Only a failure to read the keys is an error.
func (r *Runtime) verifyState(ctx context.Context, c Caller, agent string, st SessionState) (bool, error) {
	id, ok := statesig.KeyID(st.Signature)
	if !ok {
		return false, nil
	}
	key, found, err := r.keys.Find(ctx, c.TenantID, keys.PurposeState, id)
	if err != nil || !found {
		return false, err
	}
	return statesig.Verify(st.Signature, key.Secret, statesig.Binding{TenantID: c.TenantID, EndUser: c.EndUser, Agent: agent}, st), nil
}
