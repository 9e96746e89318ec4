package httptool

import (
	"strings"
	"sync"
)

// maxPolicies bounds the clients a Clients keeps; past it they are all
// dropped (and rebuilt on demand).
const maxPolicies = 1000

// Clients hands out one Client per Policy, each with Base's settings, so
// the calls of one policy (one tenant's allowed hosts) share a transport
// and its pooled connections. Its zero value is usable (default
// settings); Base must not change once it is in use. Safe for concurrent
// use.
type Clients struct {
	// Base carries the settings every client gets (Resolver, MaxBody,
	// Attempts, Backoff, Now, RootCAs, IdleConnsPerHost); its Policy is not
	// used. Nil means the defaults.
	Base *Client

	mu       sync.Mutex
	byPolicy map[string]*Client
}

// For returns the client of a policy.
func (cs *Clients) For(p Policy) *Client {
	var key strings.Builder
	if p.AllowLoopback {
		key.WriteString("loopback")
	}
	for _, h := range p.AllowedHosts {
		key.WriteByte(',')
		key.WriteString(h)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.byPolicy[key.String()]; ok {
		return c
	}
	c := &Client{Policy: p}
	if b := cs.Base; b != nil {
		c.Resolver, c.MaxBody, c.Attempts, c.Backoff = b.Resolver, b.MaxBody, b.Attempts, b.Backoff
		c.Now, c.RootCAs, c.IdleConnsPerHost = b.Now, b.RootCAs, b.IdleConnsPerHost
	}
	if cs.byPolicy == nil || len(cs.byPolicy) >= maxPolicies {
		cs.byPolicy = map[string]*Client{}
	}
	cs.byPolicy[key.String()] = c
	return c
}
