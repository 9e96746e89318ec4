package tenants

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
)

func hashOf(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

func TestKeyCacheExpiryBoundAndForget(t *testing.T) {
	t.Parallel()
	c := newKeyCache(KeyCacheConfig{HitTTL: 5 * time.Second, MissTTL: 30 * time.Second, MaxEntries: 3})
	now := time.Unix(1_700_000_000, 0)
	c.now = func() time.Time { return now }
	alice := &Principal{TenantID: "acme", KeyID: uuid.New(), KeyName: "alice", Role: RoleClient, Scopes: []string{"approve:payments"}}
	found := func(key string) bool {
		_, ok, _ := c.get(hashOf(key))
		return ok
	}

	// A hit lasts HitTTL, a miss MissTTL.
	_, _, rev := c.get(hashOf("good"))
	c.put(hashOf("good"), alice, rev)
	c.put(hashOf("bad"), nil, rev)
	if p, ok, _ := c.get(hashOf("good")); !ok || p == nil || !reflect.DeepEqual(p, alice) {
		t.Fatalf("good key = %+v %v", p, ok)
	}
	if p, ok, _ := c.get(hashOf("bad")); !ok || p != nil {
		t.Fatalf("bad key = %+v %v, want a cached miss", p, ok)
	}
	// Callers get copies.
	p, _, _ := c.get(hashOf("good"))
	p.TenantID = "mallory"
	p.Scopes[0] = "*"
	if p, _, _ := c.get(hashOf("good")); p.TenantID != "acme" || p.Scopes[0] != "approve:payments" {
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
