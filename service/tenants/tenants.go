// Package tenants manages the tenants and their credentials: the tenants
// themselves, their API keys (cached by hash, keycache.go), their secrets'
// rotation, the end-user tokens they mint (tokens.go) and the dashboard's
// sessions. It authenticates a request into an auth.Caller; the engine
// never imports it.
package tenants

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/store"
)

// Key roles.
const (
	RoleClient = "client" // the protocol routes
	RoleAdmin  = "admin"  // also the inbox, decisions, reports and events
)

// KeyPrefix starts every API key, so a leaked key is recognizable.
const KeyPrefix = "hp_"

// Principal is who a valid API key authenticates.
type Principal struct {
	TenantID string
	KeyID    uuid.UUID
	KeyName  string
	Role     string
	Scopes   []string
}

// Actor is how the key is recorded on what it does (store.ActorOfKey).
func (p *Principal) Actor() string {
	return store.ActorOfKey(p.KeyID.String(), p.KeyName)
}

// Tenants manages tenants, API keys and end-user tokens.
type Tenants struct {
	store store.TenantStore
	keys  *keyCache
	// now stamps the tokens minted (nil: time.Now); a test sets it to
	// mint in a later second without waiting for one.
	now func() time.Time
}

// New returns the tenant manager over store, with the default
// cache of key lookups.
func New(st store.TenantStore) *Tenants {
	return NewWith(st, KeyCacheConfig{})
}

var tenantIDRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// CreateTenant creates a tenant; an empty id gets a generated one.
func (a *Tenants) CreateTenant(ctx context.Context, id, name string) (*store.Tenant, error) {
	if id == "" {
		id = "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	if !tenantIDRE.MatchString(id) {
		return nil, store.Errorf(store.CodeInvalidArgument, "tenant id must be 1-128 letters, digits or _ . : -")
	}
	if name == "" || len(name) > 256 {
		return nil, store.Errorf(store.CodeInvalidArgument, "tenant name must be 1-256 bytes")
	}
	return a.store.CreateTenant(ctx, id, name)
}

// ListTenants lists every tenant.
func (a *Tenants) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	return a.store.ListTenants(ctx)
}

// MaxKeyScopes bounds the scopes of one API key.
const MaxKeyScopes = 20

// ScopeAll is the scope that holds every scope.
const ScopeAll = "*"

// CreateKey creates an API key for a tenant, with scopes (see
// NormalizeScopes), and returns it in clear, once: only its hash is stored.
func (a *Tenants) CreateKey(ctx context.Context, tenantID, role, name string, scopes ...string) (string, *store.APIKey, error) {
	if role != RoleClient && role != RoleAdmin {
		return "", nil, store.Errorf(store.CodeInvalidArgument, "role must be client or admin")
	}
	if len(name) > 256 {
		return "", nil, store.Errorf(store.CodeInvalidArgument, "key name must be at most 256 bytes")
	}
	scopes, err := NormalizeScopes(scopes)
	if err != nil {
		return "", nil, err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", nil, err
	}
	plain := KeyPrefix + base64.RawURLEncoding.EncodeToString(secret)
	hash := sha256.Sum256([]byte(plain))
	key := &store.APIKey{ID: uuid.New(), TenantID: tenantID, Name: name, Role: role, Prefix: plain[:len(KeyPrefix)+6],
		CreatedAt: time.Now(), Scopes: scopes}
	if err := a.store.CreateAPIKey(ctx, key, hash[:]); err != nil {
		return "", nil, err
	}
	return plain, key, nil
}

// NormalizeScopes checks a key's scopes (each spelled as ValidateScope
// wants, or "*" for all of them; at most MaxKeyScopes) and drops repeats,
// keeping the first of each. INVALID_ARGUMENT names the scope at fault.
func NormalizeScopes(scopes []string) ([]string, error) {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if s != ScopeAll {
			if err := auth.ValidateScope(s, false); err != nil {
				return nil, store.Errorf(store.CodeInvalidArgument, "%s (or %q: every scope)", err.Error(), ScopeAll)
			}
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) > MaxKeyScopes {
		return nil, store.Errorf(store.CodeInvalidArgument, "a key has at most %d scopes, not %d", MaxKeyScopes, len(out))
	}
	return out, nil
}

// ListKeys lists a tenant's keys (never the keys themselves).
func (a *Tenants) ListKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	return a.store.ListAPIKeys(ctx, tenantID)
}

// RevokeKey revokes a key; NOT_FOUND when the tenant has no such live key.
// This process refuses the key at once; others once their cached lookup
// of it expires (KeyCacheConfig.HitTTL).
func (a *Tenants) RevokeKey(ctx context.Context, tenantID string, id uuid.UUID) error {
	// Forgotten whatever the outcome: a key revoked by another process
	// answers NOT_FOUND here, and is still worth dropping.
	defer a.keys.forget(id)
	revoked, err := a.store.RevokeAPIKey(ctx, tenantID, id)
	if err != nil {
		return err
	}
	if !revoked {
		return store.Errorf(store.CodeNotFound, "key %s not found (or already revoked)", id)
	}
	return nil
}

