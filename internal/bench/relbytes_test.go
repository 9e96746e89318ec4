package bench

import (
	"strings"
	"testing"
)

// TestRelationGrowth: the relations that grew, per cycle, largest first,
// and their total; one that shrank counts against it.
func TestRelationGrowth(t *testing.T) {
	before := map[string]int64{"snapshots": 8192, "snapshots_pkey": 16384, "sessions": 8192}
	after := map[string]int64{"snapshots": 40960, "snapshots_pkey": 24576, "sessions": 8192, "interrupts": 16384}
	rels, total := relationGrowth(before, after, 8)
	if len(rels) != 3 || rels[0].Name != "snapshots" || rels[0].Bytes != 4096 || rels[2].Name != "snapshots_pkey" || total != 7168 {
		t.Errorf("growth %v, total %v", rels, total)
	}
	var out strings.Builder
	printRelations(&out, rels)
	if !strings.Contains(out.String(), ": snapshots 4096, interrupts 2048, snapshots_pkey 1024\n") {
		t.Errorf("printed %q", out.String())
	}
}
