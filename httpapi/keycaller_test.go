package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// keyAuth authenticates one API key and one dashboard session of it.
type keyAuth struct {
	Authenticator
	principal *tenants.Principal
	session   *service.UISession
}

func (k keyAuth) Authenticate(context.Context, string) (*tenants.Principal, error) {
	return k.principal, nil
}

func (k keyAuth) UISession(context.Context, string) (*service.UISession, error) {
	return k.session, nil
}

// TestKeyCallerIsTheSameThroughAPIAndDashboard checks that a key's
// requests and its dashboard session's resolve to the same caller: the
// key's id, name and scopes, and ActorOfKey; and that dev mode holds every
// scope.
func TestKeyCallerIsTheSameThroughAPIAndDashboard(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	scopes := []string{"approve:payments", "refunds"}
	auth := keyAuth{
		principal: &tenants.Principal{TenantID: "acme", KeyID: id, KeyName: "ops", Role: tenants.RoleAdmin, Scopes: scopes},
		session:   &service.UISession{TenantID: "acme", KeyID: id, KeyName: "ops", Scopes: scopes, Actor: "key:ops"},
	}
	want := service.Caller{TenantID: "acme", Actor: "key:ops/" + id.String(), KeyID: id.String(), KeyName: "ops", Scopes: scopes}
	resolve := func(a *api, setup func(*http.Request)) service.Caller {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/interrupts", nil)
		setup(req)
		c := echo.New().NewContext(req, httptest.NewRecorder())
		c.SetPath("/api/v1/interrupts")
		acc, err := a.resolveAccess(c)
		if err != nil {
			t.Fatal(err)
		}
		return acc.caller
	}
	a := &api{opts: Options{Auth: auth}}
	viaKey := resolve(a, func(r *http.Request) { r.Header.Set("Authorization", "Bearer hp_anything") })
	viaUI := resolve(a, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: uiCookie, Value: "token"}) })
	for name, got := range map[string]service.Caller{"API key": viaKey, "dashboard session": viaUI} {
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: caller %+v, want %+v", name, got, want)
		}
		if !got.HasScope("approve:payments") || got.HasScope("approve:wires") {
			t.Errorf("%s: scopes %v", name, got.Scopes)
		}
	}

	// A key without a name is its id.
	auth.principal = &tenants.Principal{TenantID: "acme", KeyID: id, Role: tenants.RoleClient}
	a = &api{opts: Options{Auth: auth}}
	if got := resolve(a, func(r *http.Request) { r.Header.Set("Authorization", "Bearer hp_x") }); got.Actor != "key:"+id.String() || got.KeyName != "" || len(got.Scopes) != 0 {
		t.Errorf("unnamed key: caller %+v", got)
	}

	dev := resolve(&api{}, func(*http.Request) {})
	if dev.KeyName != "dev" || dev.Actor != "dev" || !dev.HasScope("approve:anything") {
		t.Errorf("dev caller %+v, want every scope", dev)
	}
}
