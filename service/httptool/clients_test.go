package httptool_test

import (
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/service/httptool"
)

func TestClientsOnePerPolicy(t *testing.T) {
	var cs httptool.Clients
	cs.Base = &httptool.Client{Attempts: 1, MaxBody: 42, Backoff: time.Second, IdleConnsPerHost: 9}
	a := cs.For(httptool.Policy{AllowedHosts: []string{"a.example"}})
	if again := cs.For(httptool.Policy{AllowedHosts: []string{"a.example"}}); again != a {
		t.Error("the same policy got a second client")
	}
	for _, p := range []httptool.Policy{{}, {AllowLoopback: true, AllowedHosts: []string{"a.example"}}, {AllowedHosts: []string{"a.example", "b.example"}}} {
		if cs.For(p) == a {
			t.Errorf("policy %+v shares the client of another policy", p)
		}
	}
	if a.Attempts != 1 || a.MaxBody != 42 || a.Backoff != time.Second || a.IdleConnsPerHost != 9 || a.Policy.AllowedHosts[0] != "a.example" {
		t.Errorf("client settings %+v", a)
	}
	var zero httptool.Clients
	if c := zero.For(httptool.Policy{}); c == nil || c.Attempts != 0 {
		t.Errorf("zero Clients gave %+v", c)
	}
}
