package tenants_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// lookupCounter counts the key lookups a pool sends.
type lookupCounter struct{ n atomic.Int64 }

func (c *lookupCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "name: GetAPIKeyByHash ") {
		c.n.Add(1)
	}
	return ctx
}

func (c *lookupCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The store sends its statements in batches (pipelined).
func (c *lookupCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *lookupCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if strings.Contains(d.SQL, "name: GetAPIKeyByHash ") {
		c.n.Add(1)
	}
}

func (c *lookupCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countedPool is an application pool on a fresh database whose key lookups
// are counted.
func countedPool(t *testing.T) (*pgxpool.Pool, *lookupCounter) {
	t.Helper()
	counter := &lookupCounter{}
	pool, err := pgstore.NewAppPoolWith(context.Background(), testdb.URL(t), func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = counter
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, counter
}

func TestAuthenticateCachesLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, lookups := countedPool(t)
	// TTLs of an hour: within this test only a revocation ends an entry.
	acc := tenants.NewWith(newStore(t, pool), tenants.KeyCacheConfig{HitTTL: time.Hour, MissTTL: time.Hour})
	tenant, err := acc.CreateTenant(ctx, "", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	plain, key, err := acc.CreateKey(ctx, tenant.ID, tenants.RoleClient, "backend")
	if err != nil {
		t.Fatal(err)
	}

	bad := tenants.KeyPrefix + strings.Repeat("x", 43)
	for range 50 {
		if _, err := acc.Authenticate(ctx, bad); !errors.Is(err, tenants.ErrBadKey) {
			t.Fatalf("bad key: %v", err)
		}
	}
	if n := lookups.n.Load(); n != 1 {
		t.Errorf("50 requests with one bad key cost %d lookups, want 1", n)
	}
	for range 50 {
		if p, err := acc.Authenticate(ctx, plain); err != nil || p.KeyID != key.ID || p.TenantID != tenant.ID {
			t.Fatalf("good key: %+v %v", p, err)
		}
	}
	if n := lookups.n.Load(); n != 2 {
		t.Errorf("then 50 requests with a good key cost %d lookups, want 1", n-1)
	}
	keys, err := acc.ListKeys(ctx, tenant.ID)
	if err != nil || len(keys) != 1 || keys[0].LastUsedAt == nil {
		t.Fatalf("keys after use: %+v %v, want last use stamped", keys, err)
	}

	// Revoked through this process: refused at once, then a cached miss.
	if err := acc.RevokeKey(ctx, tenant.ID, key.ID); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := acc.Authenticate(ctx, plain); !errors.Is(err, tenants.ErrBadKey) {
			t.Fatalf("key revoked here: %v", err)
		}
	}
	if n := lookups.n.Load(); n != 3 {
		t.Errorf("the revoked key cost %d lookups, want 1", n-2)
	}

	// Revoked through another process (another cache): refused once the
	// hit expires, and not before.
	plain2, key2, err := acc.CreateKey(ctx, tenant.ID, tenants.RoleClient, "second")
	if err != nil {
		t.Fatal(err)
	}
	short := tenants.NewWith(newStore(t, pool), tenants.KeyCacheConfig{HitTTL: 200 * time.Millisecond})
	var clock atomic.Int64 // what short's cache reads as the time, as nanoseconds since now
	now := time.Now()
	tenants.SetKeyCacheClock(short, func() time.Time { return now.Add(time.Duration(clock.Load())) })
	for _, a := range []*tenants.Tenants{acc, short} {
		if _, err := a.Authenticate(ctx, plain2); err != nil {
			t.Fatal(err)
		}
	}
	if err := tenants.New(newStore(t, pool)).RevokeKey(ctx, tenant.ID, key2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Authenticate(ctx, plain2); err != nil {
		t.Errorf("with an hour's hit TTL, a key revoked elsewhere is still served from the cache: %v", err)
	}
	clock.Store(int64(199 * time.Millisecond))
	if _, err := short.Authenticate(ctx, plain2); err != nil {
		t.Errorf("key revoked elsewhere, within the hit TTL: %v, want it served from the cache", err)
	}
	clock.Store(int64(200 * time.Millisecond))
	if _, err := short.Authenticate(ctx, plain2); !errors.Is(err, tenants.ErrBadKey) {
		t.Errorf("key revoked elsewhere, after the hit TTL: %v", err)
	}
}

// TestAuthenticateConcurrently runs lookups of good, bad and revoked keys
// from many goroutines through a cache too small for them (run it with
// -race): every answer is right, the bound holds, and once RevokeKey
// returned no lookup accepts the key.
func TestAuthenticateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := countedPool(t)
	const bound = 4
	acc := tenants.NewWith(newStore(t, pool), tenants.KeyCacheConfig{HitTTL: 20 * time.Millisecond, MissTTL: 50 * time.Millisecond, MaxEntries: bound})
	tenant, err := acc.CreateTenant(ctx, "", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	type credential struct {
		plain string
		id    uuid.UUID // uuid.Nil: a bad key
	}
	var creds []credential
	for i := range 3 {
		plain, key, err := acc.CreateKey(ctx, tenant.ID, tenants.RoleClient, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		creds = append(creds, credential{plain, key.ID}, credential{plain: tenants.KeyPrefix + fmt.Sprintf("bad%040d", i)})
	}
	victim := creds[0]
	var revoked atomic.Bool

	// Each goroutine goes on until it has made 100 lookups, 20 of them
	// after the revocation, which comes once 200 lookups were made (g only
	// names the goroutine).
	var wg sync.WaitGroup
	var made atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			after := 0
			for i := 0; i < 100 || after < 20; i++ {
				if i > 100_000 {
					t.Errorf("goroutine %d: no revocation seen after %d lookups", g, i)
					return
				}
				// Half the lookups are of the victim, so its entry is
				// there when it is revoked; the others share the rest of a
				// cache too small for them all.
				c := victim
				if rand.IntN(2) == 0 {
					c = creds[rand.IntN(len(creds))]
				}
				wasRevoked := revoked.Load()
				if wasRevoked {
					after++
				}
				p, err := acc.Authenticate(ctx, c.plain)
				made.Add(1)
				switch {
				case c.id == uuid.Nil || (c == victim && wasRevoked):
					if !errors.Is(err, tenants.ErrBadKey) {
						t.Errorf("key %s (revoked %v): %+v %v, want refused", c.plain[:8], wasRevoked, p, err)
						return
					}
				case c == victim:
					if err != nil && !errors.Is(err, tenants.ErrBadKey) {
						t.Errorf("victim key before its revocation: %v", err)
						return
					}
				case err != nil || p.KeyID != c.id || p.TenantID != tenant.ID:
					t.Errorf("good key %s: %+v %v", c.id, p, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for made.Load() < 200 {
			time.Sleep(time.Millisecond)
		}
		if err := acc.RevokeKey(ctx, tenant.ID, victim.id); err != nil {
			t.Errorf("revoke: %v", err)
		}
		revoked.Store(true)
	})
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				sampled <- most
				return
			default:
			}
			n, m := tenants.KeyCacheSizes(acc)
			if n != m {
				t.Errorf("cache out of step: %d in order, %d in the map", n, m)
			}
			most = max(most, n)
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	if most := <-sampled; most > bound {
		t.Errorf("the cache held %d entries, bound %d", most, bound)
	}
	if _, err := acc.Authenticate(ctx, victim.plain); !errors.Is(err, tenants.ErrBadKey) {
		t.Errorf("revoked key after the run: %v", err)
	}
}
