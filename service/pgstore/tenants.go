package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/store"
)

// SigningKeys implements Store.
func (s *PgStore) SigningKeys(ctx context.Context, tenantID, purpose string) ([]store.SigningKey, error) {
	var rows []db.ListTenantSecretsRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenantSecrets(ctx, db.ListTenantSecretsParams{TenantID: tenantID, Purpose: purpose})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.SigningKey, len(rows))
	for i, r := range rows {
		out[i] = store.SigningKey{ID: int(r.KeyID), Secret: r.Secret, ExpiresAt: r.ExpiresAt}
	}
	return out, nil
}

// CreateTenant implements store.TenantStore. The tenant's first keys
// come with it (trigger tenants_create_secrets).
func (s *PgStore) CreateTenant(ctx context.Context, id, name string) (*store.Tenant, error) {
	var row db.Tenant
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		row, err = q.InsertTenant(ctx, db.InsertTenantParams{ID: id, Name: name})
		return translateConflict(err, "tenant %s already exists", id)
	})
	if err != nil {
		return nil, err
	}
	return &store.Tenant{ID: row.ID, Name: row.Name, CreatedAt: row.CreatedAt}, nil
}

// ListTenants implements store.TenantStore (a system function).
func (s *PgStore) ListTenants(ctx context.Context) ([]store.Tenant, error) {
	var rows []db.Tenant
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		rows, err = q.ListTenants(ctx)
		return err
	})
	out := make([]store.Tenant, len(rows))
	for i, r := range rows {
		out[i] = store.Tenant{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt}
	}
	return out, err
}

// errTenantNotFound is the answer for a tenant-scoped write to a tenant
// that does not exist.
func errTenantNotFound(tenantID string) error {
	return store.Errorf(store.CodeNotFound, "tenant %s not found", tenantID)
}

// requireTenant fails with NOT_FOUND when the transaction's tenant does
// not exist.
func requireTenant(ctx context.Context, q *db.Queries, tenantID string) error {
	if _, err := q.GetTenant(ctx, tenantID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return errTenantNotFound(tenantID)
		}
		return err
	}
	return nil
}

// CreateAPIKey implements store.TenantStore.
func (s *PgStore) CreateAPIKey(ctx context.Context, key *store.APIKey, hash []byte) error {
	return s.inTx(ctx, key.TenantID, func(q *db.Queries) error {
		if err := requireTenant(ctx, q, key.TenantID); err != nil {
			return err
		}
		return q.InsertAPIKey(ctx, db.InsertAPIKeyParams{
			TenantID: key.TenantID, ID: key.ID, Name: key.Name, Role: key.Role, KeyHash: hash, KeyPrefix: key.Prefix,
			Scopes: nonNil(key.Scopes),
		})
	})
}

// ListAPIKeys implements store.TenantStore.
func (s *PgStore) ListAPIKeys(ctx context.Context, tenantID string) ([]store.APIKey, error) {
	var rows []db.APIKey
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		rows, err = q.ListAPIKeys(ctx, tenantID)
		return err
	})
	out := make([]store.APIKey, len(rows))
	for i, r := range rows {
		out[i] = keyFromRow(r)
	}
	return out, err
}

func keyFromRow(r db.APIKey) store.APIKey {
	return store.APIKey{ID: r.ID, TenantID: r.TenantID, Name: r.Name, Role: r.Role, Prefix: r.KeyPrefix,
		CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt, LastUsedAt: r.LastUsedAt, Scopes: nonNil(r.Scopes)}
}

// nonNil is scopes, or an empty list for none (the column is NOT NULL, and
// the JSON of a key shows [] rather than null).
func nonNil(scopes []string) []string {
	if scopes == nil {
		return []string{}
	}
	return scopes
}

// RevokeAPIKey implements store.TenantStore (in a transaction: the
// answer is the row count).
func (s *PgStore) RevokeAPIKey(ctx context.Context, tenantID string, id uuid.UUID) (bool, error) {
	var n int64
	err := s.inTx(ctx, tenantID, func(q *db.Queries) error {
		var err error
		n, err = q.RevokeAPIKey(ctx, db.RevokeAPIKeyParams{TenantID: tenantID, ID: id})
		return err
	})
	return n > 0, err
}

// APIKeyByHash implements store.TenantStore. The key decides the
// tenant, so its lookup is a system function (it also stamps the key's
// use).
func (s *PgStore) APIKeyByHash(ctx context.Context, hash []byte) (*store.APIKey, error) {
	var row db.APIKey
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		row, err = q.GetAPIKeyByHash(ctx, hash)
		return err
	})
	if err != nil {
		return nil, err
	}
	key := keyFromRow(row)
	return &key, nil
}

