package service

import (
	"context"
	"crypto/aes"
	"encoding/base64"
	"encoding/binary"
)

// Interrupt events are numbered by one sequence across all tenants. Shown
// as is, the gaps a tenant sees between its own ids would tell it how busy
// the others are. An event id is therefore shown as the AES encryption,
// with the tenant's own event_ids key, of its number: opaque, unrelated
// from one event to the next, and (for the key holder) reversible, so a
// stream can later be resumed from an id.
const eventIDPrefix = "ev_"

// eventID returns the opaque id of event number n of a tenant.
func (k *keyring) eventID(ctx context.Context, tenantID string, n int64) (string, error) {
	key, err := k.signing(ctx, tenantID, PurposeEventIDs)
	if err != nil {
		return "", err
	}
	block, err := aes.NewCipher(key.Secret[:32])
	if err != nil {
		return "", internalError(err)
	}
	var plain, sealed [aes.BlockSize]byte
	// The second half stays zero: a decoder can tell a genuine id from a
	// forged one.
	binary.BigEndian.PutUint64(plain[:8], uint64(n))
	block.Encrypt(sealed[:], plain[:])
	return eventIDPrefix + base64.RawURLEncoding.EncodeToString(sealed[:]), nil
}
