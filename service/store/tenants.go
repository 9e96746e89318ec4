package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Tenant is a customer of the platform.
type Tenant struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// APIKey describes a key; the key itself is shown once at creation.
type APIKey struct {
	ID         uuid.UUID  `json:"id"`
	TenantID   string     `json:"tenantId"`
	Name       string     `json:"name,omitempty"`
	Role       string     `json:"role"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"createdAt"`
	RevokedAt  *time.Time `json:"revokedAt,omitempty"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	// Scopes are what the key may decide beyond any operator (see
	// approval.Policy.Scope); "*" is every scope. Never null.
	Scopes []string `json:"scopes"`
}

// TenantStore is the persistence of tenants, their API keys, keys and
// end-user token revocations. Tenant-scoped methods are scoped in the SQL
// itself; the tenant list and the key lookup by hash span tenants.
type TenantStore interface {
	// CreateTenant stores a tenant with its first keys (ALREADY_EXISTS
	// when the id is taken).
	CreateTenant(ctx context.Context, id, name string) (*Tenant, error)
	// ListTenants lists every tenant.
	ListTenants(ctx context.Context) ([]Tenant, error)
	// CreateAPIKey stores a key, its scopes included, by the hash of its
	// secret (NOT_FOUND for an unknown tenant).
	CreateAPIKey(ctx context.Context, key *APIKey, hash []byte) error
	// ListAPIKeys lists a tenant's keys.
	ListAPIKeys(ctx context.Context, tenantID string) ([]APIKey, error)
	// RevokeAPIKey revokes a live key; false when the tenant has none
	// with that id.
	RevokeAPIKey(ctx context.Context, tenantID string, id uuid.UUID) (bool, error)
	// APIKeyByHash returns the key whose secret has that hash, revoked or
	// not, and stamps its use (ErrNotFound when none).
	APIKeyByHash(ctx context.Context, hash []byte) (*APIKey, error)
	// CreateUISession stores a dashboard session by the hash of its token.
	CreateUISession(ctx context.Context, s *UISession, hash []byte) error
	// UISessionByHash returns the live session whose token has that hash,
	// its key not revoked (ErrNotFound when none), with the key's name and
	// scopes, and ActorOfKey for its actor.
	UISessionByHash(ctx context.Context, hash []byte) (*UISession, error)
	// RevokeUISession ends a session.
	RevokeUISession(ctx context.Context, tenantID string, hash []byte) error
	// SigningKeys returns a tenant's keys of a purpose that still verify,
	// newest first.
	SigningKeys(ctx context.Context, tenantID, purpose string) ([]SigningKey, error)
	// RotateSecret makes p.Secret the tenant's next key of p.Purpose and
	// lets the current ones verify for p.Grace; it returns the new key's
	// id (NOT_FOUND for an unknown tenant).
	RotateSecret(ctx context.Context, p RotateSecretParams) (int, error)
	// TokenVerification returns what verifying one end-user token needs:
	// the token keys and the revocations that apply to it.
	TokenVerification(ctx context.Context, tenantID, tokenID, endUser string) (*TokenVerification, error)
	// RevokeUserToken refuses one token (by id) until expiresAt, when it
	// would have expired anyway.
	RevokeUserToken(ctx context.Context, tenantID, tokenID string, expiresAt time.Time) error
	// RevokeEndUserTokens refuses every token of an end user issued so far.
	RevokeEndUserTokens(ctx context.Context, tenantID, endUser string) error
}

// RotateSecretParams are the arguments of TenantStore.RotateSecret.
type RotateSecretParams struct {
	TenantID string
	Purpose  string
	Grace    time.Duration
	Secret   []byte
}

// TokenVerification is what verifying an end-user token needs.
type TokenVerification struct {
	// Keys are the tenant's token keys that still verify, newest first.
	Keys []SigningKey
	// Revoked says this token (by id) was revoked.
	Revoked bool
	// NotBefore: the user's tokens issued before it were all revoked.
	NotBefore time.Time
}

// UISession is an operator's dashboard session: an admin key exchanged
// for an opaque token kept in a cookie.
type UISession struct {
	TenantID string
	KeyID    uuid.UUID
	// KeyName and Scopes are the key's, read with the session.
	KeyName   string
	Scopes    []string
	Actor     string // recorded on the decisions made in it: ActorOfKey
	CSRF      string // the token state-changing requests must echo
	ExpiresAt time.Time
}
