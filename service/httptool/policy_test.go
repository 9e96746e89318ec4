package httptool_test

import (
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/service/httptool"
)

func TestCheckURL(t *testing.T) {
	t.Parallel()
	dev := httptool.Policy{AllowLoopback: true}
	tests := []struct {
		url    string
		policy httptool.Policy
		want   string // "" when allowed, else a part of the error
	}{
		{"https://tools.acme.com/hook", httptool.Policy{}, ""},
		{"https://tools.acme.com:8443/hook?x=1", httptool.Policy{}, ""},
		{"HTTPS://Tools.Acme.COM/hook", httptool.Policy{}, ""},
		{"https://93.184.216.34/hook", httptool.Policy{}, ""},
		{"https://[2606:2800:220:1:248:1893:25c8:1946]/hook", httptool.Policy{}, ""},
		{"http://tools.acme.com/hook", httptool.Policy{}, "must use https"},
		{"http://tools.acme.com/hook", dev, "must use https"},
		{"http://93.184.216.34/hook", dev, "must use https"},
		{"ftp://tools.acme.com/hook", httptool.Policy{}, "must use https"},
		{"//tools.acme.com/hook", httptool.Policy{}, "must be absolute"},
		{"/hook", httptool.Policy{}, "must be absolute"},
		{"https:tools.acme.com", httptool.Policy{}, "must be absolute"},
		{"https://user:pass@tools.acme.com/hook", httptool.Policy{}, "userinfo"},
		{"https://user@tools.acme.com/hook", httptool.Policy{}, "userinfo"},
		{"https://tools.acme.com/hook#frag", httptool.Policy{}, "fragment"},
		{"https://tools.acme.com/hook#", httptool.Policy{}, "fragment"},
		{"https:///hook", httptool.Policy{}, "no host"},
		{"https://:443/hook", httptool.Policy{}, "no host"},
		{"https://tools.acme.com:0/hook", httptool.Policy{}, "port"},
		{"https://tools.acme.com:70000/hook", httptool.Policy{}, "port"},
		{"https://tools.acme.com:/hook", httptool.Policy{}, "empty port"},
		{"https://tools acme.com/hook", httptool.Policy{}, "not a valid"},
		{"https://tools_acme!.com/hook", httptool.Policy{}, "not a valid host name"},
		{"https://2130706433/hook", httptool.Policy{}, "non-standard IP"},
		{"https://127.1/hook", httptool.Policy{}, "non-standard IP"},
		{"https://0x7f.1/hook", httptool.Policy{}, "non-standard IP"},
		{"https://10.0.0.1/hook", httptool.Policy{}, "host 10.0.0.1 is a private address"},
		{"https://172.16.5.5/hook", httptool.Policy{}, "host 172.16.5.5 is a private address"},
		{"https://192.168.1.1/hook", httptool.Policy{}, "host 192.168.1.1 is a private address"},
		{"https://127.0.0.1/hook", httptool.Policy{}, "host 127.0.0.1 is a loopback address"},
		{"https://[::1]/hook", httptool.Policy{}, "host ::1 is a loopback address"},
		{"https://169.254.169.254/latest/meta-data", httptool.Policy{}, "link-local address"},
		{"https://[fe80::1]/hook", httptool.Policy{}, "link-local address"},
		{"https://[fe80::1%25eth0]/hook", httptool.Policy{}, "zone"},
		{"https://[fc00::1]/hook", httptool.Policy{}, "unique local address"},
		{"https://[fd12:3456::1]/hook", httptool.Policy{}, "unique local address"},
		{"https://[::ffff:127.0.0.1]/hook", httptool.Policy{}, "loopback address"},
		{"https://[::ffff:10.0.0.1]/hook", httptool.Policy{}, "private address"},
		{"https://[64:ff9b::a00:1]/hook", httptool.Policy{}, "private address"},
		{"https://[64:ff9b::5db8:d822]/hook", httptool.Policy{}, ""},
		{"https://[2002:a00:1::1]/hook", httptool.Policy{}, "private address"},
		{"https://100.64.0.1/hook", httptool.Policy{}, "CGNAT"},
		{"https://0.0.0.0/hook", httptool.Policy{}, "unspecified address"},
		{"https://[::]/hook", httptool.Policy{}, "unspecified address"},
		{"https://224.0.0.1/hook", httptool.Policy{}, "multicast address"},
		{"https://255.255.255.255/hook", httptool.Policy{}, "broadcast address"},
		{"https://[ff02::1]/hook", httptool.Policy{}, "multicast address"},
		// Loopback only with AllowLoopback, where plain http is fine too.
		{"https://127.0.0.1:8080/hook", dev, ""},
		{"http://127.0.0.1:8080/hook", dev, ""},
		{"http://127.9.9.9/hook", dev, ""},
		{"http://[::1]:8080/hook", dev, ""},
		{"http://localhost:8080/hook", dev, ""},
		{"http://[::ffff:127.0.0.1]:8080/hook", dev, ""},
		{"http://localhost:8080/hook", httptool.Policy{}, "must use https"},
		{"https://10.0.0.1/hook", dev, "private address"},
		{"https://0.0.0.0/hook", dev, "unspecified address"},
		// AllowedHosts.
		{"https://10.1.2.3/hook", httptool.Policy{AllowedHosts: []string{"10.1.2.0/24"}}, ""},
		{"https://[::ffff:10.1.2.3]/hook", httptool.Policy{AllowedHosts: []string{"10.1.2.0/24"}}, ""},
		{"https://10.1.3.3/hook", httptool.Policy{AllowedHosts: []string{"10.1.2.0/24"}}, "private address"},
		{"https://10.1.2.3/hook", httptool.Policy{AllowedHosts: []string{"10.1.2.3"}}, ""},
		{"http://10.1.2.3/hook", httptool.Policy{AllowLoopback: true, AllowedHosts: []string{"10.1.2.0/24"}}, "must use https"},
		{"https://[fd00::5]/hook", httptool.Policy{AllowedHosts: []string{"fd00::/64"}}, ""},
		{"https://169.254.169.254/hook", httptool.Policy{AllowedHosts: []string{"169.254.0.0/16"}}, ""},
		{"https://127.0.0.1/hook", httptool.Policy{AllowedHosts: []string{"127.0.0.0/8"}}, "loopback address"},
		{"https://0.0.0.0/hook", httptool.Policy{AllowedHosts: []string{"0.0.0.0/0"}}, "unspecified address"},
		{"https://internal.example/hook", httptool.Policy{AllowedHosts: []string{"internal.example"}}, ""},
		{"http://internal.example/hook", httptool.Policy{AllowedHosts: []string{"internal.example"}}, "must use https"},
		{"https://tools.acme.com/hook", httptool.Policy{AllowedHosts: []string{"10.0.0.0/33"}}, "invalid AllowedHosts entry"},
		{"https://tools.acme.com/hook", httptool.Policy{AllowedHosts: []string{"not a host"}}, "invalid AllowedHosts entry"},
		{"::not a url", httptool.Policy{}, "not a valid URL"},
	}
	for _, tt := range tests {
		err := httptool.CheckURL(tt.url, tt.policy)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckURL(%q, %+v) = %v, want nil", tt.url, tt.policy, err)
		case tt.want != "" && err == nil:
			t.Errorf("CheckURL(%q, %+v) = nil, want an error containing %q", tt.url, tt.policy, tt.want)
		case tt.want != "" && !strings.Contains(err.Error(), tt.want):
			t.Errorf("CheckURL(%q, %+v) = %v, want an error containing %q", tt.url, tt.policy, err, tt.want)
		}
	}
}

