package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdpoint/holdpoint/db"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// WarmPool readies the pool for its first turns: it opens the pool's
// connections, up to its configured size (MaxConns), and on each one runs
// an approval cycle's statements (a session's first turn pausing on an
// interrupt, the paused snapshot read back with its history, the resume
// that claims the interrupt) in a transaction it rolls back. So the first
// turns pay for none of what a new connection costs the first time:
// connecting and setting the role, preparing each statement (pgx's
// statement cache), PostgreSQL's catalog and plan caches of a new backend.
// Measured, those were the 200-500 ms turns at the start of every run
// (docs/performance.md, round 3). It writes nothing. It returns how many
// connections it warmed; an error (a tenant "default" missing, say) leaves
// the pool usable, only less warm.
//
// Call it before the server takes traffic: it holds every connection of
// the pool until each is warm.
func (s *PgStore) WarmPool(ctx context.Context) (int, error) {
	n := int(s.pool.Config().MaxConns)
	errs := make([]error, n)
	var warmed sync.WaitGroup // acquired and warmed, or failed
	var all sync.WaitGroup
	hold := make(chan struct{})
	count := 0
	var mu sync.Mutex
	for i := range n {
		warmed.Add(1)
		all.Go(func() {
			conn, err := s.acquire(ctx)
			if err != nil {
				errs[i] = err
				warmed.Done()
				return
			}
			// Held until every connection is acquired, so that each
			// acquire opens a connection of its own.
			defer conn.Release()
			errs[i] = warmConn(ctx, conn)
			mu.Lock()
			count++
			mu.Unlock()
			warmed.Done()
			<-hold
		})
	}
	warmed.Wait()
	close(hold)
	all.Wait()
	return count, errors.Join(errs...)
}

// warmTenant is the tenant of WarmPool's rolled-back cycle: the one every
// database has from its first migration.
const warmTenant = "default"

// warmCycles is how many approval cycles warmConn runs.
const warmCycles = 3

// warmConn runs warmCycles approval cycles' statements on conn in a
// transaction it rolls back.
func warmConn(ctx context.Context, conn *pgxpool.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return translate(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	p := &pipeline{conn: conn, tenant: warmTenant}
	p.begin(ctx)
	// PostgreSQL plans a prepared statement generically from its sixth
	// run, and custom-plans the first five: WriteTurn's plan alone costs
	// about 0.6 ms. Three cycles (six turn writes) leave the turns' plans
	// generic, so no early turn pays for planning (8 sessions x 20 cycles:
	// 5 % more cycles/s than with one warm cycle).
	for range warmCycles {
		if err := warmCycle(ctx, db.New(p)); err != nil {
			return fmt.Errorf("warm a pool connection: %w", err)
		}
	}
	return p.flush(ctx)
}

// warmCycle is the statements of one approval cycle, as the store sends
// them: a new session's head, its first turn paused on an interrupt, the
// paused snapshot with its history, the resume with its claim.
func warmCycle(ctx context.Context, q *db.Queries) error {
	session, paused, done := "warm-"+store.NewRowID().String(), store.NewRowID().String(), store.NewRowID().String()
	if _, err := q.GetSession(ctx, db.GetSessionParams{TenantID: warmTenant, ID: session}); err != nil && !errors.Is(translate(err), store.ErrNotFound) {
		return err
	}
	user := []byte(`{"role":"user","content":[{"text":"warm"}]}`)
	req := []byte(`{"role":"model","content":[{"toolRequest":{"name":"warm","ref":"w1","input":{}}}]}`)
	first := &store.SnapshotWrite{TenantID: warmTenant, Agent: "holdpoint.warm", SessionID: session, SnapshotID: paused,
		Status: protocol.StatusCompleted, FinishReason: protocol.FinishInterrupted, MessageCount: 2, MaxPending: 100,
		Messages:   []store.PositionedMessage{{Position: 0, Body: user}, {Position: 1, Body: req}},
		Interrupts: []store.NewInterrupt{{Tool: "warm", Ref: "w1", Input: json.RawMessage(`{}`)}}}
	if err := queueWrite(ctx, q, first); err != nil {
		return err
	}
	snap, err := q.GetSnapshot(ctx, db.GetSnapshotParams{TenantID: warmTenant, ID: paused})
	if err != nil {
		return err
	}
	if _, err := q.ListHistoryMessages(ctx, db.ListHistoryMessagesParams{TenantID: warmTenant, SnapshotID: paused,
		MessageCount: snap.Snapshot.MessageCount}); err != nil {
		return err
	}
	resolved := []byte(`{"role":"model","content":[{"toolRequest":{"name":"warm","ref":"w1","input":{}}}],"metadata":{"resolved":true}}`)
	answer := []byte(`{"role":"model","content":[{"text":"done"}]}`)
	resume := &store.SnapshotWrite{TenantID: warmTenant, Agent: "holdpoint.warm", SessionID: session, SnapshotID: done,
		ParentID: paused, ExpectedHead: paused, Status: protocol.StatusCompleted, FinishReason: protocol.FinishStop, MessageCount: 3,
		Messages: []store.PositionedMessage{{Position: 1, Body: resolved}, {Position: 2, Body: answer}},
		Claims:   []store.InterruptClaim{{Tool: "warm", Ref: "w1", Resolution: json.RawMessage(`{"approved":true}`)}}, ResumedSet: true}
	return queueWrite(ctx, q, resume)
}

// queueWrite queues w's WriteTurn (sent with the next query or flush).
func queueWrite(ctx context.Context, q *db.Queries, w *store.SnapshotWrite) error {
	params, err := writeTurnParams(w)
	if err != nil {
		return err
	}
	return q.WriteTurn(ctx, params)
}
