package httptool

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Policy says which tool URLs a tenant may call.
//
// Loopback is special: only AllowLoopback allows it, an AllowedHosts entry
// never does (not even a CIDR covering 127.0.0.0/8). Unspecified (0.0.0.0/8,
// ::), multicast and broadcast addresses are never allowed. A link-local
// address (169.254.0.0/16, fe80::/10, where cloud metadata services live) is
// allowed only by a CIDR covering it, not by a host name.
type Policy struct {
	// AllowLoopback permits http(s)://127.0.0.0/8, [::1], localhost (serve
	// --dev or an explicit serve flag; tests). Only with it may a tool URL use
	// plain http, and only for a loopback host: a literal loopback address or
	// "localhost" (CheckURL), or a name that resolves to loopback addresses
	// only (Client.Do).
	AllowLoopback bool
	// AllowedHosts are hosts (exact names, lower case) or CIDRs (e.g.
	// "10.1.2.0/24"; a bare address counts as a single-address CIDR) the
	// operator allowed this tenant even though they resolve to non-public
	// addresses. They must still use https. A malformed entry makes every URL
	// fail the check.
	AllowedHosts []string
}

// refusedError is a URL or an address the policy does not allow, or a
// redirect: a KindRefused failure, never retried.
type refusedError struct {
	msg string
	// loopback: the URL or address is on this machine, which only
	// AllowLoopback allows.
	loopback bool
}

func (e *refusedError) Error() string { return e.msg }

// LoopbackRefused reports whether err refuses a URL or an address only
// because it is on this machine (a loopback host), which Policy's
// AllowLoopback would allow: the caller can then name its own switch.
func LoopbackRefused(err error) bool {
	var r *refusedError
	return errors.As(err, &r) && r.loopback
}

// refuseLoopback is refusef for a loopback host AllowLoopback would allow.
func refuseLoopback(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...), loopback: true}
}

func refusef(format string, args ...any) error {
	return &refusedError{msg: fmt.Sprintf(format, args...)}
}

// addrClass is what kind of address an IP is, as far as reaching it from the
// platform goes.
type addrClass int

const (
	classPublic addrClass = iota
	classLoopback
	classUnspecified
	classPrivate
	classLinkLocal
	classUniqueLocal
	classCGNAT
	classMulticast
	classBroadcast
	classReserved
)

// describe names the class with its article, as the error messages use it.
func (c addrClass) describe() string {
	switch c {
	case classPublic:
		return "a public address"
	case classLoopback:
		return "a loopback address"
	case classUnspecified:
		return "an unspecified address"
	case classPrivate:
		return "a private address"
	case classLinkLocal:
		return "a link-local address"
	case classUniqueLocal:
		return "a unique local address"
	case classCGNAT:
		return "a shared (CGNAT) address"
	case classMulticast:
		return "a multicast address"
	case classBroadcast:
		return "a broadcast address"
	default:
		return "a reserved address"
	}
}

type prefixClass struct {
	prefix netip.Prefix
	class  addrClass
}

var v4Classes = []prefixClass{
	{netip.MustParsePrefix("0.0.0.0/8"), classUnspecified}, // "this network": 0.0.0.0 reaches the local host
	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), classCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), classReserved}, // IETF protocol assignments
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), classReserved}, // benchmarking
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},
	{netip.MustParsePrefix("255.255.255.255/32"), classBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved},
}

var (
	nat64         = netip.MustParsePrefix("64:ff9b::/96")   // well-known NAT64 prefix: the IPv4 address in the last 32 bits
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64 (RFC 8215): any embedding, so all of it is private
	v4Compatible  = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible addresses
	sixToFour     = netip.MustParsePrefix("2002::/16")      // 6to4: the IPv4 address in bits 16-47
	teredo        = netip.MustParsePrefix("2001::/32")      // Teredo: an obfuscated IPv4 address
	discardOnly   = netip.MustParsePrefix("100::/64")
	v6LinkLocal   = netip.MustParsePrefix("fe80::/10")
	v6SiteLocal   = netip.MustParsePrefix("fec0::/10") // deprecated site-local
	v6UniqueLocal = netip.MustParsePrefix("fc00::/7")
	v6Multicast   = netip.MustParsePrefix("ff00::/8")
)