// RotateSecret implements store.TenantStore.
func (s *PgStore) RotateSecret(ctx context.Context, p store.RotateSecretParams) (int, error) {
	var id int32
	err := s.inTx(ctx, p.TenantID, func(q *db.Queries) error {
		if err := requireTenant(ctx, q, p.TenantID); err != nil {
			return err
		}
		var err error
		id, err = q.RotateTenantSecret(ctx, db.RotateTenantSecretParams{
			TenantID: p.TenantID, Purpose: p.Purpose, GraceSeconds: p.Grace.Seconds(), Secret: p.Secret,
		})
		return err
	})
	return int(id), err
}

// TokenVerification implements store.TenantStore, in one round trip.
func (s *PgStore) TokenVerification(ctx context.Context, tenantID, tokenID, endUser string) (*store.TokenVerification, error) {
	var row db.GetTokenVerificationRow
	err := s.piped(ctx, tenantID, func(q *db.Queries) error {
		var err error
		row, err = q.GetTokenVerification(ctx, db.GetTokenVerificationParams{TenantID: tenantID, TokenID: tokenID, EndUser: endUser})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := &store.TokenVerification{Revoked: row.TokenRevoked, NotBefore: row.NotBefore}
	for i, id := range row.KeyIDs {
		out.Keys = append(out.Keys, store.SigningKey{ID: int(id), Secret: row.Secrets[i]})
	}
	return out, nil
}

// RevokeUserToken implements store.TenantStore.
func (s *PgStore) RevokeUserToken(ctx context.Context, tenantID, tokenID string, expiresAt time.Time) error {
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		return q.RevokeUserToken(ctx, db.RevokeUserTokenParams{TenantID: tenantID, TokenID: tokenID, ExpiresAt: expiresAt})
	})
}

// RevokeEndUserTokens implements store.TenantStore.
func (s *PgStore) RevokeEndUserTokens(ctx context.Context, tenantID, endUser string) error {
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		return q.RevokeEndUserTokens(ctx, db.RevokeEndUserTokensParams{TenantID: tenantID, EndUser: endUser})
	})
}

// CreateUISession implements store.TenantStore.
func (s *PgStore) CreateUISession(ctx context.Context, u *store.UISession, hash []byte) error {
	return s.piped(ctx, u.TenantID, func(q *db.Queries) error {
		return q.InsertUISession(ctx, db.InsertUISessionParams{TokenHash: hash, TenantID: u.TenantID, KeyID: u.KeyID,
			Actor: u.Actor, Csrf: u.CSRF, ExpiresAt: u.ExpiresAt})
	})
}

// UISessionByHash implements store.TenantStore: a live session whose
// key is not revoked (a system function: the cookie decides the tenant),
// then, scoped to its tenant, the key's name and scopes. The actor is
// made from the key again rather than read from the row, so a session
// signed in before actors had one format records the same one as its key.
func (s *PgStore) UISessionByHash(ctx context.Context, hash []byte) (*store.UISession, error) {
	var row db.UiSession
	err := s.piped(ctx, "", func(q *db.Queries) error {
		var err error
		row, err = q.GetUISessionByHash(ctx, hash)
		return err
	})
	if err != nil {
		return nil, err
	}
	var key db.GetUISessionKeyRow
	err = s.piped(ctx, row.TenantID, func(q *db.Queries) error {
		var err error
		key, err = q.GetUISessionKey(ctx, db.GetUISessionKeyParams{TenantID: row.TenantID, ID: row.KeyID})
		return err
	})
	if err != nil {
		// Revoked between the two reads: no session, as for the first.
		return nil, err
	}
	return &store.UISession{TenantID: row.TenantID, KeyID: row.KeyID, KeyName: key.Name, Scopes: nonNil(key.Scopes),
		Actor: store.ActorOfKey(row.KeyID.String(), key.Name), CSRF: row.Csrf, ExpiresAt: row.ExpiresAt}, nil
}

// RevokeUISession implements store.TenantStore.
func (s *PgStore) RevokeUISession(ctx context.Context, tenantID string, hash []byte) error {
	return s.piped(ctx, tenantID, func(q *db.Queries) error {
		return q.RevokeUISession(ctx, db.RevokeUISessionParams{TenantID: tenantID, TokenHash: hash})
	})
}
