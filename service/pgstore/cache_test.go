package pgstore

import (
	"fmt"
	"testing"

	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

func completed(id string, messages int) *store.StoredSnapshot {
	return &store.StoredSnapshot{Snapshot: protocol.Snapshot{SnapshotID: id, Status: protocol.StatusCompleted, State: &protocol.SessionState{}}, MessageCount: messages}
}

// The snapshot cache is bounded by entries and by the messages they hold,
// evicts the least recently used, and never holds a pending snapshot.
func TestSnapshotCacheBounds(t *testing.T) {
	t.Parallel()
	c := newSnapshotCache(3) // at most 3 entries, 192 messages
	for i := range 3 {
		c.put("t", completed(fmt.Sprint(i), 10))
	}
	c.get("t", "0") // 1 is now the least recently used
	c.put("t", completed("3", 10))
	if c.get("t", "1") != nil || c.get("t", "0") == nil || c.get("t", "3") == nil {
		t.Error("at the entry bound, the least recently used entry did not go")
	}
	c.put("t", completed("big", 180)) // 0, 3 and big hold 200 > 192
	if c.get("t", "big") == nil {
		t.Fatal("the newest entry went")
	}
	if c.messages > c.maxMessages {
		t.Errorf("%d messages held, bound %d", c.messages, c.maxMessages)
	}
	if c.get("t", "2") != nil && c.get("t", "0") != nil {
		t.Error("over the message bound, nothing was evicted")
	}
	pending := completed("p", 1)
	pending.Status = protocol.StatusPending
	c.put("t", pending)
	if c.get("t", "p") != nil {
		t.Error("a pending snapshot was cached")
	}
	if c.get("other", "big") != nil {
		t.Error("a snapshot was found under another tenant")
	}
}

// markAnswered replaces the entry by a marked copy: a caller holding the
// old one does not see it change.
func TestSnapshotCacheMarkAnswered(t *testing.T) {
	t.Parallel()
	c := newSnapshotCache(2)
	c.put("t", completed("a", 4))
	held := c.get("t", "a")
	c.markAnswered("t", "a")
	if held.Answered {
		t.Error("the snapshot a caller held changed")
	}
	if got := c.get("t", "a"); got == nil || !got.Answered {
		t.Errorf("cached snapshot after markAnswered: %+v", got)
	}
	if c.messages != 4 {
		t.Errorf("messages %d after the replacement, want 4", c.messages)
	}
	var none *snapshotCache = newSnapshotCache(0)
	none.put("t", completed("a", 1))
	if none.get("t", "a") != nil {
		t.Error("a cache of size 0 holds entries")
	}
}

func TestHeadCache(t *testing.T) {
	t.Parallel()
	c := newHeadCache(2)
	c.put("t", store.StoredSession{ID: "s1"})
	c.put("t", store.StoredSession{ID: "s2"})
	c.get("t", "s1")
	c.put("t", store.StoredSession{ID: "s3"})
	if c.get("t", "s2") != nil || c.get("t", "s1") == nil {
		t.Error("at the bound, the least recently used head did not go")
	}
	c.drop("t", "s1")
	if c.get("t", "s1") != nil {
		t.Error("a dropped head is still there")
	}
}
