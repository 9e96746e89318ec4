package pgstore

import (
	"container/list"
	"sync"

	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// snapshotCache keeps recently written or read completed snapshots, with
// their state, so the next turn of a conversation does not read back the
// history the previous turn just wrote. A completed snapshot never changes
// (only a pending one does, and pending ones are never cached), so an entry
// cannot go stale, whichever instance wrote it.
type snapshotCache struct {
	mu  sync.Mutex
	max int
	// maxMessages bounds the messages held by all entries together, so
	// long conversations cannot grow the cache's memory without bound.
	maxMessages int
	messages    int
	ll          *list.List // front: most recently used
	m           map[string]*list.Element
}

type cacheEntry struct {
	key  string
	snap *store.StoredSnapshot
}

func newSnapshotCache(max int) *snapshotCache {
	return &snapshotCache{max: max, maxMessages: 64 * max, ll: list.New(), m: map[string]*list.Element{}}
}

func cacheKey(tenantID, snapshotID string) string { return tenantID + "\x00" + snapshotID }

// get returns a cached snapshot; callers must not modify it.
func (c *snapshotCache) get(tenantID, snapshotID string) *store.StoredSnapshot {
	if c == nil || c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[cacheKey(tenantID, snapshotID)]
	if !ok {
		return nil
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cacheEntry).snap
}

// markAnswered notes on a cached snapshot that its interrupts were claimed
// or a claim of them refused. The entry is replaced by a marked copy:
// callers may hold the old one.
func (c *snapshotCache) markAnswered(tenantID, snapshotID string) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[cacheKey(tenantID, snapshotID)]; ok {
		entry := e.Value.(*cacheEntry)
		if !entry.snap.Answered {
			marked := *entry.snap
			marked.Answered = true
			entry.snap = &marked
		}
	}
}

// put caches a completed snapshot with its state.
func (c *snapshotCache) put(tenantID string, snap *store.StoredSnapshot) {
	if c == nil || c.max <= 0 || snap == nil || snap.Status != protocol.StatusCompleted || snap.State == nil {
		return
	}
	key := cacheKey(tenantID, snap.SnapshotID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		c.ll.MoveToFront(e)
		return
	}
	c.m[key] = c.ll.PushFront(&cacheEntry{key: key, snap: snap})
	c.messages += snap.MessageCount
	for c.ll.Len() > 1 && (c.ll.Len() > c.max || c.messages > c.maxMessages) {
		last := c.ll.Back()
		c.ll.Remove(last)
		e := last.Value.(*cacheEntry)
		delete(c.m, e.key)
		c.messages -= e.snap.MessageCount
	}
}

// headCache keeps, for sessions this instance wrote, the session as the
// write left it: its agent, its end user and its latest snapshot. Unlike a
// completed snapshot, a session's head changes, and other writers (other
// instances, detached turns, retention) move it without this instance
// knowing: an entry is a guess that the write continuing from it checks
// (SnapshotWrite.ExpectedHead), never an answer to show.
type headCache struct {
	mu  sync.Mutex
	max int
	m   map[string]store.StoredSession
}

func newHeadCache(max int) *headCache {
	return &headCache{max: max, m: map[string]store.StoredSession{}}
}

func (c *headCache) get(tenantID, sessionID string) *store.StoredSession {
	if c == nil || c.max <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[cacheKey(tenantID, sessionID)]
	if !ok {
		return nil
	}
	return &h
}

// put records a session's head; at the bound, an arbitrary entry makes
// room (a missing entry only costs a read).
func (c *headCache) put(tenantID string, h store.StoredSession) {
	if c == nil || c.max <= 0 {
		return
	}
	key := cacheKey(tenantID, h.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[key] = h
}

func (c *headCache) drop(tenantID, sessionID string) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, cacheKey(tenantID, sessionID))
}
