package service

import (
	"context"
	"crypto/sha256"
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
)

func hashOf(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

func TestKeyCacheExpiryBoundAndForget(t *testing.T) {
	t.Parallel()
	c := newKeyCache(KeyCacheConfig{HitTTL: 5 * time.Second, MissTTL: 30 * time.Second, MaxEntries: 3})
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return now }
	alice := &Principal{TenantID: "acme", KeyID: uuid.New(), Role: RoleClient}
	found := func(key string) bool {
		_, ok, _ := c.get(hashOf(key))
		return ok
	}

	// A hit lasts HitTTL, a miss MissTTL.
	_, _, rev := c.get(hashOf("good"))
	c.put(hashOf("good"), alice, rev)
	c.put(hashOf("bad"), nil, rev)
	if p, ok, _ := c.get(hashOf("good")); !ok || p == nil || *p != *alice {
		t.Fatalf("good key = %+v %v", p, ok)
	}
	if p, ok, _ := c.get(hashOf("bad")); !ok || p != nil {
		t.Fatalf("bad key = %+v %v, want a cached miss", p, ok)
	}
	// Callers get copies.
	p, _, _ := c.get(hashOf("good"))
	p.TenantID = "mallory"
	if p, _, _ := c.get(hashOf("good")); p.TenantID != "acme" {
		t.Fatalf("a caller changed the cached principal to %+v", p)
	}
	now = now.Add(5 * time.Second)
	if found("good") || !found("bad") {
		t.Fatalf("after 5 s: good cached %v (want expired), bad cached %v (want kept)", found("good"), found("bad"))
	}
	now = now.Add(25 * time.Second)
	if found("bad") {
		t.Fatalf("miss still cached after 30 s")
	}
	if n := c.order.Len(); n != 0 || len(c.entries) != 0 {
		t.Fatalf("expired entries kept: %d in order, %d in the map", n, len(c.entries))
	}

	// The bound: the entry stored longest ago goes first; storing a key
	// again counts as new.
	for i := range 10 {
		c.put(hashOf(fmt.Sprint("k", i)), nil, rev)
		if n := c.order.Len(); n > 3 || n != len(c.entries) {
			t.Fatalf("after %d puts: %d entries in order, %d in the map; bound 3", i+1, n, len(c.entries))
		}
	}
	for i := range 10 {
		if want := i >= 7; found(fmt.Sprint("k", i)) != want {
			t.Errorf("k%d cached = %v, want %v", i, !want, want)
		}
	}
	c.put(hashOf("k7"), nil, rev)
	c.put(hashOf("k10"), nil, rev)
	if !found("k7") || found("k8") || !found("k9") || !found("k10") {
		t.Errorf("after refreshing k7 and adding k10: k7 %v k8 %v k9 %v k10 %v, want k8 evicted",
			found("k7"), found("k8"), found("k9"), found("k10"))
	}

	// forget drops the hits of a revoked key; a lookup that started before
	// a revocation does not cache a hit, though a miss is still kept.
	c.put(hashOf("good"), alice, rev)
	_, _, before := c.get(hashOf("late"))
	c.forget(alice.KeyID)
	if found("good") {
		t.Errorf("revoked key still cached")
	}
	c.put(hashOf("late"), alice, before)
	if found("late") {
		t.Errorf("a hit read before a revocation was cached after it")
	}
	c.put(hashOf("late"), nil, before)
	if !found("late") {
		t.Errorf("a miss read before a revocation was not cached")
	}
}

// lookupCounter counts the key lookups a pool sends.
type lookupCounter struct{ n atomic.Int64 }

func (c *lookupCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "name: GetAPIKeyByHash ") {
		c.n.Add(1)
	}
	return ctx
}

func (c *lookupCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countedPool is an application pool on a fresh database whose key lookups
// are counted.
func countedPool(t *testing.T) (*pgxpool.Pool, *lookupCounter) {
	t.Helper()
	counter := &lookupCounter{}
	pool, err := NewAppPoolWith(context.Background(), testdb.URL(t), func(c *pgxpool.Config) {
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
	acc := NewAccountsWith(pool, KeyCacheConfig{HitTTL: time.Hour, MissTTL: time.Hour})
	tenant, err := acc.CreateTenant(ctx, "", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	plain, key, err := acc.CreateKey(ctx, tenant.ID, RoleClient, "backend")
	if err != nil {
		t.Fatal(err)
	}

	bad := KeyPrefix + strings.Repeat("x", 43)
	for range 50 {
		if _, err := acc.Authenticate(ctx, bad); !errors.Is(err, errBadKey) {
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
		if _, err := acc.Authenticate(ctx, plain); !errors.Is(err, errBadKey) {
			t.Fatalf("key revoked here: %v", err)
		}
	}
	if n := lookups.n.Load(); n != 3 {
		t.Errorf("the revoked key cost %d lookups, want 1", n-2)
	}

	// Revoked through another process (another cache): refused once the
	// hit expires, and not before.
	plain2, key2, err := acc.CreateKey(ctx, tenant.ID, RoleClient, "second")
	if err != nil {
		t.Fatal(err)
	}
	short := NewAccountsWith(pool, KeyCacheConfig{HitTTL: 200 * time.Millisecond})
	for _, a := range []*Accounts{acc, short} {
		if _, err := a.Authenticate(ctx, plain2); err != nil {
			t.Fatal(err)
		}
	}
	if err := NewAccounts(pool).RevokeKey(ctx, tenant.ID, key2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acc.Authenticate(ctx, plain2); err != nil {
		t.Errorf("with an hour's hit TTL, a key revoked elsewhere is still served from the cache: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := short.Authenticate(ctx, plain2); !errors.Is(err, errBadKey) {
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
	acc := NewAccountsWith(pool, KeyCacheConfig{HitTTL: 20 * time.Millisecond, MissTTL: 50 * time.Millisecond, MaxEntries: bound})
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
		plain, key, err := acc.CreateKey(ctx, tenant.ID, RoleClient, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		creds = append(creds, credential{plain, key.ID}, credential{plain: KeyPrefix + fmt.Sprintf("bad%040d", i)})
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
					if !errors.Is(err, errBadKey) {
						t.Errorf("key %s (revoked %v): %+v %v, want refused", c.plain[:8], wasRevoked, p, err)
						return
					}
				case c == victim:
					if err != nil && !errors.Is(err, errBadKey) {
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
			acc.keys.mu.Lock()
			n, m := acc.keys.order.Len(), len(acc.keys.entries)
			acc.keys.mu.Unlock()
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
	if _, err := acc.Authenticate(ctx, victim.plain); !errors.Is(err, errBadKey) {
		t.Errorf("revoked key after the run: %v", err)
	}
}