// TestCheckURLMessages pins the messages the brief names.
func TestCheckURLMessages(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"http://tools.acme.com/hook": "tool URL must use https",
		"https://10.0.0.5/hook":      "tool URL host 10.0.0.5 is a private address",
	} {
		if err := httptool.CheckURL(url, httptool.Policy{}); err == nil || err.Error() != want {
			t.Errorf("CheckURL(%q) = %v, want %q", url, err, want)
		}
	}
}

// TestLoopbackRefused: only refusals that AllowLoopback would lift say so,
// for the caller to name its own switch.
func TestLoopbackRefused(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://127.0.0.1/hook", true},
		{"http://127.0.0.1:8090/hook", true},
		{"https://[::1]/hook", true},
		{"http://localhost:8080/hook", true},
		{"https://10.0.0.5/hook", false},
		{"http://tools.acme.com/hook", false},
		{"ftp://127.0.0.1/hook", false},
	} {
		err := httptool.CheckURL(tc.url, httptool.Policy{})
		if err == nil || httptool.LoopbackRefused(err) != tc.want {
			t.Errorf("%s: %v, LoopbackRefused = %v, want %v", tc.url, err, httptool.LoopbackRefused(err), tc.want)
		}
		if err := httptool.CheckURL(tc.url, httptool.Policy{AllowLoopback: true}); tc.want && err != nil {
			t.Errorf("%s with AllowLoopback: %v", tc.url, err)
		}
	}
}
