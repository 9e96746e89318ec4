package app

import (
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/holdpoint/holdpoint/httpapi"
)

// startupURLs are where a server that has just started is reached.
type startupURLs struct {
	// Protocol is the base URL of the agents (append an agent's name).
	Protocol string
	// UI is the dashboard (the approvals inbox).
	UI string
	// Metrics is the Prometheus endpoint; MetricsNote says who may read it.
	Metrics, MetricsNote string
}

// newStartupURLs are the URLs of a server listening on main, with its
// metrics on the separate listener metrics (host:port), or else on main
// if token (the metrics token is set), or else not served.
func newStartupURLs(main net.Addr, metrics string, token bool) startupURLs {
	base := "http://" + reachable(main.String())
	u := startupURLs{
		Protocol: base + httpapi.DefaultBasePath + "/",
		UI:       base + "/ui/",
	}
	switch {
	case metrics != "":
		u.Metrics, u.MetricsNote = "http://"+reachable(metrics)+httpapi.MetricsPath, "separate listener"
	case token:
		u.Metrics, u.MetricsNote = base+httpapi.MetricsPath, "metrics token required"
	default:
		u.Metrics, u.MetricsNote = "off", "set --metrics-addr or --metrics-token"
	}
	return u
}

// reachable is a listener's address as a client on this machine dials it:
// a listener on every interface (0.0.0.0, ::) is reached on loopback.
func reachable(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// logArgs are the URLs as attributes of the start-up log line.
func (u startupURLs) logArgs() []any {
	return []any{"url", u.Protocol, "ui", u.UI, "metrics", u.Metrics}
}

// print writes the URLs for a person (serve --dev, on stderr).
// summary counts the agents served ("serving 3 built-in agents and 2
// tenant agents").
func (u startupURLs) print(w io.Writer, agents []string, summary string) {
	var b strings.Builder
	b.WriteString("\n  Holdpoint is running (--dev: no authentication)\n\n")
	fmt.Fprintf(&b, "  Agents     %s{name}", u.Protocol)
	if len(agents) > 0 {
		fmt.Fprintf(&b, "   (%s)", strings.Join(agents, ", "))
	}
	fmt.Fprintf(&b, "\n             %s\n", summary)
	fmt.Fprintf(&b, "  Dashboard  %s\n", u.UI)
	fmt.Fprintf(&b, "  Metrics    %s   (%s)\n\n", u.Metrics, u.MetricsNote)
	_, _ = io.WriteString(w, b.String())
}
