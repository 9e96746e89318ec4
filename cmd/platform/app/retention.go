package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/retention"
)

// maxAge bounds a retention age (100 years).
const maxAge = 36500 * 24 * time.Hour

// ageFlag is a retention age flag: a whole number of days ("30d") or a Go
// duration ("36h", "90m"), at least a second; unset keeps forever.
type ageFlag struct{ d time.Duration }

func (a *ageFlag) String() string { return formatAge(a.d) }

// Set parses the flag's value strictly: anything else is a usage error.
func (a *ageFlag) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	a.d = d
	return nil
}

// parseAge parses a retention age.
func parseAge(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not an age: want whole days like 30d, or a duration like 36h or 90m, from 1s to 36500d", s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if days == "" || strings.Trim(days, "0123456789") != "" || len(days) > 6 {
			return 0, bad
		}
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d < time.Second || d > maxAge {
		return 0, bad
	}
	return d, nil
}

// formatAge prints an age in days when it is whole days ("forever" for
// none).
func formatAge(d time.Duration) string {
	switch {
	case d == 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// registerAges adds --completed, --failed and --events (with a prefix, for
// serve) to fs.
func registerAges(fs *flag.FlagSet, prefix, what string, p *retentionFlags) {
	fs.Var(&p.completed, prefix+"completed", "how long "+what+" keep sessions whose last turn completed: 30d, 36h, ... (unset: forever)")
	fs.Var(&p.failed, prefix+"failed", "how long "+what+" keep sessions whose last turn failed, was aborted or never got written (unset: forever)")
	fs.Var(&p.events, prefix+"events", "how long "+what+" keep the event log, the audit trail of decisions included; a session stays while its events must (unset: events go with their session)")
}

// retentionFlags are the three ages.
type retentionFlags struct{ completed, failed, events ageFlag }

func (r retentionFlags) policy() retention.Policy {
	return retention.Policy{Completed: r.completed.d, Failed: r.failed.d, Events: r.events.d}
}

// describePolicy prints a policy on one line.
func describePolicy(p retention.Policy) string {
	return fmt.Sprintf("completed %s, failed %s, events %s", formatAge(p.Completed), formatAge(p.Failed), eventsAge(p.Events))
}

func eventsAge(d time.Duration) string {
	if d == 0 {
		return "with their session"
	}
	return formatAge(d)
}

// tenantsSetRetention runs `platform tenants set-retention TENANT ...`.
func tenantsSetRetention(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform tenants set-retention",
		"platform tenants set-retention TENANT [--completed 30d] [--failed 7d] [--events 90d] | --clear", stderr)
	var r retentionFlags
	registerAges(cmd.fs, "", "the tenant should", &r)
	reset := cmd.fs.Bool("clear", false, "remove the tenant's policy: keep everything (or what prune's and serve's defaults say)")
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	p := r.policy()
	switch {
	case *reset && !p.IsZero():
		fmt.Fprintf(stderr, "%s: --clear takes no ages\n", cmd.name)
		return 2
	case !*reset && p.IsZero():
		fmt.Fprintf(stderr, "%s: give --completed, --failed or --events (or --clear)\n", cmd.name)
		return 2
	}
	tenant := pos[0]
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		if err := store.SetRetentionPolicy(ctx, tenant, p); err != nil {
			return publicError(err)
		}
		if *reset {
			fmt.Fprintf(stdout, "tenant %s keeps everything (no retention policy)\n", tenant)
			return nil
		}
		fmt.Fprintf(stdout, "tenant %s keeps sessions: %s\n", tenant, describePolicy(p))
		return nil
	})
}

// tenantsShow runs `platform tenants show TENANT`.
func tenantsShow(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform tenants show", "platform tenants show TENANT", stderr)
	pos, code := cmd.parse(args, 1, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		p, err := store.RetentionPolicy(ctx, pos[0])
		if err != nil {
			return publicError(err)
		}
		tenants, err := store.ListTenants(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		for _, t := range tenants {
			if t.ID == pos[0] {
				fmt.Fprintf(w, "id:\t%s\nname:\t%s\ncreated:\t%s\n", t.ID, t.Name, t.CreatedAt.UTC().Format(time.RFC3339))
			}
		}
		if p.IsZero() {
			fmt.Fprintln(w, "retention:\tnone (keeps everything)")
		} else {
			fmt.Fprintf(w, "retention:\t%s\n", describePolicy(p))
		}
		return w.Flush()
	})
}

