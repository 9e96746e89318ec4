package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// relationSizes is the size of the data files of every table of the
// database's public schema, by relation: each table's heap, its TOAST
// table (with the TOAST index) and each of its indexes, the main fork of
// each (pg_relation_size). Not the free space and visibility maps, which
// grow in steps of pages whatever a cycle writes, and which
// pg_total_relation_size counted.
//
// A table's heap counts the pages that hold a live row, not its file's
// length: under concurrent inserts PostgreSQL extends a heap by many
// empty pages at once (20 for each backend waiting on the extension, up
// to 512), and those pages, filled by later cycles, made one run's figure
// for a table 0 and the next one's twice its rows. An index grows a page
// at a time, so its file's length is what it uses.
func relationSizes(ctx context.Context, admin *pgxpool.Pool) (map[string]int64, error) {
	rows, err := admin.Query(ctx, `
		WITH t AS (
			SELECT c.oid, c.relname, c.reltoastrelid FROM pg_class c
			WHERE c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace
		)
		SELECT relname, pg_relation_size(oid, 'main') FROM t
		UNION ALL
		SELECT t.relname || ' (TOAST)', pg_relation_size(t.reltoastrelid, 'main')
			+ coalesce((SELECT sum(pg_relation_size(i.indexrelid, 'main')) FROM pg_index i WHERE i.indrelid = t.reltoastrelid), 0)::bigint
		FROM t WHERE t.reltoastrelid <> 0
		UNION ALL
		SELECT ic.relname, pg_relation_size(ic.oid, 'main')
		FROM t JOIN pg_index i ON i.indrelid = t.oid JOIN pg_class ic ON ic.oid = i.indexrelid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sizes := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		sizes[name] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return sizes, heapPagesUsed(ctx, admin, sizes)
}

// heapPagesUsed replaces the size of each table's heap in sizes by the
// bytes of its pages that hold a live row (a dead version's page that
// holds no live row is not counted: vacuum would reuse it).
func heapPagesUsed(ctx context.Context, admin *pgxpool.Pool, sizes map[string]int64) error {
	rows, err := admin.Query(ctx, `
		SELECT c.relname FROM pg_class c
		WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace`)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		q := `SELECT count(DISTINCT (ctid::text::point)[0])::bigint * current_setting('block_size')::bigint FROM public.` + pgx.Identifier{t}.Sanitize()
		var n int64
		if err := admin.QueryRow(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("pages of %s: %w", t, err)
		}
		sizes[t] = n
	}
	return nil
}

// RelationBytes is what one relation grew by per cycle.
type RelationBytes struct {
	Name  string
	Bytes float64
}

// relationGrowth is the relations that grew from before to after, per
// cycle of cycles, largest first, and their total.
func relationGrowth(before, after map[string]int64, cycles int) ([]RelationBytes, float64) {
	var out []RelationBytes
	var total int64
	for name, n := range after {
		if d := n - before[name]; d != 0 {
			out = append(out, RelationBytes{name, float64(d) / float64(cycles)})
			total += d
		}
	}
	slices.SortFunc(out, func(a, b RelationBytes) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name))
	})
	return out, float64(total) / float64(cycles)
}

// printRelations writes the per-relation growth on one line.
func printRelations(w io.Writer, rels []RelationBytes) {
	if len(rels) == 0 {
		return
	}
	parts := make([]string, len(rels))
	for i, r := range rels {
		parts[i] = fmt.Sprintf("%s %.0f", r.Name, r.Bytes)
	}
	fmt.Fprintf(w, "bytes/cycle by relation (heap, TOAST, indexes; no free space or visibility maps): %s\n", strings.Join(parts, ", "))
}
