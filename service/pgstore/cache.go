package pgstore

import (
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// snapshotCache keeps recently written or read completed snapshots, with
// their state, so the next turn of a conversation does not read back the
// history the previous turn just wrote. A completed snapshot never changes
// (only a pending one does, and pending ones are never cached), so an entry
// cannot go stale, whichever instance wrote it.
//
// It is a least-recently-used list (golang-lru's simplelru) bounded twice:
// by entries, and by the messages all entries hold together, so long
// conversations cannot grow the cache's memory without bound. The second
// bound is why it holds its own lock around a simplelru rather than using
// the locked lru.Cache: adding an entry and evicting for its messages are
// one step.
type snapshotCache struct {
	mu          sync.Mutex
	lru         *simplelru.LRU[string, *store.StoredSnapshot]
	maxMessages int
	messages    int
}

// newSnapshotCache returns a cache of max snapshots (none when max <= 0).
func newSnapshotCache(max int) *snapshotCache {
	if max <= 0 {
		return nil
	}
	c := &snapshotCache{maxMessages: 64 * max}
	c.lru, _ = simplelru.NewLRU(max, func(_ string, s *store.StoredSnapshot) { c.messages -= s.MessageCount })
	return c
}

func cacheKey(tenantID, snapshotID string) string { return tenantID + "\x00" + snapshotID }

// get returns a cached snapshot; callers must not modify it.
func (c *snapshotCache) get(tenantID, snapshotID string) *store.StoredSnapshot {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, _ := c.lru.Get(cacheKey(tenantID, snapshotID))
	return s
}

// markAnswered notes on a cached snapshot that its interrupts were claimed
// or a claim of them refused. The entry is replaced by a marked copy:
// callers may hold the old one.
func (c *snapshotCache) markAnswered(tenantID, snapshotID string) {
	if c == nil {
		return
	}
	key := cacheKey(tenantID, snapshotID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.lru.Peek(key); ok && !s.Answered {
		marked := *s
		marked.Answered = true
		c.lru.Add(key, &marked) // same snapshot, same messages
	}
}

// put caches a completed snapshot with its state.
func (c *snapshotCache) put(tenantID string, snap *store.StoredSnapshot) {
	if c == nil || snap == nil || snap.Status != protocol.StatusCompleted || snap.State == nil {
		return
	}
	key := cacheKey(tenantID, snap.SnapshotID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(key) {
		c.lru.Get(key) // most recently used
		return
	}
	c.messages += snap.MessageCount
	c.lru.Add(key, snap)
	for c.lru.Len() > 1 && c.messages > c.maxMessages {
		c.lru.RemoveOldest()
	}
}

// headCache keeps, for sessions this instance wrote, the session as the
// write left it: its agent, its end user and its latest snapshot. Unlike a
// completed snapshot, a session's head changes, and other writers (other
// instances, detached turns, retention) move it without this instance
// knowing: an entry is a guess that the write continuing from it checks
// (SnapshotWrite.ExpectedHead), never an answer to show. At the bound the
// least recently used entry goes (a missing entry only costs a read).
type headCache struct {
	lru *lru.Cache[string, store.StoredSession]
}

// newHeadCache returns a cache of max heads (none when max <= 0).
func newHeadCache(max int) *headCache {
	if max <= 0 {
		return nil
	}
	c, _ := lru.New[string, store.StoredSession](max)
	return &headCache{lru: c}
}

func (c *headCache) get(tenantID, sessionID string) *store.StoredSession {
	if c == nil {
		return nil
	}
	h, ok := c.lru.Get(cacheKey(tenantID, sessionID))
	if !ok {
		return nil
	}
	return &h
}

// put records a session's head.
func (c *headCache) put(tenantID string, h store.StoredSession) {
	if c != nil {
		c.lru.Add(cacheKey(tenantID, h.ID), h)
	}
}

func (c *headCache) drop(tenantID, sessionID string) {
	if c != nil {
		c.lru.Remove(cacheKey(tenantID, sessionID))
	}
}
