package events_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/service/events"
)

// TestDatabaseAgrees holds the migrated schema to this package: the CHECK
// constraint on interrupt_events.type accepts exactly the stored types
// named here (interrupt events with an interrupt, session events without),
// and holdpoint_event_name maps each to the same public name as Name.
func TestDatabaseAgrees(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	var def string
	err = conn.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conname = 'interrupt_events_type_check'`).Scan(&def)
	if err != nil {
		t.Fatal(err)
	}
	arrays := regexp.MustCompile(`ARRAY\[([^\]]*)\]`).FindAllStringSubmatch(def, -1)
	if len(arrays) != 2 {
		t.Fatalf("constraint %q: want two lists of types (with and without an interrupt)", def)
	}
	for i, want := range [][]string{events.InterruptTypes(), events.SessionTypes()} {
		var got []string
		for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(arrays[i][1], -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("constraint list %d = %v, package events has %v", i, got, want)
		}
	}

	stored := append(events.InterruptTypes(), events.SessionTypes()...)
	for _, typ := range stored {
		var name string
		if err := conn.QueryRow(ctx, `SELECT holdpoint_event_name($1)`, typ).Scan(&name); err != nil {
			t.Fatal(err)
		}
		if name != events.Name(typ) {
			t.Errorf("holdpoint_event_name(%q) = %q, events.Name says %q", typ, name, events.Name(typ))
		}
		if !events.Known(name) {
			t.Errorf("%q is not among events.Names()", name)
		}
	}
	if len(events.Names()) != len(stored) {
		t.Errorf("Names() has %d names for %d stored types", len(events.Names()), len(stored))
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for _, n := range events.Names() {
		if !strings.Contains(n, ".") {
			t.Errorf("public name %q has no dot", n)
		}
	}
	if events.Known("interrupt.nope") || events.Known("created") {
		t.Error("Known accepts a name that is not public")
	}
	if events.Name(events.Created) != "interrupt.created" || events.Name(events.ToolCalled) != "tool.called" {
		t.Error("Name maps wrongly")
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
