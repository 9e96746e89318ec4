// Package cluster holds process-level tests of durable detached turns: real
// `platform serve --dev` processes sharing one PostgreSQL database, killed,
// stopped and cut off from their database while they work.
//
// The tests need DATABASE_URL (an admin URL, as for internal/testdb) and the
// Go toolchain (TestMain builds cmd/platform). The Postgres restart test also
// needs the PostgreSQL server binaries (initdb, pg_ctl) to start a private
// cluster; it never restarts the shared server. The failover test starts
// two (a primary and a streaming replica made with pg_basebackup, also in
// the server binaries' directory) and, like the pooler test, fails under CI
// without them. The pooler test needs
// PgBouncer (apt-get install -y pgbouncer), which it starts itself on a free
// loopback port (as user nobody when run as root); without it, it skips,
// and fails under CI. The chaos run (chaos_test.go) needs both, and fails
// under CI without them too. Run them with
//
//	go test ./tests/cluster -count=1 -v
//
// -v shows the measured figures (abort latency, takeover time, turn counts).
//
// It reaches the server only through its processes and HTTP: of this module
// it imports internal/testdb, and service and service/demo for their types
// and names, never the runtime's store.
package cluster
