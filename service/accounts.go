package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
)

// Key roles.
const (
	RoleClient = "client" // the protocol routes
	RoleAdmin  = "admin"  // also the inbox, decisions, reports and events
)

// KeyPrefix starts every API key, so a leaked key is recognizable.
const KeyPrefix = "hp_"

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
}

// Principal is who a valid API key authenticates.
type Principal struct {
	TenantID string
	KeyID    uuid.UUID
	Role     string
}

// Accounts manages tenants and API keys.
type Accounts struct {
	store *PgStore
	keys  *keyCache
}

// NewAccounts returns the account manager over pool (an application-role
// pool, see NewAppPool), with the default cache of key lookups.
func NewAccounts(pool *pgxpool.Pool) *Accounts {
	return NewAccountsWith(pool, KeyCacheConfig{})
}

var tenantIDRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// CreateTenant creates a tenant; an empty id gets a generated one.
func (a *Accounts) CreateTenant(ctx context.Context, id, name string) (*Tenant, error) {
	if id == "" {
		id = "t_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	if !tenantIDRE.MatchString(id) {
		return nil, Errorf(CodeInvalidArgument, "tenant id must be 1-128 letters, digits or _ . : -")
	}
	if name == "" || len(name) > 256 {
		return nil, Errorf(CodeInvalidArgument, "tenant name must be 1-256 bytes")
	}
	var row db.Tenant
	err := a.store.inSystemTx(ctx, func(q *db.Queries) error {
		var err error
		row, err = q.InsertTenant(ctx, db.InsertTenantParams{ID: id, Name: name})
		return translateConflict(err, "tenant %s already exists", id)
	})
	if err != nil {
		return nil, err
	}
	return &Tenant{ID: row.ID, Name: row.Name, CreatedAt: row.CreatedAt}, nil
}

// ListTenants lists every tenant.
func (a *Accounts) ListTenants(ctx context.Context) ([]Tenant, error) {
	var rows []db.Tenant
	err := a.store.inSystemTx(ctx, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenants(ctx)
		return translate(err)
	})
	out := make([]Tenant, len(rows))
	for i, r := range rows {
		out[i] = Tenant{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt}
	}
	return out, err
}

// CreateKey creates an API key for a tenant and returns it in clear, once:
// only its hash is stored.
func (a *Accounts) CreateKey(ctx context.Context, tenantID, role, name string) (string, *APIKey, error) {
	if role != RoleClient && role != RoleAdmin {
		return "", nil, Errorf(CodeInvalidArgument, "role must be client or admin")
	}
	if len(name) > 256 {
		return "", nil, Errorf(CodeInvalidArgument, "key name must be at most 256 bytes")
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", nil, err
	}
	plain := KeyPrefix + base64.RawURLEncoding.EncodeToString(secret)
	hash := sha256.Sum256([]byte(plain))
	key := &APIKey{ID: uuid.New(), TenantID: tenantID, Name: name, Role: role, Prefix: plain[:len(KeyPrefix)+6], CreatedAt: time.Now()}
	err := a.store.inTx(ctx, tenantID, func(q *db.Queries) error {
		if _, err := q.GetTenant(ctx, tenantID); err != nil {
			if errors.Is(translate(err), ErrNotFound) {
				return Errorf(CodeNotFound, "tenant %s not found", tenantID)
			}
			return translate(err)
		}
		return translate(q.InsertAPIKey(ctx, db.InsertAPIKeyParams{
			TenantID: tenantID, ID: key.ID, Name: name, Role: role, KeyHash: hash[:], KeyPrefix: key.Prefix,
		}))
	})
	if err != nil {
		return "", nil, err
	}
	return plain, key, nil
}

// ListKeys lists a tenant's keys (never the keys themselves).
func (a *Accounts) ListKeys(ctx context.Context, tenantID string) ([]APIKey, error) {
	var rows []db.ApiKey
	err := a.store.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListAPIKeys(ctx, tenantID)
		return translate(err)
	})
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = keyFromRow(r)
	}
	return out, err
}

func keyFromRow(r db.ApiKey) APIKey {
	return APIKey{ID: r.ID, TenantID: r.TenantID, Name: r.Name, Role: r.Role, Prefix: r.KeyPrefix,
		CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt, LastUsedAt: r.LastUsedAt}
}