// errBadKey is the one answer to every key that does not authenticate, so
// a caller learns nothing about why.
var errBadKey = store.Errorf(store.CodeUnauthenticated, "invalid or revoked API key")

// Authenticate resolves an API key to its tenant and role. Answers are
// cached by the key's hash, bad keys included, so a key repeated within the
// TTLs of KeyCacheConfig costs no query.
func (a *Tenants) Authenticate(ctx context.Context, plain string) (*Principal, error) {
	if !strings.HasPrefix(plain, KeyPrefix) || len(plain) > 128 {
		return nil, errBadKey
	}
	hash := sha256.Sum256([]byte(plain))
	p, found, revocations := a.keys.get(hash)
	if found {
		if p == nil {
			return nil, errBadKey
		}
		return p, nil
	}
	// The key decides the tenant, so its lookup cannot be tenant-scoped.
	key, err := a.store.APIKeyByHash(ctx, hash[:])
	if errors.Is(err, store.ErrNotFound) || (err == nil && key.RevokedAt != nil) {
		a.keys.put(hash, nil, revocations)
		return nil, errBadKey
	}
	if err != nil {
		return nil, err
	}
	p = &Principal{TenantID: key.TenantID, KeyID: key.ID, KeyName: key.Name, Role: key.Role, Scopes: key.Scopes}
	a.keys.put(hash, p, revocations)
	return p, nil
}

// TokenSecret returns the secret a tenant's end-user tokens are signed
// with now (NOT_FOUND for an unknown tenant).
func (a *Tenants) TokenSecret(ctx context.Context, tenantID string) ([]byte, error) {
	keys, err := a.store.SigningKeys(ctx, tenantID, keys.PurposeToken)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, store.Errorf(store.CodeNotFound, "tenant %s not found", tenantID)
	}
	return keys[0].Secret, nil
}

// MaxSecretGrace bounds how long a rotated key keeps verifying.
const MaxSecretGrace = 30 * 24 * time.Hour

// RotateSecret gives a tenant a new key of a purpose (token or state): it
// signs from now on, while the keys it replaces keep verifying for grace,
// so tokens and states handed out just before stay good until then (or
// until they expire). A zero grace retires them at once. At most three
// keys of a purpose verify (migration 00033): a rotation past that ends
// the oldest one's grace at once. It returns the new key's id.
func (a *Tenants) RotateSecret(ctx context.Context, tenantID, purpose string, grace time.Duration) (int, error) {
	if purpose != keys.PurposeToken && purpose != keys.PurposeState && purpose != keys.PurposeTool {
		return 0, store.Errorf(store.CodeInvalidArgument, "only the token, state and tool keys rotate")
	}
	if grace < 0 || grace > MaxSecretGrace {
		return 0, store.Errorf(store.CodeInvalidArgument, "grace must be between 0 and %s", MaxSecretGrace)
	}
	return a.store.RotateSecret(ctx, store.RotateSecretParams{TenantID: tenantID, Purpose: purpose, Grace: grace, Secret: keys.NewSecret()})
}

// UISessionTTL is how long a dashboard session lasts.
const UISessionTTL = 12 * time.Hour

// SignInUI exchanges an admin API key for a dashboard session: it returns
// the session and the token to keep in the cookie (shown only here). A
// client key, a user token or a bad key is UNAUTHENTICATED or
// PERMISSION_DENIED.
func (a *Tenants) SignInUI(ctx context.Context, plain string) (*store.UISession, string, error) {
	p, err := a.Authenticate(ctx, plain)
	if err != nil {
		return nil, "", err
	}
	if p.Role != RoleAdmin {
		return nil, "", store.Errorf(store.CodePermissionDenied, "only an admin key signs in to the dashboard")
	}
	token, csrf := randomToken(), randomToken()
	s := &store.UISession{TenantID: p.TenantID, KeyID: p.KeyID, KeyName: p.KeyName, Scopes: p.Scopes, Actor: p.Actor(),
		CSRF: csrf, ExpiresAt: time.Now().Add(UISessionTTL)}
	hash := sha256.Sum256([]byte(token))
	if err := a.store.CreateUISession(ctx, s, hash[:]); err != nil {
		return nil, "", err
	}
	return s, token, nil
}

// UISession returns the live session of a cookie token (UNAUTHENTICATED
// when there is none).
func (a *Tenants) UISession(ctx context.Context, token string) (*store.UISession, error) {
	if len(token) == 0 || len(token) > 128 {
		return nil, errBadKey
	}
	hash := sha256.Sum256([]byte(token))
	s, err := a.store.UISessionByHash(ctx, hash[:])
	if errors.Is(err, store.ErrNotFound) {
		return nil, errBadKey
	}
	return s, err
}

// SignOutUI ends the session of a cookie token.
func (a *Tenants) SignOutUI(ctx context.Context, s *store.UISession, token string) error {
	hash := sha256.Sum256([]byte(token))
	return a.store.RevokeUISession(ctx, s.TenantID, hash[:])
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