// classify says what kind of address a is. IPv4 addresses embedded in IPv6
// ones (IPv4-mapped, NAT64, 6to4) are classified by the IPv4 address.
func classify(a netip.Addr) addrClass {
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		for _, pc := range v4Classes {
			if pc.prefix.Contains(a) {
				return pc.class
			}
		}
		return classPublic
	}
	b := a.As16()
	switch {
	case a == netip.IPv6Unspecified():
		return classUnspecified
	case a == netip.IPv6Loopback():
		return classLoopback
	case nat64.Contains(a):
		return classify(netip.AddrFrom4([4]byte(b[12:16])))
	case nat64Local.Contains(a):
		return classPrivate
	case v4Compatible.Contains(a), teredo.Contains(a), discardOnly.Contains(a):
		return classReserved
	case sixToFour.Contains(a):
		return classify(netip.AddrFrom4([4]byte(b[2:6])))
	case v6LinkLocal.Contains(a):
		return classLinkLocal
	case v6SiteLocal.Contains(a):
		return classPrivate
	case v6UniqueLocal.Contains(a):
		return classUniqueLocal
	case v6Multicast.Contains(a):
		return classMulticast
	}
	return classPublic
}

// policy is a Policy with its AllowedHosts parsed.
type policy struct {
	allowLoopback bool
	names         map[string]bool
	prefixes      []netip.Prefix
}