// RevokeKey revokes a key; NOT_FOUND when the tenant has no such live key.
// This process refuses the key at once; others once their cached lookup
// of it expires (KeyCacheConfig.HitTTL).
func (a *Accounts) RevokeKey(ctx context.Context, tenantID string, id uuid.UUID) error {
	// Forgotten whatever the outcome: a key revoked by another process
	// answers NOT_FOUND here, and is still worth dropping.
	defer a.keys.forget(id)
	return a.store.inTx(ctx, tenantID, func(q *db.Queries) error {
		n, err := q.RevokeAPIKey(ctx, db.RevokeAPIKeyParams{TenantID: tenantID, ID: id})
		if err != nil {
			return translate(err)
		}
		if n == 0 {
			return Errorf(CodeNotFound, "key %s not found (or already revoked)", id)
		}
		return nil
	})
}

// errBadKey is the one answer to every key that does not authenticate, so
// a caller learns nothing about why.
var errBadKey = Errorf(CodeUnauthenticated, "invalid or revoked API key")

// Authenticate resolves an API key to its tenant and role. Answers are
// cached by the key's hash, bad keys included, so a key repeated within the
// TTLs of KeyCacheConfig costs no query.
func (a *Accounts) Authenticate(ctx context.Context, plain string) (*Principal, error) {
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
	var row db.ApiKey
	// The key decides the tenant, so its lookup cannot be tenant-scoped.
	err := a.store.inSystemTx(ctx, func(q *db.Queries) error {
		var err error
		if row, err = q.GetAPIKeyByHash(ctx, hash[:]); err != nil {
			return translate(err)
		}
		return translate(q.TouchAPIKey(ctx, db.TouchAPIKeyParams{TenantID: row.TenantID, ID: row.ID}))
	})
	if errors.Is(err, ErrNotFound) || (err == nil && row.RevokedAt != nil) {
		a.keys.put(hash, nil, revocations)
		return nil, errBadKey
	}
	if err != nil {
		return nil, err
	}
	p = &Principal{TenantID: row.TenantID, KeyID: row.ID, Role: row.Role}
	a.keys.put(hash, p, revocations)
	return p, nil
}

// TokenSecret returns the secret a tenant's end-user tokens are signed
// with now (NOT_FOUND for an unknown tenant).
func (a *Accounts) TokenSecret(ctx context.Context, tenantID string) ([]byte, error) {
	keys, err := a.store.SigningKeys(ctx, tenantID, PurposeToken)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, Errorf(CodeNotFound, "tenant %s not found", tenantID)
	}
	return keys[0].Secret, nil
}

// MaxSecretGrace bounds how long a rotated key keeps verifying.
const MaxSecretGrace = 30 * 24 * time.Hour

// RotateSecret gives a tenant a new key of a purpose (token or state): it
// signs from now on, while the keys it replaces keep verifying for grace,
// so tokens and states handed out just before stay good until then (or
// until they expire). A zero grace retires them at once. It returns the
// new key's id.
func (a *Accounts) RotateSecret(ctx context.Context, tenantID, purpose string, grace time.Duration) (int, error) {
	if purpose != PurposeToken && purpose != PurposeState {
		return 0, Errorf(CodeInvalidArgument, "only the token and state keys rotate")
	}
	if grace < 0 || grace > MaxSecretGrace {
		return 0, Errorf(CodeInvalidArgument, "grace must be between 0 and %s", MaxSecretGrace)
	}
	var id int32
	err := a.store.inTx(ctx, tenantID, func(q *db.Queries) error {
		if _, err := q.GetTenant(ctx, tenantID); err != nil {
			if errors.Is(translate(err), ErrNotFound) {
				return Errorf(CodeNotFound, "tenant %s not found", tenantID)
			}
			return translate(err)
		}
		var err error
		id, err = q.RotateTenantSecret(ctx, db.RotateTenantSecretParams{
			TenantID: tenantID, Purpose: purpose, GraceSeconds: grace.Seconds(), Secret: newSecret(),
		})
		return translate(err)
	})
	return int(id), err
}
