package app

import (
	"net/url"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/internal/testdb"
)

// TestPoolSizeFromTheURL: pool_max_conns in DATABASE_URL (pgxpool's own
// setting) sizes the server's pool, and the commands that open connections
// of their own (migrate, the admin commands) leave it out of what they send
// PostgreSQL, which refused them ("unrecognized configuration parameter").
func TestPoolSizeFromTheURL(t *testing.T) {
	t.Parallel()
	admin := connect(t, testdb.URL(t))
	u, err := url.Parse(emptyDatabase(t, admin, ""))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "3")
	u.RawQuery = q.Encode()
	dbURL := u.String()
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "status"}, {"tenants", "list"}} {
		if code, _, errOut := runPlatform(t, dbURL, args...); code != 0 {
			t.Fatalf("platform %s with pool_max_conns in DATABASE_URL = %d:\n%s", strings.Join(args, " "), code, errOut)
		}
	}
	s := startServe(t, dbURL, "--demo", "--migrate=false")
	if log := s.log(); !strings.Contains(log, "max_conns=3 ") {
		t.Errorf("serve with pool_max_conns=3 did not log a pool of 3:\n%s", log)
	}
}
