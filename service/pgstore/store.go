package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/internal/rawjson"
	"github.com/holdpoint/holdpoint/service/store"
)

// PgStore is the PostgreSQL Store.
type PgStore struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// closed stops the store's goroutine (the wake-up sender).
	closed    chan struct{}
	closeOnce sync.Once
	// cache keeps completed snapshots this instance wrote or read, with
	// their state, so the next turn of a conversation does not read back
	// the history the previous turn just wrote.
	cache *snapshotCache
	// heads keeps each session's head as this instance last wrote it, so
	// a turn that continues the session need not read it (see
	// CachedSessionHead).
	heads *headCache
	// stats keeps the turn tables' planner statistics (statsKeeper).
	stats *statsKeeper

	// acquireTimeout bounds the wait for a pooled connection (see
	// DefaultAcquireTimeout).
	acquireTimeout time.Duration

	notifyOnce sync.Once
	notifyCh   chan struct{}

	// listenConfig, when set, is where the LISTEN connections go instead
	// of the pool (ListenThrough); listenOff turns them off (DisableListen).
	listenConfig *pgx.ConnConfig
	listenOff    bool
}

// DefaultSnapshotCacheSize bounds the completed snapshots a store keeps in
// memory.
const DefaultSnapshotCacheSize = 4096

// New returns the store over pool (an application-role pool, see
// NewAppPool). Close stops its background work.
func New(pool *pgxpool.Pool) *PgStore {
	return &PgStore{pool: pool, q: db.New(pool), cache: newSnapshotCache(DefaultSnapshotCacheSize),
		heads: newHeadCache(DefaultSnapshotCacheSize), stats: newStatsKeeper(pool), closed: make(chan struct{}),
		acquireTimeout: DefaultAcquireTimeout}
}

// Close stops the store's background work; the pool is the caller's.
func (s *PgStore) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.stats.close()
	})
}

// SQLSTATEs WriteTurn raises to refuse a write as a whole.
const (
	// sqlstateSessionTaken: the session belongs to another end user or
	// agent (holdpoint_session_taken).
	sqlstateSessionTaken = "HP404"
	// sqlstateNotPending: a detached turn's pending snapshot was aborted
	// before its end was written (holdpoint_snapshot_not_pending).
	sqlstateNotPending = "HP409"
	// sqlstateClaimRefused: an interrupt the write claims is no longer
	// pending (holdpoint_claim_refused).
	sqlstateClaimRefused = "HP412"
	// sqlstateSessionMoved: the session's head is not the write's expected
	// head (holdpoint_session_moved).
	sqlstateSessionMoved = "HP428"
	// sqlstateTooManyPending: the write's interrupts would pass its
	// session's bound (holdpoint_too_many_pending).
	sqlstateTooManyPending = "HP429"
	// sqlstateTooManyJobs: a detached turn's tenant or actor has as many
	// jobs as its bound (holdpoint_turn_jobs_below).
	sqlstateTooManyJobs = "HP430"
	// sqlstateReadOnly (read_only_sql_transaction): a write reached a
	// server that takes none, a standby or a primary fenced in a failover.
	sqlstateReadOnly = "25006"
)

// translate is the one error translator at the store boundary.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstateSessionTaken:
			return store.ErrNotFound
		case sqlstateNotPending:
			return errNotPending
		case sqlstateClaimRefused:
			return errClaimRefused
		case sqlstateSessionMoved:
			return store.ErrSessionMoved
		case sqlstateTooManyPending:
			return store.ErrTooManyPending
		case sqlstateTooManyJobs:
			return store.ErrTooManyDetached
		case sqlstateReadOnly:
			// Wrapped whole, so that release sees it and drops the
			// connection; once only.
			if errors.Is(err, store.ErrUnavailable) {
				return err
			}
			return fmt.Errorf("%w: the database is read-only (a standby, or a primary being failed over): %w", store.ErrUnavailable, err)
		}
		if unavailableClass(pgErr.Code) {
			return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
		}
		return err
	}
	if lostConnection(err) {
		return fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	return err
}

// unavailableClass reports whether a SQLSTATE says the server cannot serve
// now rather than that the statement is wrong: class 08 (connection
// exception), 53 (insufficient resources: 53300 too_many_connections, for
// the cluster or for the role, out of memory or disk) and 57 (operator
// intervention: 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot
// connect now). Class 57's 57014 is a cancelled statement, which is the
// client's doing and stays what it is.
func unavailableClass(code string) bool {
	if code == "57014" || len(code) < 2 {
		return false
	}
	switch code[:2] {
	case "08", "53", "57":
		return true
	}
	return false
}

// lostConnection reports whether err is the database going away without
// a SQLSTATE: a refused or failed dial, a connection reset or cut short
// (EOF) mid-query, one pgx had already closed, or a connection attempt
// that failed.
func lostConnection(err error) bool {
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.As(err, &netErr) || pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &connErr)
}

// DefaultAcquireTimeout bounds how long a store call waits for a pooled
// connection. Past it the database is taken as unavailable (the pool is
// exhausted or every new connection hangs) and the caller is told to come
// back, instead of queueing behind a pool that may never free up.
const DefaultAcquireTimeout = 10 * time.Second

// SetAcquireTimeout changes the acquire bound (see DefaultAcquireTimeout);
// call it before the store is used.
func (s *PgStore) SetAcquireTimeout(d time.Duration) {
	if d > 0 {
		s.acquireTimeout = d
	}
}

// acquire takes a pooled connection within the acquire bound. A wait that
// ends in a deadline, the bound's or the caller's, is the database being
// unavailable: nothing was sent. A cancelled caller gets its own error.
func (s *PgStore) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(actx)
	if err == nil {
		return conn, nil
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, ctx.Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("%w: no database connection within %s (pool %d/%d in use)", store.ErrUnavailable,
			s.acquireTimeout, s.pool.Stat().AcquiredConns(), s.pool.Stat().MaxConns())
	}
	return nil, translate(err)
}

// inTx runs fn in a transaction scoped to one tenant: the row-level
// security policies show it only that tenant's rows. The rollback uses a
// context that survives the caller's cancellation so a cancelled request
// never leaves a transaction open.
func (s *PgStore) inTx(ctx context.Context, tenantID string, fn func(q *db.Queries) error) error {
	return s.tx(ctx, func(q *db.Queries) error {
		if err := q.SetTenant(ctx, tenantID); err != nil {
			return err
		}
		return fn(q)
	})
}

func (s *PgStore) tx(ctx context.Context, fn func(q *db.Queries) error) (err error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer func() { release(conn, err) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(s.q.WithTx(tx)); err != nil {
		return translate(err)
	}
	return translate(tx.Commit(ctx))
}

// release returns conn to the pool, or closes it when err says its server
// is read-only: such a connection would fail every write it is given, and
// the pool's next one goes where the URL points now (with several hosts
// and target_session_attrs=read-write, the new primary).
func release(conn *pgxpool.Conn, err error) {
	if readOnlyServer(err) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Conn().Close(ctx)
		cancel()
	}
	conn.Release()
}

// readOnlyServer reports whether err is SQLSTATE 25006.
func readOnlyServer(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == sqlstateReadOnly
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullableJSON(r json.RawMessage) []byte {
	if rawjson.IsNull(r) {
		return nil
	}
	return r
}

// translateConflict is translate, with a unique violation reported as
// ALREADY_EXISTS and the given public message.
func translateConflict(err error, format string, args ...any) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return store.Errorf(store.CodeAlreadyExists, format, args...)
	}
	return translate(err)
}
