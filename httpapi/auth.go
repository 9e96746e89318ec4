package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// Authenticator resolves the credentials of a request and mints user
// tokens; *tenants.Tenants is the implementation.
type Authenticator interface {
	// Authenticate resolves an API key to its tenant and role.
	Authenticate(ctx context.Context, key string) (*tenants.Principal, error)
	// VerifyUserToken resolves a user token to the caller it acts for.
	VerifyUserToken(ctx context.Context, token string) (service.Caller, error)
	// MintUserToken signs a user token for an end user of a tenant.
	MintUserToken(ctx context.Context, tenantID, userID string, ttl time.Duration) (*tenants.UserToken, error)
	// RevokeUserToken refuses one user token from now on.
	RevokeUserToken(ctx context.Context, tenantID, tokenID string) error
	// RevokeEndUserTokens refuses every token of an end user issued so far.
	RevokeEndUserTokens(ctx context.Context, tenantID, userID string) error
	// SignInUI exchanges an admin key for a dashboard session and its
	// cookie token.
	SignInUI(ctx context.Context, key string) (*service.UISession, string, error)
	// UISession resolves a dashboard cookie token.
	UISession(ctx context.Context, token string) (*service.UISession, error)
	// SignOutUI ends a dashboard session.
	SignOutUI(ctx context.Context, s *service.UISession, token string) error
}

// HeaderEndUser names the end user a key acts for.
const HeaderEndUser = "X-End-User"

// contextAccess is the echo context key of the request's access.
const contextAccess = "holdpoint.access"

// Access levels of a request.
const (
	// levelProtocol may use the agent protocol routes only: client keys
	// and user tokens.
	levelProtocol = iota + 1
	// levelAdmin may use every route: admin keys, and dev mode.
	levelAdmin
)

// access is what the authentication middleware found out about a request.
type access struct {
	caller service.Caller
	level  int
	// rateKey names the rate limiter bucket of the credential.
	rateKey string
	// userToken marks a caller authenticated by a user token, which fixes
	// its end user.
	userToken bool
	// ui is the dashboard session the request came with (nil: none).
	ui      *service.UISession
	uiToken string
}

// Fixed public answers of authentication: a caller learns nothing about
// why a credential failed.
var (
	errNoCredential = service.Errorf(service.CodeUnauthenticated, "missing credential: send Authorization: Bearer <API key or user token>")
	errForbidden    = service.Errorf(service.CodePermissionDenied, "this credential may not use this route")
)

