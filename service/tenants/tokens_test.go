package tenants_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/store"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// newAccounts returns accounts on a fresh database with tenants a and b.
func newAccounts(t *testing.T) *tenants.Tenants {
	t.Helper()
	ctx := context.Background()
	pool, err := pgstore.NewAppPool(ctx, testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	acc := tenants.New(newStore(t, pool))
	for _, id := range []string{"a", "b"} {
		if _, err := acc.CreateTenant(ctx, id, "Tenant "+id); err != nil {
			t.Fatal(err)
		}
	}
	return acc
}

// sign makes a token with arbitrary claims, algorithm and key, as a forger
// would.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validClaims are the claims MintUserToken would write for user u1 of
// tenant a.
func validClaims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": "holdpoint", "aud": "holdpoint", "sub": "u1", "tid": "a",
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "jti": "j1",
	}
}

func TestUserTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acc := newAccounts(t)

	tok, err := acc.MintUserToken(ctx, "a", "user-1@example.com", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(tok.ExpiresAt); d < 14*time.Minute || d > 15*time.Minute {
		t.Errorf("expires in %s, want the default 15m", d)
	}
	c, err := acc.VerifyUserToken(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	want := auth.Caller{TenantID: "a", EndUser: "user-1@example.com", Actor: "user:user-1@example.com"}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("caller %+v, want %+v", c, want)
	}
	// The claims are the documented ones.
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok.Token, claims); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"iss", "aud", "sub", "tid", "iat", "exp", "jti"} {
		if _, ok := claims[k]; !ok {
			t.Errorf("claim %s missing from %v", k, claims)
		}
	}

	secretA, err := acc.TokenSecret(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	secretB, err := acc.TokenSecret(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	with := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := validClaims()
		change(c)
		return c
	}
	noneToken, err := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims()).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// A control: the forger's tooling makes tokens that verify when nothing
	// is wrong with them.
	if _, err := acc.VerifyUserToken(ctx, sign(t, jwt.SigningMethodHS256, secretA, validClaims())); err != nil {
		t.Fatalf("hand-made valid token rejected: %v", err)
	}

	for _, tc := range []struct {
		name  string
		token string
	}{
		{"alg none", noneToken},
		{"alg none without signature", strings.TrimSuffix(noneToken, ".") + "."},
		{"HS512 with the right secret", sign(t, jwt.SigningMethodHS512, secretA, validClaims())},
		{"HS384 with the right secret", sign(t, jwt.SigningMethodHS384, secretA, validClaims())},
		{"another tenant's secret", sign(t, jwt.SigningMethodHS256, secretB, validClaims())},
		{"tid of another tenant, signed by the first", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["tid"] = "b" }))},
		{"guessed secret", sign(t, jwt.SigningMethodHS256, []byte("secret"), validClaims())},
		{"expired", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }))},
		{"no exp", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"no iat", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { delete(c, "iat") }))},
		{"iat in the future", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["iat"] = time.Now().Add(time.Hour).Unix() }))},
		{"lifetime over 24h", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(48 * time.Hour).Unix() }))},
		{"no sub", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { delete(c, "sub") }))},
		{"unprintable sub", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["sub"] = "a\x00b" }))},
		{"no tid", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { delete(c, "tid") }))},
		{"unknown tenant", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["tid"] = "zzz" }))},
		{"malformed tid", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["tid"] = "a' OR '1'='1" }))},
		{"no jti", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { delete(c, "jti") }))},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["iss"] = "someone-else" }))},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, secretA, with(func(c jwt.MapClaims) { c["aud"] = "another-service" }))},
		{"signature of another token", tok.Token[:strings.LastIndex(tok.Token, ".")] + noneToken[strings.LastIndex(noneToken, "."):] + "AAAA"},
		{"garbage", "not-a-token"},
		{"empty", ""},
		{"huge", strings.Repeat("a", 10000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := acc.VerifyUserToken(ctx, tc.token)
			if !isStatus(err, store.CodeUnauthenticated) {
				t.Fatalf("verify = %+v, %v; want UNAUTHENTICATED", c, err)
			}
		})
	}

	for _, tc := range []struct {
		name, tenant, user string
		ttl                time.Duration
		status             string
	}{
		{"ttl over 24h", "a", "u", 25 * time.Hour, store.CodeInvalidArgument},
		{"negative ttl", "a", "u", -time.Minute, store.CodeInvalidArgument},
		{"unknown tenant", "nope", "u", 0, store.CodeNotFound},
		{"empty user", "a", "", 0, store.CodeInvalidArgument},
		{"user with a newline", "a", "u\nx", 0, store.CodeInvalidArgument},
		{"user over 256 bytes", "a", strings.Repeat("u", 257), 0, store.CodeInvalidArgument},
	} {
		if _, err := acc.MintUserToken(ctx, tc.tenant, tc.user, tc.ttl); !isStatus(err, tc.status) {
			t.Errorf("mint %s: %v, want %s", tc.name, err, tc.status)
		}
	}
	long, err := acc.MintUserToken(ctx, "b", "u", tenants.MaxTokenTTL)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := acc.VerifyUserToken(ctx, long.Token); err != nil || c.TenantID != "b" {
		t.Fatalf("24h token: %+v %v", c, err)
	}
}

