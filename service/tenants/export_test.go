package tenants

import "time"

// Internals the external tests (package tenants_test, which may import
// service/pgstore) reach.

// ErrBadKey is errBadKey.
var ErrBadKey = errBadKey

// KeyCacheSizes returns the lengths of the key cache's order list and map.
func KeyCacheSizes(a *Tenants) (int, int) {
	a.keys.mu.Lock()
	defer a.keys.mu.Unlock()
	return a.keys.order.Len(), len(a.keys.entries)
}

// SetTokenClock makes a mint user tokens stamped by now.
func SetTokenClock(a *Tenants, now func() time.Time) { a.now = now }

// SetKeyCacheClock makes a's key cache read the time from now.
func SetKeyCacheClock(a *Tenants, now func() time.Time) {
	a.keys.mu.Lock()
	defer a.keys.mu.Unlock()
	a.keys.now = now
}
