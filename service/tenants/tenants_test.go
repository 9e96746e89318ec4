package tenants_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/tenants"
)

func TestAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgstore.NewAppPool(ctx, testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	acc := tenants.New(newStore(t, pool))
	tenant, err := acc.CreateTenant(ctx, "", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acc.CreateTenant(ctx, tenant.ID, "again"); !isStatus(err, store.CodeAlreadyExists) {
		t.Fatalf("duplicate tenant: %v", err)
	}
	plain, key, err := acc.CreateKey(ctx, tenant.ID, tenants.RoleAdmin, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(plain, tenants.KeyPrefix) || len(plain) < 40 {
		t.Fatalf("key %q", plain)
	}
	p, err := acc.Authenticate(ctx, plain)
	if err != nil || p.TenantID != tenant.ID || p.Role != tenants.RoleAdmin || p.KeyID != key.ID {
		t.Fatalf("authenticate: %v %+v", err, p)
	}
	if _, err := acc.Authenticate(ctx, plain+"x"); !isStatus(err, store.CodeUnauthenticated) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, _, err := acc.CreateKey(ctx, "nope", tenants.RoleClient, ""); !isStatus(err, store.CodeNotFound) {
		t.Fatalf("key for unknown tenant: %v", err)
	}
	// Another tenant cannot revoke it.
	if err := acc.RevokeKey(ctx, "default", key.ID); !isStatus(err, store.CodeNotFound) {
		t.Fatalf("revoke from another tenant: %v", err)
	}
	if err := acc.RevokeKey(ctx, tenant.ID, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Authenticate(ctx, plain); !isStatus(err, store.CodeUnauthenticated) {
		t.Fatalf("revoked key: %v", err)
	}
	secret, err := acc.TokenSecret(ctx, tenant.ID)
	if err != nil || len(secret) != 32 {
		t.Fatalf("token secret: %v %d bytes", err, len(secret))
	}
}

// newStore returns a store over pool, closed (its notifier stopped) when
// the test ends.
func newStore(t testing.TB, pool *pgxpool.Pool) *pgstore.PgStore {
	s := pgstore.New(pool)
	t.Cleanup(s.Close)
	return s
}

func isStatus(err error, status string) bool {
	var e *store.Error
	return errors.As(err, &e) && e.Status == status
}

// TestKeyScopes checks a key's scopes: checked (each spelled as
// ValidateScope wants, or "*"; at most MaxKeyScopes; an error names the
// scope at fault and stores nothing), deduplicated, listed, and carried by
// what the key authenticates as and by its dashboard sessions, with one
// actor for both (a session signed in under the old format included).
func TestKeyScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	pool, err := pgstore.NewAppPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	acc := tenants.New(newStore(t, pool))
	if _, err := acc.CreateTenant(ctx, "acme", "Acme"); err != nil {
		t.Fatal(err)
	}
	plain, key, err := acc.CreateKey(ctx, "acme", tenants.RoleAdmin, "ops", "approve:payments", "x", "approve:payments")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"approve:payments", "x"}
	if !reflect.DeepEqual(key.Scopes, want) {
		t.Fatalf("created with scopes %v, want %v", key.Scopes, want)
	}
	_, bare, err := acc.CreateKey(ctx, "acme", tenants.RoleClient, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := acc.CreateKey(ctx, "acme", tenants.RoleAdmin, "root", "*"); err != nil {
		t.Fatalf("the scope * is refused: %v", err)
	}
	many := make([]string, tenants.MaxKeyScopes+1)
	for i := range many {
		many[i] = fmt.Sprint("s", i)
	}
	for _, bad := range [][]string{{"ok", "has space"}, {""}, {"**"}, {strings.Repeat("a", 65)}, {"é"}, many} {
		_, _, err := acc.CreateKey(ctx, "acme", tenants.RoleAdmin, "bad", bad...)
		if !isStatus(err, store.CodeInvalidArgument) {
			t.Errorf("scopes %q: %v, want INVALID_ARGUMENT", bad, err)
			continue
		}
		if len(bad) == 1 || bad[0] == "ok" {
			if culprit := bad[len(bad)-1]; !strings.Contains(err.Error(), strconv.Quote(culprit)) {
				t.Errorf("scopes %q: %v does not name %q", bad, err, culprit)
			}
		}
	}
	keys, err := acc.ListKeys(ctx, "acme")
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys %+v (%v), want 3 (none of the refused ones)", keys, err)
	}
	listed := map[uuid.UUID][]string{}
	for _, k := range keys {
		listed[k.ID] = k.Scopes
	}
	if !reflect.DeepEqual(listed[key.ID], want) || listed[bare.ID] == nil || len(listed[bare.ID]) != 0 {
		t.Fatalf("listed scopes %v", listed)
	}
	if raw, _ := json.Marshal(keys[1]); !strings.Contains(string(raw), `"scopes":[]`) {
		t.Errorf("a key without scopes is %s, want \"scopes\":[]", raw)
	}

	actor := "key:ops/" + key.ID.String()
	// Twice: the second answer comes from the key cache.
	for range 2 {
		p, err := acc.Authenticate(ctx, plain)
		if err != nil || p.KeyName != "ops" || !reflect.DeepEqual(p.Scopes, want) || p.Actor() != actor {
			t.Fatalf("authenticated as %+v (%v)", p, err)
		}
		p.Scopes[0] = "*" // a caller's copy
	}
	s, token, err := acc.SignInUI(ctx, plain)
	if err != nil || s.Actor != actor || s.KeyName != "ops" || !reflect.DeepEqual(s.Scopes, want) {
		t.Fatalf("signed in as %+v (%v), want actor %s", s, err, actor)
	}
	got, err := acc.UISession(ctx, token)
	if err != nil || got.Actor != actor || got.KeyName != "ops" || !reflect.DeepEqual(got.Scopes, want) || got.KeyID != key.ID {
		t.Fatalf("session %+v (%v), want actor %s and scopes %v", got, err, actor, want)
	}
	// A session stored with the old actor (the key's name alone) resolves
	// to the one format.
	owner := testdb.OwnerPool(t, url)
	if _, err := owner.Exec(ctx, "UPDATE ui_sessions SET actor = 'key:ops' WHERE key_id = $1", key.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := acc.UISession(ctx, token); err != nil || got.Actor != actor {
		t.Fatalf("old session %+v (%v), want actor %s", got, err, actor)
	}
	if err := acc.RevokeKey(ctx, "acme", key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.UISession(ctx, token); !isStatus(err, store.CodeUnauthenticated) {
		t.Fatalf("session of a revoked key: %v", err)
	}
}