const pruneUsage = "platform prune [--tenant ID] [--dry-run] [--batch 100] [--pause 10ms] [--completed D] [--failed D] [--events D]"

// pruneCommand runs `platform prune`.
func pruneCommand(args []string, stdout, stderr io.Writer) int {
	cmd := newAdminCommand("platform prune", pruneUsage, stderr)
	tenant := cmd.fs.String("tenant", "", "prune this tenant only (default: every tenant)")
	dryRun := cmd.fs.Bool("dry-run", false, "print what would be deleted, and delete nothing")
	batch := cmd.fs.Int("batch", retention.DefaultBatch, "the most sessions (with all their rows) one transaction deletes, and events one event batch looks at")
	pause := cmd.fs.Duration("pause", retention.DefaultPause, "least wait between two batches, so turns are not held up")
	share := cmd.fs.Float64("share", retention.DefaultShare, "the most of the wall time batches may take (after a batch that took d, wait d*(1-share)/share if longer than --pause); 1: only --pause")
	var defaults retentionFlags
	registerAges(cmd.fs, "", "tenants without their own setting", &defaults)
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if *batch < 1 || *batch > 100000 {
		fmt.Fprintf(stderr, "%s: --batch must be from 1 to 100000\n", cmd.name)
		return 2
	}
	if *pause < 0 || *pause > time.Minute {
		fmt.Fprintf(stderr, "%s: --pause must be from 0 to 1m\n", cmd.name)
		return 2
	}
	if !(*share >= 0.01 && *share <= 1) {
		fmt.Fprintf(stderr, "%s: --share must be from 0.01 to 1\n", cmd.name)
		return 2
	}
	var tenants []string
	if *tenant != "" {
		tenants = []string{*tenant}
	}
	return cmd.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		p := &retention.Pruner{Store: store, Defaults: defaults.policy(), Batch: *batch, Pause: *pause, Share: *share}
		if *pause == 0 {
			p.Pause = -1
		}
		reports, err := p.Prune(ctx, tenants, *dryRun)
		printPrune(stdout, reports, *dryRun)
		return publicError(err)
	})
}

// printPrune prints one line per tenant and the totals.
func printPrune(w io.Writer, reports []retention.Report, dryRun bool) {
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing deleted; a prune now would delete:")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TENANT\tSESSIONS\tSNAPSHOTS\tMESSAGES\tINTERRUPTS\tEVENTS\tTOOL CALLS\tDELIVERIES\tBATCHES\t")
	var total retention.PruneCounts
	batches := 0
	row := func(name string, c retention.PruneCounts, b int) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, c.Sessions, c.Snapshots, c.Messages, c.Interrupts,
			c.Events, c.ToolCalls, c.Deliveries, b)
	}
	for _, r := range reports {
		row(r.TenantID, r.Counts, r.Batches)
		total.Add(r.Counts)
		batches += r.Batches
	}
	row("total", total, batches)
	_ = tw.Flush()
}

// pruneConfig is the background sweeper of serve.
type pruneConfig struct {
	interval time.Duration
	defaults retentionFlags
}

func (c *pruneConfig) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.interval, "prune-interval", time.Hour, "how often tenants' retention policies are applied (one instance at a time; 0: never)")
	registerAges(fs, "retain-", "tenants without their own setting", &c.defaults)
}

func (c *pruneConfig) check() error {
	if c.interval < 0 {
		return errors.New("--prune-interval must not be negative")
	}
	return nil
}

// run runs the sweeper until ctx ends (nothing when it is off), skipping
// its rounds while ready says the instance is not ready.
func (c *pruneConfig) run(ctx context.Context, store retention.PrunerStore, log *slog.Logger, ready func() bool) {
	if c.interval == 0 {
		return
	}
	p := &retention.Pruner{Store: store, Defaults: c.defaults.policy(), Log: log, Ready: ready}
	p.Run(ctx, c.interval)
}
