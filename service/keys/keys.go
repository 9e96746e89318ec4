// Package keys holds the tenants' signing keys as the engine and the
// webhook dispatcher use them: a cache over the store (Ring), the purposes
// a key serves, and the opaque event ids one of them encrypts (EventIDs).
package keys

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service/store"
)

// Purposes of a tenant's secrets (tenant_secrets).
const (
	// PurposeToken signs the tenant's end-user tokens.
	PurposeToken = "token"
	// PurposeState signs the state client-managed agents return.
	PurposeState = "state"
	// PurposeEventIDs makes interrupt event ids opaque per tenant; it is
	// never rotated.
	PurposeEventIDs = "event_ids"
	// PurposeTool signs the calls of a tenant's HTTP tools (Standard
	// Webhooks), so its backend can tell them from forgeries.
	PurposeTool = "tool"
)

// NewSecret returns a fresh 32-byte key.
func NewSecret() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return b
}

// Ring caches tenants' keys, so signing a client-managed state or
// encoding an event id costs no query. A key id it does not know (a key
// rotated in on another instance) makes it read the keys again, at most
// once a second per tenant and purpose, so forged key ids cannot flood the
// database.
type Ring struct {
	load func(ctx context.Context, tenantID, purpose string) ([]store.SigningKey, error)

	mu   sync.Mutex
	sets map[string]*keySet
}

type keySet struct {
	keys   []store.SigningKey // newest first
	loaded time.Time
}

const (
	// keyringTTL is how long loaded keys are used before being read again,
	// so a rotation elsewhere reaches this instance's signing within it.
	keyringTTL = time.Minute
	// keyringRefreshGap is the least time between two reads of one
	// tenant's keys caused by unknown key ids.
	keyringRefreshGap = time.Second
	// keyringMaxSets bounds the tenants (times purposes) held.
	keyringMaxSets = 10000
)

// NewRing returns a ring reading keys with load (a store's SigningKeys).
func NewRing(load func(ctx context.Context, tenantID, purpose string) ([]store.SigningKey, error)) *Ring {
	return &Ring{load: load, sets: map[string]*keySet{}}
}

// Keys returns the tenant's usable keys of a purpose, newest first; with
// refresh it reads them again unless that was done under a second ago.
func (k *Ring) Keys(ctx context.Context, tenantID, purpose string, refresh bool) ([]store.SigningKey, error) {
	name := tenantID + "\x00" + purpose
	now := time.Now()
	k.mu.Lock()
	set := k.sets[name]
	k.mu.Unlock()
	stale := set == nil || now.Sub(set.loaded) > keyringTTL || (refresh && now.Sub(set.loaded) > keyringRefreshGap)
	if stale {
		keys, err := k.load(ctx, tenantID, purpose)
		if err != nil {
			return nil, err
		}
		set = &keySet{keys: keys, loaded: now}
		k.mu.Lock()
		if len(k.sets) >= keyringMaxSets {
			for n := range k.sets {
				delete(k.sets, n)
				if len(k.sets) < keyringMaxSets/2 {
					break
				}
			}
		}
		k.sets[name] = set
		k.mu.Unlock()
	}
	out := make([]store.SigningKey, 0, len(set.keys))
	for _, key := range set.keys {
		if key.Usable(now) {
			out = append(out, key)
		}
	}
	return out, nil
}

// Signing returns the key that signs now (the newest).
func (k *Ring) Signing(ctx context.Context, tenantID, purpose string) (store.SigningKey, error) {
	keys, err := k.Keys(ctx, tenantID, purpose, false)
	if err != nil {
		return store.SigningKey{}, err
	}
	if len(keys) == 0 {
		return store.SigningKey{}, store.InternalError(errNoKey{tenantID, purpose})
	}
	return keys[0], nil
}

// Find returns the usable key with the given id, reading the keys again
// when it is not known.
func (k *Ring) Find(ctx context.Context, tenantID, purpose string, id int) (store.SigningKey, bool, error) {
	for _, refresh := range []bool{false, true} {
		keys, err := k.Keys(ctx, tenantID, purpose, refresh)
		if err != nil {
			return store.SigningKey{}, false, err
		}
		for _, key := range keys {
			if key.ID == id {
				return key, true, nil
			}
		}
	}
	return store.SigningKey{}, false, nil
}

type errNoKey struct{ tenant, purpose string }

func (e errNoKey) Error() string {
	return "tenant " + e.tenant + " has no usable " + e.purpose + " key"
}
