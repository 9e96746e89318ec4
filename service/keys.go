package service

import (
	"context"
	"crypto/rand"
	"sync"
	"time"
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

// newSecret returns a fresh 32-byte key.
func newSecret() []byte {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return b
}

// keyring caches tenants' keys, so signing a client-managed state or
// encoding an event id costs no query. A key id it does not know (a key
// rotated in on another instance) makes it read the keys again, at most
// once a second per tenant and purpose, so forged key ids cannot flood the
// database.
type keyring struct {
	load func(ctx context.Context, tenantID, purpose string) ([]SigningKey, error)

	mu   sync.Mutex
	sets map[string]*keySet
}

type keySet struct {
	keys   []SigningKey // newest first
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

func newKeyring(load func(ctx context.Context, tenantID, purpose string) ([]SigningKey, error)) *keyring {
	return &keyring{load: load, sets: map[string]*keySet{}}
}

// keys returns the tenant's usable keys of a purpose, newest first; with
// refresh it reads them again unless that was done under a second ago.
func (k *keyring) keys(ctx context.Context, tenantID, purpose string, refresh bool) ([]SigningKey, error) {
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
	out := make([]SigningKey, 0, len(set.keys))
	for _, key := range set.keys {
		if key.Usable(now) {
			out = append(out, key)
		}
	}
	return out, nil
}

// signing returns the key that signs now (the newest).
func (k *keyring) signing(ctx context.Context, tenantID, purpose string) (SigningKey, error) {
	keys, err := k.keys(ctx, tenantID, purpose, false)
	if err != nil {
		return SigningKey{}, err
	}
	if len(keys) == 0 {
		return SigningKey{}, InternalError(errNoKey{tenantID, purpose})
	}
	return keys[0], nil
}

// find returns the usable key with the given id, reading the keys again
// when it is not known.
func (k *keyring) find(ctx context.Context, tenantID, purpose string, id int) (SigningKey, bool, error) {
	for _, refresh := range []bool{false, true} {
		keys, err := k.keys(ctx, tenantID, purpose, refresh)
		if err != nil {
			return SigningKey{}, false, err
		}
		for _, key := range keys {
			if key.ID == id {
				return key, true, nil
			}
		}
	}
	return SigningKey{}, false, nil
}

type errNoKey struct{ tenant, purpose string }

func (e errNoKey) Error() string {
	return "tenant " + e.tenant + " has no usable " + e.purpose + " key"
}
