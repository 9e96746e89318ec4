package tenants

import (
	"container/list"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service/store"
)

// Defaults of KeyCacheConfig.
const (
	// DefaultKeyHitTTL is how long a valid key is trusted without a lookup:
	// how late a revocation made by another process takes effect here.
	DefaultKeyHitTTL = 5 * time.Second
	// DefaultKeyMissTTL is how long an unknown or revoked key is refused
	// without a lookup.
	DefaultKeyMissTTL = 30 * time.Second
	// DefaultKeyCacheEntries bounds the cache (about 150 bytes an entry).
	DefaultKeyCacheEntries = 10_000
)

// KeyCacheConfig sets the cache of API-key lookups; zero fields take the
// defaults.
type KeyCacheConfig struct {
	HitTTL     time.Duration
	MissTTL    time.Duration
	MaxEntries int
}

// NewWith is New with the key cache set by cfg.
func NewWith(st store.TenantStore, cfg KeyCacheConfig) *Tenants {
	return &Tenants{store: st, keys: newKeyCache(cfg)}
}

// keyCache remembers what API keys authenticated as, by the SHA-256 hash of
// the key, so a client repeating a key (a valid one on every request, or a
// bad one in a loop) costs a lookup and a usage stamp once per TTL instead
// of on every request. Misses are kept longer than hits: nothing makes an
// unknown key valid, while a valid key may be revoked by another process.
// When full, the entry stored longest ago goes.
//
// It is not golang-lru's expirable cache (which pgstore's caches use):
// hits and misses live for different times, a count of revocations keeps a
// lookup that raced a revocation from caching the revoked key, and the
// clock is a field, so its tests move time instead of sleeping.
type keyCache struct {
	hitTTL, missTTL time.Duration
	max             int
	now             func() time.Time

	mu      sync.Mutex
	entries map[[sha256.Size]byte]*list.Element // of *keyCacheEntry
	order   *list.List                          // front: stored longest ago
	// revocations counts forget calls, so a lookup that read a key before
	// its revocation does not cache it as valid after it.
	revocations uint64
}

// keyCacheEntry is one cached answer.
type keyCacheEntry struct {
	hash      [sha256.Size]byte
	principal *Principal // nil: the key does not authenticate
	expires   time.Time
}

func newKeyCache(cfg KeyCacheConfig) *keyCache {
	c := &keyCache{
		hitTTL:  cfg.HitTTL,
		missTTL: cfg.MissTTL,
		max:     cfg.MaxEntries,
		now:     time.Now,
		entries: make(map[[sha256.Size]byte]*list.Element),
		order:   list.New(),
	}
	if c.hitTTL <= 0 {
		c.hitTTL = DefaultKeyHitTTL
	}
	if c.missTTL <= 0 {
		c.missTTL = DefaultKeyMissTTL
	}
	if c.max <= 0 {
		c.max = DefaultKeyCacheEntries
	}
	return c
}

// get returns the cached answer for a key hash: found is false when there
// is none (or it expired); a found nil principal is a bad key. It returns
// the revocation count to pass to put after a lookup.
func (c *keyCache) get(hash [sha256.Size]byte) (p *Principal, found bool, revocations uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[hash]
	if !ok {
		return nil, false, c.revocations
	}
	e := el.Value.(*keyCacheEntry)
	if !c.now().Before(e.expires) {
		c.remove(el)
		return nil, false, c.revocations
	}
	if e.principal == nil {
		return nil, true, c.revocations
	}
	return e.principal.clone(), true, c.revocations
}

// put caches the answer of a lookup (nil: a bad key). revocations is what
// get returned before the lookup: a valid key is not cached if a key was
// revoked in between, as it might have been this one.
func (c *keyCache) put(hash [sha256.Size]byte, p *Principal, revocations uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ttl := c.missTTL
	if p != nil {
		if revocations != c.revocations {
			return
		}
		p, ttl = p.clone(), c.hitTTL
	}
	e := &keyCacheEntry{hash: hash, principal: p, expires: c.now().Add(ttl)}
	if el, ok := c.entries[hash]; ok {
		el.Value = e
		c.order.MoveToBack(el)
		return
	}
	for c.order.Len() >= c.max {
		c.remove(c.order.Front())
	}
	c.entries[hash] = c.order.PushBack(e)
}

// forget drops the cached answers for a key, which was just revoked. It
// walks the whole cache: revocations are rare, lookups are not, so the
// cache keeps no index by key id.
func (c *keyCache) forget(keyID uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revocations++
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		if p := el.Value.(*keyCacheEntry).principal; p != nil && p.KeyID == keyID {
			c.remove(el)
		}
		el = next
	}
}

// remove drops an entry; c.mu is held.
func (c *keyCache) remove(el *list.Element) {
	delete(c.entries, el.Value.(*keyCacheEntry).hash)
	c.order.Remove(el)
}

// clone copies a principal, its scopes included, so that no caller changes
// what the cache holds.
func (p *Principal) clone() *Principal {
	cp := *p
	cp.Scopes = slices.Clone(p.Scopes)
	return &cp
}
