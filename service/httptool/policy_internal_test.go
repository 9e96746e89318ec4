package httptool

import (
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := map[string]addrClass{
		"93.184.216.34":          classPublic,
		"192.0.2.1":              classPublic, // documentation: fine either way
		"2001:db8::1":            classPublic, // documentation: fine either way
		"2606:4700::1111":        classPublic,
		"100.128.0.1":            classPublic,
		"172.32.0.1":             classPublic,
		"0.0.0.0":                classUnspecified,
		"0.1.2.3":                classUnspecified,
		"::":                     classUnspecified,
		"10.0.0.1":               classPrivate,
		"172.16.5.5":             classPrivate,
		"172.31.255.255":         classPrivate,
		"192.168.1.1":            classPrivate,
		"fec0::1":                classPrivate,
		"100.64.0.1":             classCGNAT,
		"100.127.255.255":        classCGNAT,
		"127.0.0.1":              classLoopback,
		"127.255.0.1":            classLoopback,
		"::1":                    classLoopback,
		"169.254.169.254":        classLinkLocal,
		"fe80::1":                classLinkLocal,
		"fe80::1%eth0":           classLinkLocal,
		"fc00::1":                classUniqueLocal,
		"fdff:ffff::1":           classUniqueLocal,
		"224.0.0.1":              classMulticast,
		"ff02::1":                classMulticast,
		"255.255.255.255":        classBroadcast,
		"198.18.0.1":             classReserved,
		"192.0.0.8":              classReserved,
		"240.0.0.1":              classReserved,
		"100::1":                 classReserved,
		"::127.0.0.1":            classReserved, // deprecated IPv4-compatible
		"2001:0:4136:e378::1":    classReserved, // Teredo
		"::ffff:127.0.0.1":       classLoopback,
		"::ffff:10.0.0.1":        classPrivate,
		"::ffff:169.254.169.254": classLinkLocal,
		"::ffff:0.0.0.0":         classUnspecified,
		"::ffff:93.184.216.34":   classPublic,
		"64:ff9b::7f00:1":        classLoopback,
		"64:ff9b::a00:1":         classPrivate,
		"64:ff9b::a9fe:a9fe":     classLinkLocal,
		"64:ff9b::6440:1":        classCGNAT,
		"64:ff9b::5db8:d822":     classPublic,
		"64:ff9b:1::1":           classPrivate, // local-use NAT64
		"2002:7f00:1::1":         classLoopback,
		"2002:c0a8:101::1":       classPrivate,
		"2002:5db8:d822::1":      classPublic,
	}
	for s, want := range tests {
		a := netip.MustParseAddr(s)
		if got := classify(a); got != want {
			t.Errorf("classify(%s) = %s, want %s", s, got.describe(), want.describe())
		}
	}
}

// TestPolicyAllowed checks how AllowedHosts names and CIDRs allow the
// addresses a host resolves to, without dialing any of them.
func TestPolicyAllowed(t *testing.T) {
	t.Parallel()
	pol, err := parsePolicy(Policy{AllowedHosts: []string{"internal.example", "Billing.Example.", "10.9.0.0/16", "169.254.10.0/24"}})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := parsePolicy(Policy{AllowLoopback: true, AllowedHosts: []string{"internal.example"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pol  *policy
		host string
		addr string
		want bool
	}{
		{pol, "internal.example", "10.0.0.1", true},
		{pol, "INTERNAL.example.", "10.0.0.1", true},
		{pol, "billing.example", "192.168.1.1", true},
		{pol, "internal.example", "fd00::1", true},
		{pol, "internal.example", "100.64.0.1", true},
		{pol, "internal.example", "93.184.216.34", true},
		{pol, "internal.example", "127.0.0.1", false},          // never loopback without AllowLoopback
		{pol, "internal.example", "::ffff:127.0.0.1", false},   // nor mapped
		{pol, "internal.example", "169.254.169.254", false},    // link-local: only by CIDR
		{pol, "internal.example", "0.0.0.0", false},            // unspecified: never
		{pol, "internal.example", "224.0.0.1", false},          // multicast: never
		{pol, "other.example", "10.0.0.1", false},              // not an allowed name
		{pol, "other.example", "10.9.3.4", true},               // an allowed CIDR
		{pol, "other.example", "::ffff:10.9.3.4", true},        // mapped into it
		{pol, "other.example", "64:ff9b::a09:304", true},       // translated into it
		{pol, "other.example", "169.254.10.7", true},           // link-local by CIDR
		{pol, "other.example", "169.254.169.254", false},       // outside the CIDR
		{pol, "evil.example", "93.184.216.34", true},           // public
		{dev, "internal.example", "127.0.0.1", true},           // AllowLoopback
		{dev, "evil.example", "::1", true},                     // AllowLoopback, any name
		{dev, "evil.example", "10.0.0.1", false},               // but not private
		{dev, "internal.example", "10.0.0.1", true},            // unless allowed
		{dev, "internal.example", "0.0.0.0", false},            // never unspecified
		{dev, "internal.example", "::", false},                 // in either family
		{dev, "internal.example", "255.255.255.255", false},    // nor broadcast
		{dev, "internal.example", "64:ff9b::7f00:1", true},     // NAT64 loopback is loopback
		{pol, "internal.example", "64:ff9b::7f00:1", false},    // and refused without AllowLoopback
		{pol, "internal.example", "2002:7f00:1::1", false},     // 6to4 loopback too
		{pol, "internal.example", "64:ff9b::a9fe:a9fe", false}, // NAT64 metadata address
	}
	for _, tt := range tests {
		_, got := tt.pol.allowed(tt.host, netip.MustParseAddr(tt.addr))
		if got != tt.want {
			t.Errorf("allowed(%s, %s) with %+v = %v, want %v", tt.host, tt.addr, *tt.pol, got, tt.want)
		}
	}
}
