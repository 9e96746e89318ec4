package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/pgstore"
)

func TestAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgstore.NewAppPool(ctx, testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	acc := service.NewAccounts(newStore(t, pool))
	tenant, err := acc.CreateTenant(ctx, "", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acc.CreateTenant(ctx, tenant.ID, "again"); !isStatus(err, service.CodeAlreadyExists) {
		t.Fatalf("duplicate tenant: %v", err)
	}
	plain, key, err := acc.CreateKey(ctx, tenant.ID, service.RoleAdmin, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(plain, service.KeyPrefix) || len(plain) < 40 {
		t.Fatalf("key %q", plain)
	}
	p, err := acc.Authenticate(ctx, plain)
	if err != nil || p.TenantID != tenant.ID || p.Role != service.RoleAdmin || p.KeyID != key.ID {
		t.Fatalf("authenticate: %v %+v", err, p)
	}
	if _, err := acc.Authenticate(ctx, plain+"x"); !isStatus(err, service.CodeUnauthenticated) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, _, err := acc.CreateKey(ctx, "nope", service.RoleClient, ""); !isStatus(err, service.CodeNotFound) {
		t.Fatalf("key for unknown tenant: %v", err)
	}
	// Another tenant cannot revoke it.
	if err := acc.RevokeKey(ctx, "default", key.ID); !isStatus(err, service.CodeNotFound) {
		t.Fatalf("revoke from another tenant: %v", err)
	}
	if err := acc.RevokeKey(ctx, tenant.ID, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Authenticate(ctx, plain); !isStatus(err, service.CodeUnauthenticated) {
		t.Fatalf("revoked key: %v", err)
	}
	secret, err := acc.TokenSecret(ctx, tenant.ID)
	if err != nil || len(secret) != 32 {
		t.Fatalf("token secret: %v %d bytes", err, len(secret))
	}
}

func isStatus(err error, status string) bool {
	var e *service.Error
	return errors.As(err, &e) && e.Status == status
}
