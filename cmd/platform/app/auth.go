package app

import (
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/holdpoint/holdpoint/httpapi"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/tenants"
)

// accessConfig is what the serve flags chose about who may call and how
// much.
type accessConfig struct {
	// maxBody bounds a request body in bytes.
	maxBody int64
	// rateLimit and rateBurst are the token bucket of one credential.
	rateLimit float64
	rateBurst int
	// ipRateLimit and ipRateBurst are the token bucket of one remote
	// address, checked before credentials.
	ipRateLimit float64
	ipRateBurst int
	// bodyTimeout is how long a client has to send a request body.
	bodyTimeout time.Duration
	// maxEventStreams bounds the live event streams of one credential.
	maxEventStreams int
	// demo registers the demo agents without --dev.
	demo bool
	// devAnyAddr lets --dev listen on a non-loopback address.
	devAnyAddr bool
	// loopbackTools lets tenants' HTTP tools call this machine.
	loopbackTools bool
	// trustedProxies are the reverse proxies whose X-Forwarded-Proto is
	// believed.
	trustedProxies proxyRanges
}

// register adds the access flags to fs.
func (a *accessConfig) register(fs *flag.FlagSet) {
	fs.Int64Var(&a.maxBody, "max-body", httpapi.DefaultBodyLimit, "largest request body accepted, in bytes")
	fs.Float64Var(&a.rateLimit, "rate-limit", httpapi.DefaultRateLimit, "requests per second one API key or user token may send (one remote address with --dev); 0 turns the limit off")
	fs.IntVar(&a.rateBurst, "rate-burst", httpapi.DefaultRateBurst, "requests one credential may send at once above --rate-limit")
	fs.Float64Var(&a.ipRateLimit, "ip-rate-limit", httpapi.DefaultIPRateLimit, "requests per second one remote address (IPv6: one /64) may send, counted before credentials are checked (not with --dev, where --rate-limit counts per address); health checks are exempt; 0 turns the limit off, as it must be behind a proxy whose address every request shares")
	fs.IntVar(&a.ipRateBurst, "ip-rate-burst", httpapi.DefaultIPRateBurst, "requests one remote address may send at once above --ip-rate-limit")
	fs.DurationVar(&a.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "time a client has, from the start of a request, to send its body; a slower one gets 408 and its connection is closed")
	fs.IntVar(&a.maxEventStreams, "max-event-streams", httpapi.DefaultMaxEventStreams, "live event streams (GET /api/v1/events) one credential may hold open at once; 0 turns the limit off")
	fs.BoolVar(&a.demo, "demo", false, "register the demo agents (bankingAgent, paymentsAgent) without --dev")
	fs.BoolVar(&a.loopbackTools, "allow-loopback-tools", false, "let tenants' HTTP tools call loopback addresses (always on with --dev): for tests and a receiver on this machine")
	fs.Var(&a.trustedProxies, "trusted-proxies", "addresses or CIDR ranges (comma-separated, e.g. 10.0.0.5,fd00::/8) of the reverse proxies in front of the server: "+
		"only from them is X-Forwarded-Proto believed, which makes the dashboard's cookies Secure and its Origin checks expect https; unset: the scheme is the connection's own")
	fs.BoolVar(&a.devAnyAddr, "dev-any-addr", false, "let --dev listen on a non-loopback address, e.g. inside a container whose port is published on the host's loopback only; whoever reaches it acts as the default tenant's admin")
}

// check validates the access flags for the address and mode chosen.
func (a *accessConfig) check(addr string, dev bool) error {
	if a.maxBody <= 0 {
		return fmt.Errorf("--max-body must be positive")
	}
	if a.rateLimit < 0 || a.rateBurst < 0 {
		return fmt.Errorf("--rate-limit and --rate-burst must not be negative")
	}
	if a.ipRateLimit < 0 || a.ipRateBurst < 0 {
		return fmt.Errorf("--ip-rate-limit and --ip-rate-burst must not be negative")
	}
	if a.bodyTimeout <= 0 {
		return fmt.Errorf("--body-timeout must be positive")
	}
	if a.maxEventStreams < 0 {
		return fmt.Errorf("--max-event-streams must not be negative")
	}
	if dev && !a.devAnyAddr && !isLoopback(addr) {
		return fmt.Errorf("--dev turns authentication off, so it listens on a loopback address only (127.0.0.1, ::1 or localhost), not %q. "+
			"Without --dev every request needs an API key: see platform tenants create and platform keys create", addr)
	}
	return nil
}

// proxyRanges is the --trusted-proxies flag: addresses or CIDR ranges,
// comma-separated; a bare address is a range of one.
type proxyRanges []*net.IPNet

// String is the list as the flag takes it.
func (p *proxyRanges) String() string {
	if p == nil {
		return ""
	}
	s := make([]string, len(*p))
	for i, r := range *p {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// Set parses the whole list: a wrong item is a usage error, not a proxy
// left out.
func (p *proxyRanges) Set(v string) error {
	var out proxyRanges
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if ip := net.ParseIP(item); ip != nil {
			bits := 128
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, r, err := net.ParseCIDR(item)
		if err != nil {
			return fmt.Errorf("%q is neither an address nor a CIDR range", item)
		}
		out = append(out, r)
	}
	*p = out
	return nil
}

// isLoopback reports whether a listen address names a loopback interface.
// An empty host or 0.0.0.0 listens on every interface; a host name other
// than localhost is refused rather than resolved.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticator is what authenticates requests: the accounts over store,
// or none (nil) in dev mode.
func authenticator(dev bool, store service.TenantStore) httpapi.Authenticator {
	if dev {
		return nil
	}
	return tenants.New(store)
}