func parsePolicy(p Policy) (*policy, error) {
	pol := &policy{allowLoopback: p.AllowLoopback, names: map[string]bool{}}
	for _, h := range p.AllowedHosts {
		entry := strings.TrimSpace(h)
		if strings.Contains(entry, "/") {
			pfx, err := netip.ParsePrefix(entry)
			if err != nil {
				return nil, fmt.Errorf("tool URL policy: invalid AllowedHosts entry %q: %v", h, err)
			}
			pol.prefixes = append(pol.prefixes, pfx.Masked())
			continue
		}
		if a, err := netip.ParseAddr(entry); err == nil && a.Zone() == "" {
			pol.prefixes = append(pol.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		name := normalizeHost(entry)
		if !validHostName(name) {
			return nil, fmt.Errorf("tool URL policy: invalid AllowedHosts entry %q", h)
		}
		pol.names[name] = true
	}
	return pol, nil
}

// covered says whether an AllowedHosts CIDR covers a, or the IPv4 address a
// maps or translates to.
func (p *policy) covered(a netip.Addr) bool {
	a = a.WithZone("")
	cands := []netip.Addr{a}
	if a.Is4In6() {
		cands = append(cands, a.Unmap())
	} else if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		cands = append(cands, netip.AddrFrom4([4]byte(b[12:16])))
	}
	for _, pfx := range p.prefixes {
		for _, c := range cands {
			if pfx.Contains(c) {
				return true
			}
		}
	}
	return false
}

// allowed reports whether the policy lets host be reached at a, and the
// class a is of.
func (p *policy) allowed(host string, a netip.Addr) (addrClass, bool) {
	class := classify(a)
	switch class {
	case classPublic:
		return class, true
	case classLoopback:
		return class, p.allowLoopback
	case classUnspecified, classMulticast, classBroadcast:
		return class, false
	}
	if p.covered(a) {
		return class, true
	}
	if class != classLinkLocal && p.names[normalizeHost(host)] {
		return class, true
	}
	return class, false
}

// checkResolved refuses a, an address host resolved to (or the address the
// dialer is about to connect to), unless the policy allows it.
func (p *policy) checkResolved(host string, a netip.Addr) error {
	if class, ok := p.allowed(host, a); !ok {
		if class == classLoopback {
			return refuseLoopback("tool URL host %s resolves to %s, %s", host, a.Unmap(), class.describe())
		}
		return refusef("tool URL host %s resolves to %s, %s", host, a.Unmap(), class.describe())
	}
	return nil
}

// CheckURL validates a tool URL statically (at definition time): absolute,
// https (http only for a loopback host when AllowLoopback), no userinfo, no
// fragment, port optional, host not empty; an IP-literal host must be public
// unless allowed (loopback only with AllowLoopback; or covered by an
// AllowedHosts CIDR). Returns an error whose message names what is wrong
// (e.g. `tool URL must use https`, `tool URL host 10.0.0.5 is a private
// address`).
//
// Only a literal loopback address and "localhost" count as loopback hosts
// for plain http here; Client.Do also lets a name that resolves to loopback
// addresses only use http when AllowLoopback. Host names that look like
// numeric IPv4 forms other than dotted quads ("2130706433", "0x7f.1",
// "127.1") are refused, as are IPv6 zones.
func CheckURL(raw string, p Policy) error {
	pol, err := parsePolicy(p)
	if err != nil {
		return err
	}
	_, err = pol.checkURL(raw, false)
	return err
}

// parsedURL is a tool URL that passed the static check.
type parsedURL struct {
	u    *url.URL
	host string     // lower case, without brackets or a trailing dot
	ip   netip.Addr // the host when it is an IP literal
}

// checkURL is CheckURL on a parsed policy. With forDo it lets a host name
// (not an IP literal) use http when the policy allows loopback: Do then
// requires the name to resolve to loopback addresses only.
func (p *policy) checkURL(raw string, forDo bool) (*parsedURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, refusef("tool URL is not a valid URL: %v", unwrapURLError(err))
	}
	if !u.IsAbs() || u.Opaque != "" {
		return nil, refusef("tool URL must be absolute")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, refusef("tool URL must use https")
	}
	if u.User != nil {
		return nil, refusef("tool URL must not carry userinfo")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, refusef("tool URL must not have a fragment")
	}
	if u.Host == "" || u.Hostname() == "" {
		return nil, refusef("tool URL has no host")
	}
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return nil, refusef("tool URL port %q is not valid", port)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, refusef("tool URL has an empty port")
	}
	pu := &parsedURL{u: u, host: normalizeHost(u.Hostname())}
	if a, err := netip.ParseAddr(pu.host); err == nil {
		if a.Zone() != "" {
			return nil, refusef("tool URL host %s must not have an IPv6 zone", u.Hostname())
		}
		pu.ip = a
		if class, ok := p.allowed(pu.host, a); !ok {
			if class == classLoopback {
				return nil, refuseLoopback("tool URL host %s is %s", pu.host, class.describe())
			}
			return nil, refusef("tool URL host %s is %s", pu.host, class.describe())
		}
	} else if strings.Contains(pu.host, ":") || strings.Contains(pu.host, "%") {
		return nil, refusef("tool URL host %q is not valid", u.Hostname())
	} else if !validHostName(pu.host) {
		return nil, refusef("tool URL host %q is not a valid host name", u.Hostname())
	} else if numericLastLabel(pu.host) {
		return nil, refusef("tool URL host %q looks like a non-standard IP address", u.Hostname())
	}
	if u.Scheme == "http" {
		loopback := pu.ip.IsValid() && classify(pu.ip) == classLoopback
		local := loopback || pu.host == "localhost"
		if !p.allowLoopback && local {
			return nil, refuseLoopback("tool URL must use https (plain http only to a loopback host, when loopback hosts are allowed)")
		}
		if !p.allowLoopback || !(local || (forDo && !pu.ip.IsValid())) {
			return nil, refusef("tool URL must use https")
		}
	}
	return pu, nil
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// normalizeHost lower-cases a host name and drops a trailing dot.
func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// validHostName accepts LDH labels (and underscores, which some internal
// names carry), each 1 to 63 characters, 253 in all.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// numericLastLabel says whether a host name ends in a label that a URL
// parser or getaddrinfo may read as part of an IPv4 address (decimal, octal
// or hex), as in "2130706433", "127.1" or "0x7f.1".
func numericLastLabel(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		last = last[2:]
		for i := 0; i < len(last); i++ {
			c := last[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}
