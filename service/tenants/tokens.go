package tenants

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/store"
)

// User token parameters. A user token is a JWT signed with HS256 and the
// tenant's own secret (Tenants.TokenSecret), so a browser can act for one
// end user of one tenant without holding an API key.
const (
	// TokenIssuer is the iss and aud claim of every user token.
	TokenIssuer = "holdpoint"
	// DefaultTokenTTL is a user token's lifetime when none is asked for.
	DefaultTokenTTL = 15 * time.Minute
	// MaxTokenTTL is the longest lifetime a user token may have.
	MaxTokenTTL = 24 * time.Hour
	// maxTokenBytes bounds what is parsed at all.
	maxTokenBytes = 4096
	// tokenLeeway absorbs clock skew between the instances that mint and
	// verify.
	tokenLeeway = 5 * time.Second
)

// userClaims are the claims of a user token: the registered ones plus the
// tenant id.
type userClaims struct {
	TenantID string `json:"tid"`
	jwt.RegisteredClaims
}

// UserToken is a freshly minted user token.
type UserToken struct {
	Token string `json:"token"`
	// TokenID (the jti claim) names the token to revoke it.
	TokenID   string    `json:"tokenId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// errBadToken is the one answer to every token that does not verify, so a
// caller learns nothing about why.
var errBadToken = store.Errorf(store.CodeUnauthenticated, "invalid or expired user token")

// tokenParser accepts HS256 only (never "none", never an asymmetric
// algorithm whose public key could be confused for the secret) and requires
// issuer, audience, expiry and a plausible issue time.
var tokenParser = jwt.NewParser(
	jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
	jwt.WithIssuer(TokenIssuer),
	jwt.WithAudience(TokenIssuer),
	jwt.WithExpirationRequired(),
	jwt.WithIssuedAt(),
	jwt.WithLeeway(tokenLeeway),
)

// MintUserToken signs a token that lets its holder act as end user userID
// of the tenant for ttl (0 means DefaultTokenTTL, at most MaxTokenTTL).
func (a *Tenants) MintUserToken(ctx context.Context, tenantID, userID string, ttl time.Duration) (*UserToken, error) {
	if err := auth.ValidateEndUser(userID); err != nil {
		return nil, err
	}
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	if ttl < time.Second || ttl > MaxTokenTTL {
		return nil, store.Errorf(store.CodeInvalidArgument, "token lifetime must be between 1s and %s", MaxTokenTTL)
	}
	if !tenantIDRE.MatchString(tenantID) {
		return nil, store.Errorf(store.CodeNotFound, "tenant %s not found", tenantID)
	}
	keys, err := a.store.SigningKeys(ctx, tenantID, keys.PurposeToken)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, store.Errorf(store.CodeNotFound, "tenant %s not found", tenantID)
	}
	key := keys[0]
	now := time.Now()
	if a.now != nil {
		now = a.now()
	}
	claims := userClaims{
		TenantID: tenantID,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    TokenIssuer,
			Audience:  jwt.ClaimStrings{TokenIssuer},
			Subject:   userID,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			ID:        rand.Text(),
		},
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	// The key id says which of the tenant's token keys signed it, so a
	// rotation keeps tokens signed with the previous key verifying.
	tok.Header["kid"] = strconv.Itoa(key.ID)
	signed, err := tok.SignedString(key.Secret)
	if err != nil {
		return nil, store.InternalError(err)
	}
	return &UserToken{Token: signed, TokenID: claims.ID, ExpiresAt: claims.ExpiresAt.Time}, nil
}

// VerifyUserToken checks a user token and returns the caller it acts for:
// its tenant and end user, with actor "user:<id>". Every token that does
// not verify (bad signature, other algorithm, expired, missing claims,
// unknown tenant or key, revoked) gets the same UNAUTHENTICATED error;
// only a failure to reach the database is reported as such. The keys and
// the revocations come from one query.
func (a *Tenants) VerifyUserToken(ctx context.Context, token string) (auth.Caller, error) {
	if token == "" || len(token) > maxTokenBytes {
		return auth.Caller{}, errBadToken
	}
	var (
		lookupErr error
		state     *store.TokenVerification
	)
	claims := &userClaims{}
	_, err := tokenParser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		// The claims are not verified yet: tid only chooses which keys the
		// signature must match (and jti and sub which revocations apply).
		c, ok := t.Claims.(*userClaims)
		if !ok || !tenantIDRE.MatchString(c.TenantID) || auth.ValidateEndUser(c.Subject) != nil || !validTokenID(c.ID) {
			return nil, errBadToken
		}
		var err error
		state, err = a.store.TokenVerification(ctx, c.TenantID, c.ID, c.Subject)
		if err != nil {
			lookupErr = err
			return nil, err
		}
		var keys jwt.VerificationKeySet
		kid, hasKid := t.Header["kid"].(string)
		for _, k := range state.Keys {
			if !hasKid || kid == strconv.Itoa(k.ID) {
				keys.Keys = append(keys.Keys, k.Secret)
			}
		}
		if len(keys.Keys) == 0 {
			return nil, errBadToken
		}
		return keys, nil
	})
	if err != nil {
		if lookupErr != nil && !errors.Is(lookupErr, store.ErrNotFound) {
			return auth.Caller{}, lookupErr
		}
		return auth.Caller{}, errBadToken
	}
	if claims.ID == "" || claims.IssuedAt == nil || claims.ExpiresAt == nil ||
		claims.ExpiresAt.Sub(claims.IssuedAt.Time) > MaxTokenTTL+tokenLeeway ||
		auth.ValidateEndUser(claims.Subject) != nil {
		return auth.Caller{}, errBadToken
	}
	if state.Revoked || claims.IssuedAt.Time.Before(state.NotBefore) {
		return auth.Caller{}, errBadToken
	}
	return auth.Caller{TenantID: claims.TenantID, EndUser: claims.Subject, Actor: "user:" + claims.Subject}, nil
}

// RevokeUserToken refuses one user token (by its tokenId, the jti claim)
// from now on, on every instance.
func (a *Tenants) RevokeUserToken(ctx context.Context, tenantID, tokenID string) error {
	if !validTokenID(tokenID) {
		return store.Errorf(store.CodeInvalidArgument, "tokenId must be 1-256 printable characters")
	}
	// A token lives at most MaxTokenTTL: the row is useless after.
	return a.store.RevokeUserToken(ctx, tenantID, tokenID, time.Now().Add(MaxTokenTTL+tokenLeeway))
}

// RevokeEndUserTokens refuses every token of an end user issued until now
// (tokens minted later verify).
func (a *Tenants) RevokeEndUserTokens(ctx context.Context, tenantID, userID string) error {
	if err := auth.ValidateEndUser(userID); err != nil {
		return err
	}
	return a.store.RevokeEndUserTokens(ctx, tenantID, userID)
}

// validTokenID reports whether a token id (jti) is 1-256 bytes of
// printable UTF-8, as the ones this server mints are.
func validTokenID(id string) bool {
	return id != "" && len(id) <= 256 && auth.ValidateEndUser(id) == nil
}