// authenticate resolves every request's credential to its access before
// the handler runs, and refuses routes the credential may not use. Health
// checks and the OpenAPI document stay open. Without an Authenticator (dev mode) every request acts
// as DevCaller with admin rights, rate limited per remote address.
func (a *api) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		route := c.Path()
		if route == "/healthz" || route == "/readyz" || route == MetricsPath || route == OpenAPIPath || isUIPublic(c) {
			return next(c)
		}
		acc, err := a.resolveAccess(c)
		if err != nil {
			if service.AsError(err).Status == service.CodeUnauthenticated {
				if isUIPage(c) {
					// A dashboard page without a session: sign in first.
					return c.Redirect(http.StatusSeeOther, "/ui/login")
				}
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="holdpoint"`)
			}
			return err
		}
		if acc.ui != nil {
			if err := checkUIWrite(c, acc.ui); err != nil {
				return err
			}
		}
		if acc.level < levelAdmin && !a.isProtocolRoute(route) {
			return errForbidden
		}
		// X-End-User narrows what a key (or dev mode) sees to one end
		// user's sessions; a user token is that user already.
		if user := c.Request().Header.Values(HeaderEndUser); len(user) > 0 {
			if len(user) > 1 {
				return invalid("%s must be sent once", HeaderEndUser)
			}
			if err := auth.ValidateEndUser(user[0]); err != nil {
				return invalid("%s must be 1-%d bytes of printable characters", HeaderEndUser, auth.MaxEndUserBytes)
			}
			if acc.userToken && user[0] != acc.caller.EndUser {
				return service.Errorf(service.CodePermissionDenied, "a user token acts for its own user only; %s names another", HeaderEndUser)
			}
			acc.caller.EndUser = user[0]
		}
		c.Set(contextAccess, acc)
		return next(c)
	}
}

// resolveAccess authenticates the request's bearer credential: an API key
// (prefix hp_) or else a user token.
func (a *api) resolveAccess(c echo.Context) (*access, error) {
	if a.opts.Auth == nil {
		return &access{caller: DevCaller, level: levelAdmin, rateKey: "ip:" + remoteHost(c)}, nil
	}
	if len(c.Request().Header.Values(echo.HeaderAuthorization)) == 0 && isUIRoute(c) {
		if cookie, err := c.Cookie(uiCookie); err == nil {
			s, err := a.opts.Auth.UISession(c.Request().Context(), cookie.Value)
			if err != nil {
				return nil, err
			}
			return &access{caller: keyCaller(s.TenantID, s.KeyID, s.KeyName, s.Scopes), level: levelAdmin,
				rateKey: "key:" + s.KeyID.String(), ui: s, uiToken: cookie.Value}, nil
		}
	}
	cred, ok := bearer(c.Request().Header.Values(echo.HeaderAuthorization))
	if !ok {
		return nil, errNoCredential
	}
	ctx := c.Request().Context()
	if strings.HasPrefix(cred, tenants.KeyPrefix) {
		p, err := a.opts.Auth.Authenticate(ctx, cred)
		if err != nil {
			return nil, err
		}
		level := levelProtocol
		if p.Role == tenants.RoleAdmin {
			level = levelAdmin
		}
		return &access{
			caller:  keyCaller(p.TenantID, p.KeyID, p.KeyName, p.Scopes),
			level:   level,
			rateKey: "key:" + p.KeyID.String(),
		}, nil
	}
	caller, err := a.opts.Auth.VerifyUserToken(ctx, cred)
	if err != nil {
		return nil, err
	}
	return &access{
		caller:    caller,
		level:     levelProtocol,
		rateKey:   "user:" + caller.TenantID + "\x00" + caller.EndUser,
		userToken: true,
	}, nil
}

// keyCaller is the caller of an API key, or of a dashboard session of one:
// the same key is the same caller, and the same actor, either way.
func keyCaller(tenantID string, keyID uuid.UUID, name string, scopes []string) service.Caller {
	id := keyID.String()
	return service.Caller{TenantID: tenantID, Actor: service.ActorOfKey(id, name), KeyID: id, KeyName: name, Scopes: scopes}
}

// bearer extracts the credential of a single "Authorization: Bearer X"
// header.
func bearer(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(values[0]), " ")
	cred = strings.TrimSpace(cred)
	if !ok || !strings.EqualFold(scheme, "Bearer") || cred == "" {
		return "", false
	}
	// Keys and tokens are printable ASCII; anything else (a header may
	// carry any byte above 0x7f) is no credential and never reaches a
	// lookup.
	for i := 0; i < len(cred); i++ {
		if cred[i] <= ' ' || cred[i] >= 0x7f {
			return "", false
		}
	}
	return cred, true
}

// isProtocolRoute reports whether route (the matched route pattern) is one
// of the agent protocol routes, which client keys and user tokens may use.
// The patterns are matched exactly, not by prefix, so that a base path such
// as /api cannot open /api/v1 to them.
func (a *api) isProtocolRoute(route string) bool {
	base := a.opts.BasePath
	switch route {
	case base, base + "/:agent", base + "/:agent/getSnapshot", base + "/:agent/abort":
		return true
	case "/api/v1/interrupts/:id/outcome":
		// A client learns how its decision ended without the admin API.
		return true
	}
	return false
}

// accessOf returns the access the middleware stored on the request.
func accessOf(c echo.Context) (*access, bool) {
	acc, ok := c.Get(contextAccess).(*access)
	return acc, ok
}

// callerFromAccess is the Options.Caller of a server with authentication:
// the caller the middleware resolved.
func callerFromAccess(c echo.Context) (service.Caller, error) {
	acc, ok := accessOf(c)
	if !ok {
		// A route the middleware left open has no caller; reaching here
		// means a route was added without thinking about access.
		return service.Caller{}, fmt.Errorf("no caller resolved for route %s", c.Path())
	}
	return acc.caller, nil
}

// remoteHost is the address the connection came from (never a forwarding
// header, which the client controls).
func remoteHost(c echo.Context) string {
	host, _, err := net.SplitHostPort(c.Request().RemoteAddr)
	if err != nil {
		return c.Request().RemoteAddr
	}
	return host
}

// mintTokenRequest is the body of POST /api/v1/tokens.
type mintTokenRequest struct {
	UserID     string `json:"userId"`
	TTLSeconds int64  `json:"ttlSeconds"`
}

// mintToken signs a user token for an end user of the caller's tenant:
// POST /api/v1/tokens (admin keys).
func (a *api) mintToken(c echo.Context) error {
	var req mintTokenRequest
	caller, err := a.beginTokens(c, &req, `{"userId": ..., "ttlSeconds": ...}`)
	if err != nil {
		return err
	}
	if req.UserID == "" {
		return invalid("userId is required")
	}
	maxTTL := int64(tenants.MaxTokenTTL / time.Second)
	if req.TTLSeconds < 0 || req.TTLSeconds > maxTTL {
		return invalid("ttlSeconds must be between 1 and %d (0 or absent: %d)", maxTTL, int64(tenants.DefaultTokenTTL/time.Second))
	}
	tok, err := a.opts.Auth.MintUserToken(c.Request().Context(), caller.TenantID, req.UserID, time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		return err
	}
	return writeJSON(c, tok)
}

// revokeTokensRequest is the body of POST /api/v1/tokens/revoke: exactly
// one of tokenId (one token) and userId (every token of that user so far).
type revokeTokensRequest struct {
	TokenID string `json:"tokenId"`
	UserID  string `json:"userId"`
}

// revokeTokens refuses user tokens of the caller's tenant from now on, on
// every instance: POST /api/v1/tokens/revoke (admin keys).
func (a *api) revokeTokens(c echo.Context) error {
	var req revokeTokensRequest
	caller, err := a.beginTokens(c, &req, `{"tokenId": ...} or {"userId": ...}`)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	switch {
	case (req.TokenID == "") == (req.UserID == ""):
		return invalid("send exactly one of tokenId and userId")
	case req.TokenID != "":
		err = a.opts.Auth.RevokeUserToken(ctx, caller.TenantID, req.TokenID)
	default:
		err = a.opts.Auth.RevokeEndUserTokens(ctx, caller.TenantID, req.UserID)
	}
	if err != nil {
		return err
	}
	return writeJSON(c, map[string]string{"status": "revoked"})
}

// beginTokens does what the token routes start with: resolve the caller,
// refuse dev mode (no tokens without authentication), and decode the body
// (whose shape want names) into dst.
func (a *api) beginTokens(c echo.Context, dst any, want string) (service.Caller, error) {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return caller, err
	}
	if a.opts.Auth == nil {
		return caller, service.Errorf(service.CodeFailedPrecondition, "user tokens need authentication, which dev mode turns off")
	}
	present, err := decodeBody(c, dst, want, false)
	if err == nil && !present {
		err = invalid("request body is empty: expected a JSON object %s", want)
	}
	return caller, err
}
