// Package auth holds who a call acts for (Caller), as the engine, the
// features built beside it (webhooks, retention) and the HTTP edge pass
// it, so none of them needs the engine to name it.
package auth

import (
	"slices"

	"github.com/holdpoint/holdpoint/service/store"
)

// Caller is who an invocation acts for: the tenant whose rows it may touch,
// the end user it acts on behalf of, and the actor recorded in audit rows.
type Caller struct {
	TenantID string
	EndUser  string
	Actor    string
	// KeyID and KeyName are the API key the caller authenticated with (a
	// dashboard session's key included); empty for others (user tokens,
	// the CLI, the system).
	KeyID, KeyName string
	// Scopes are the key's scopes (see approval.Policy.Scope).
	Scopes []string
}

// HasScope reports whether the caller may decide what needs scope ("":
// anything). A key holds the scopes it was given; "*" holds every scope.
func (c Caller) HasScope(scope string) bool {
	return scope == "" || slices.Contains(c.Scopes, scope) || slices.Contains(c.Scopes, "*")
}

// Voter is the person a caller's vote counts for: the end user it acts
// for, else its key (one person counts once per interrupt).
func (c Caller) Voter() string {
	if c.EndUser != "" {
		return "user:" + c.EndUser
	}
	if c.KeyID != "" {
		return "key:" + c.KeyID
	}
	return c.Actor
}

// Scope is the sessions the caller may see: exactly its own end user's
// (or the tenant's own, acting as no user).
func (c Caller) Scope() store.Scope {
	return store.Scope{TenantID: c.TenantID, EndUser: c.EndUser}
}