// TestTokenRevocationAndRotation revokes tokens one by one and per user,
// and rotates the token key: what the old key signed verifies for the
// grace period only.
func TestTokenRevocationAndRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acc := newAccounts(t)
	mint := func(user string) *tenants.UserToken {
		t.Helper()
		tok, err := acc.MintUserToken(ctx, "a", user, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	valid := func(what string, tok *tenants.UserToken, want bool) {
		t.Helper()
		c, err := acc.VerifyUserToken(ctx, tok.Token)
		switch {
		case want && err != nil:
			t.Errorf("%s: %v, want valid", what, err)
		case !want && !isStatus(err, store.CodeUnauthenticated):
			t.Errorf("%s: %+v %v, want UNAUTHENTICATED", what, c, err)
		}
	}
	kid := func(tok *tenants.UserToken) any {
		parsed, _, err := jwt.NewParser().ParseUnverified(tok.Token, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		return parsed.Header["kid"]
	}
	one, two, bob := mint("alice"), mint("alice"), mint("bob")
	if one.TokenID == "" || kid(one) != "1" {
		t.Fatalf("token id %q, kid %v", one.TokenID, kid(one))
	}
	if err := acc.RevokeUserToken(ctx, "a", one.TokenID); err != nil {
		t.Fatal(err)
	}
	valid("a revoked token", one, false)
	valid("the user's other token", two, true)
	if err := acc.RevokeEndUserTokens(ctx, "a", "alice"); err != nil {
		t.Fatal(err)
	}
	valid("a token of a revoked user", two, false)
	valid("another user's token", bob, true)
	// Tokens are stamped in whole seconds, and a revocation refuses those
	// of its second too; one minted in a later second verifies. The clock
	// that stamps tokens runs two seconds ahead (within the verifier's
	// leeway) instead of the test waiting for the next second.
	tenants.SetTokenClock(acc, func() time.Time { return time.Now().Add(2 * time.Second) })
	valid("a token minted after the user's revocation", mint("alice"), true)
	tenants.SetTokenClock(acc, nil)
	if err := acc.RevokeUserToken(ctx, "a", "x\x00y"); !isStatus(err, store.CodeInvalidArgument) {
		t.Errorf("revoke a NUL token id: %v", err)
	}
	if err := acc.RevokeEndUserTokens(ctx, "a", ""); !isStatus(err, store.CodeInvalidArgument) {
		t.Errorf("revoke the empty user: %v", err)
	}

	// Rotation with a grace period: old tokens verify, new ones carry kid 2.
	if _, err := acc.RotateSecret(ctx, "a", keys.PurposeToken, time.Hour); err != nil {
		t.Fatal(err)
	}
	fresh := mint("carol")
	if kid(fresh) != "2" {
		t.Fatalf("kid after rotation %v", kid(fresh))
	}
	valid("a key-1 token within the grace", bob, true)
	valid("a key-2 token", fresh, true)
	// A token naming key 1 but signed with key 2's secret does not verify.
	secret2, err := acc.TokenSecret(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	claims := validClaims()
	mislabelled := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	mislabelled.Header["kid"] = "1"
	signed, err := mislabelled.SignedString(secret2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acc.VerifyUserToken(ctx, signed); !isStatus(err, store.CodeUnauthenticated) {
		t.Errorf("kid 1 signed with key 2: %v", err)
	}
	// Without grace, the replaced key stops at once (key 1 keeps its hour).
	if _, err := acc.RotateSecret(ctx, "a", keys.PurposeToken, 0); err != nil {
		t.Fatal(err)
	}
	valid("a key-2 token after a rotation without grace", fresh, false)
	valid("a key-1 token still within its grace", bob, true)
	valid("a key-3 token", mint("dave"), true)
	for _, bad := range []struct {
		purpose string
		grace   time.Duration
	}{{keys.PurposeEventIDs, 0}, {"nonsense", 0}, {keys.PurposeToken, -time.Second}, {keys.PurposeToken, 31 * 24 * time.Hour}} {
		if _, err := acc.RotateSecret(ctx, "a", bad.purpose, bad.grace); !isStatus(err, store.CodeInvalidArgument) {
			t.Errorf("rotate %s with grace %s: %v", bad.purpose, bad.grace, err)
		}
	}
	if _, err := acc.RotateSecret(ctx, "nope", keys.PurposeToken, 0); !isStatus(err, store.CodeNotFound) {
		t.Errorf("rotate an unknown tenant: %v", err)
	}
}
