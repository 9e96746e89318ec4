package keys

import (
	"context"
	"crypto/aes"
	"encoding/base64"
	"encoding/binary"
	"strings"

	"github.com/holdpoint/holdpoint/service/store"
)

// Event positions would tell a tenant how busy the others are (both parts
// count across all tenants). An event id is therefore shown as the AES
// encryption, with the tenant's own event_ids key, of its position:
// opaque, unrelated from one event to the next, and (for the key holder)
// reversible, so a stream can be resumed from an id.
const eventIDPrefix = "ev_"

// maxEventNumber bounds the number part of a position (48 bits): the two
// last bytes of the block stay zero, so a decoder can tell a genuine id
// from a forged one.
const maxEventNumber = 1<<48 - 1

// EventID returns the opaque id of the tenant's event at pos.
func (k *Ring) EventID(ctx context.Context, tenantID string, pos store.EventPos) (string, error) {
	key, err := k.Signing(ctx, tenantID, PurposeEventIDs)
	if err != nil {
		return "", err
	}
	block, err := aes.NewCipher(key.Secret[:32])
	if err != nil {
		return "", store.InternalError(err)
	}
	// Layout: xid (8 bytes), number (6 bytes), two zero bytes.
	var plain, sealed [aes.BlockSize]byte
	binary.BigEndian.PutUint64(plain[:8], uint64(pos.Xid))
	copy(plain[8:14], beUint48(pos.ID))
	block.Encrypt(sealed[:], plain[:])
	return eventIDPrefix + base64.RawURLEncoding.EncodeToString(sealed[:]), nil
}

func beUint48(n int64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n)&maxEventNumber)
	return b[2:]
}

// ParseEventID returns the position of one of the tenant's event ids; ok
// is false when id is not one (malformed, forged, or another tenant's).
func (k *Ring) ParseEventID(ctx context.Context, tenantID, id string) (store.EventPos, bool, error) {
	raw, found := strings.CutPrefix(id, eventIDPrefix)
	if !found || len(raw) != 22 {
		return store.EventPos{}, false, nil
	}
	sealed, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(sealed) != aes.BlockSize {
		return store.EventPos{}, false, nil
	}
	keys, err := k.Keys(ctx, tenantID, PurposeEventIDs, false)
	if err != nil {
		return store.EventPos{}, false, err
	}
	for _, key := range keys {
		block, err := aes.NewCipher(key.Secret[:32])
		if err != nil {
			return store.EventPos{}, false, store.InternalError(err)
		}
		var plain [aes.BlockSize]byte
		block.Decrypt(plain[:], sealed)
		if plain[14] != 0 || plain[15] != 0 {
			continue
		}
		xid := binary.BigEndian.Uint64(plain[:8])
		var n [8]byte
		copy(n[2:], plain[8:14])
		num := binary.BigEndian.Uint64(n[:])
		if xid > 1<<62 || num == 0 {
			continue
		}
		return store.EventPos{Xid: int64(xid), ID: int64(num)}, true, nil
	}
	return store.EventPos{}, false, nil
}

// EventIDs encodes and decodes a tenant's opaque event ids.
type EventIDs struct{ ring *Ring }

// NewEventIDs returns a codec reading the tenants' event_ids keys.
func NewEventIDs(load func(ctx context.Context, tenantID, purpose string) ([]store.SigningKey, error)) *EventIDs {
	return &EventIDs{ring: NewRing(load)}
}

// Encode returns the opaque id of the tenant's event at pos.
func (e *EventIDs) Encode(ctx context.Context, tenantID string, pos store.EventPos) (string, error) {
	return e.ring.EventID(ctx, tenantID, pos)
}

// Decode returns the position of the tenant's event id; ok is false when
// id is not one of the tenant's.
func (e *EventIDs) Decode(ctx context.Context, tenantID, id string) (store.EventPos, bool, error) {
	return e.ring.ParseEventID(ctx, tenantID, id)
}
