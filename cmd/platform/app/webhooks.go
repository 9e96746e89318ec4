package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/events"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/pgstore"
	"github.com/holdpoint/holdpoint/service/tenants"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

var webhooksUsage = `Usage:
  platform webhooks create --tenant ID --url URL [--events T,T] [--description D] [--disabled] [--allow-loopback]
                                         add an endpoint and print its id and signing secret (once)
  platform webhooks list --tenant ID     list a tenant's endpoints with their delivery figures
  platform webhooks show ID --tenant ID  print an endpoint and its delivery figures
  platform webhooks update ID --tenant ID [--url U] [--events T,T] [--description D] [--enable|--disable] [--allow-loopback]
                                         change the fields given
  platform webhooks delete ID --tenant ID
                                         remove an endpoint with its deliveries
  platform webhooks rotate-secret ID --tenant ID [--overlap 24h]
                                         print a new signing secret (once); the old one signs too for the overlap
  platform webhooks deliveries ID --tenant ID [--status pending|delivered|dead] [--limit 50] [--cursor C]
                                         list an endpoint's deliveries, newest first
  platform webhooks redeliver ID DELIVERY_ID --tenant ID
                                         queue a delivered or dead delivery again

Event types (--events; none given on create: all of them):
  ` + strings.Join(events.Names(), ", ") + `

The endpoint's URL follows the tenant's address rules for HTTP tools (see
platform tenants allow-tool-hosts); --allow-loopback also lets it be this
machine, as serve --allow-loopback-webhooks (or --dev) must then do too.
The database comes from DATABASE_URL; run "platform migrate up" first.
`

// Bounds of `webhooks deliveries --limit`, as GET .../deliveries.
const (
	webhookDeliveriesPage    = 50
	maxWebhookDeliveriesPage = 200
	// lastErrorWidth is how much of a delivery's last error the table shows.
	lastErrorWidth = 60
)

// webhooksCommand runs `platform webhooks ...`.
func webhooksCommand(args []string, stdout, stderr io.Writer) int {
	return dispatch("webhooks", webhooksUsage, map[string]func([]string) int{
		"create":        func(args []string) int { return webhooksCreate(args, stdout, stderr) },
		"list":          func(args []string) int { return webhooksList(args, stdout, stderr) },
		"show":          func(args []string) int { return webhooksShow(args, stdout, stderr) },
		"update":        func(args []string) int { return webhooksUpdate(args, stdout, stderr) },
		"delete":        func(args []string) int { return webhooksDelete(args, stdout, stderr) },
		"rotate-secret": func(args []string) int { return webhooksRotateSecret(args, stdout, stderr) },
		"deliveries":    func(args []string) int { return webhooksDeliveries(args, stdout, stderr) },
		"redeliver":     func(args []string) int { return webhooksRedeliver(args, stdout, stderr) },
	}, args, stdout, stderr)
}

// webhookEnv is what a webhooks sub-command works with.
type webhookEnv struct {
	m      *webhooks.Manager
	ids    *keys.EventIDs
	caller service.Caller
}

// withWebhooks runs fn with the webhook endpoints of tenant over
// DATABASE_URL (as the application role, like the server), after checking
// the tenant exists. An error fn returns is reported by its public message
// only (never the SQL behind it).
func (a *adminCommand) withWebhooks(tenant string, loopback bool, stderr io.Writer, fn func(ctx context.Context, env webhookEnv) error) int {
	return a.withStore(stderr, func(ctx context.Context, store *pgstore.PgStore) error {
		// A tenant has token keys from its creation on: none, no tenant.
		if _, err := tenants.New(store).TokenSecret(ctx, tenant); err != nil {
			return publicError(err)
		}
		env := webhookEnv{
			m:      &webhooks.Manager{Store: store, AllowLoopback: loopback},
			ids:    keys.NewEventIDs(store.SigningKeys),
			caller: service.Caller{TenantID: tenant, Actor: "cli:" + currentUser()},
		}
		return publicError(fn(ctx, env))
	})
}

// publicError is err as a domain error without its cause: the status and
// public message the API would answer (INTERNAL's fixed message for what
// is not a domain error).
func publicError(err error) error {
	if err == nil {
		return nil
	}
	e := service.AsError(err)
	return &service.Error{Status: e.Status, Message: e.Message, Details: e.Details}
}

// webhookArgs parses a webhooks subcommand's flags and its id arguments,
// one per name, and checks --tenant (see adminCommand.parse); it returns
// the ids, or the exit code of a usage error (2) after saying what is
// wrong.
func webhookArgs(cmd *adminCommand, args []string, stderr io.Writer, names ...string) ([]uuid.UUID, int) {
	pos, code := cmd.parse(args, len(names), stderr)
	if code >= 0 {
		return nil, code
	}
	ids := make([]uuid.UUID, len(names))
	for i, name := range names {
		if ids[i], code = parseWebhookID(cmd, name, pos[i], stderr); code >= 0 {
			return nil, code
		}
	}
	return ids, -1
}

// webhookID is webhookArgs for a sub-command on one endpoint: its ID.
func webhookID(cmd *adminCommand, args []string, stderr io.Writer) (uuid.UUID, int) {
	ids, code := webhookArgs(cmd, args, stderr, "ID")
	if code >= 0 {
		return uuid.Nil, code
	}
	return ids[0], -1
}

// parseWebhookID parses an id argument; what is not a UUID is a usage
// error (2).
func parseWebhookID(cmd *adminCommand, what, arg string, stderr io.Writer) (uuid.UUID, int) {
	id, err := uuid.Parse(arg)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s %q is not an id (see platform webhooks list)\n", cmd.name, what, arg)
		return uuid.Nil, 2
	}
	return id, -1
}

// splitEvents parses --events: comma-separated event types.
func splitEvents(s string) []string {
	out := []string{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// flagsSet returns the names of the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// webhooksCreate runs `platform webhooks create`.
func webhooksCreate(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks create",
		"platform webhooks create --tenant ID --url URL [--events T,T] [--description D] [--disabled] [--allow-loopback]", stderr)
	url := cmd.fs.String("url", "", "where to POST the events (required)")
	events := cmd.fs.String("events", "", "comma-separated event types to send (default: all)")
	description := cmd.fs.String("description", "", "a description to recognize the endpoint by")
	disabled := cmd.fs.Bool("disabled", false, "create the endpoint disabled (no deliveries until enabled)")
	loopback := cmd.fs.Bool("allow-loopback", false, "let the URL be a loopback address (the server must allow them too)")
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	if *url == "" {
		fmt.Fprintf(stderr, "%s: --url is required\n", cmd.name)
		cmd.fs.Usage()
		return 2
	}
	set := flagsSet(cmd.fs)
	in := webhooks.Input{URL: url}
	if set["description"] {
		in.Description = description
	}
	if set["events"] {
		in.EventTypes = splitEvents(*events)
	}
	if *disabled {
		enabled := false
		in.Enabled = &enabled
	}
	return cmd.withWebhooks(*tenant, *loopback, stderr, func(ctx context.Context, env webhookEnv) error {
		w, err := env.m.Create(ctx, env.caller, in)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "id\t%s\nsecret\t%s\n", w.ID, w.Secret)
		fmt.Fprintf(stderr, "Created webhook %s for tenant %s (%s, events: %s). The signing secret is shown only this once: store it now.\n",
			w.ID, *tenant, enabledWord(w.Enabled), eventsColumn(w.EventTypes))
		return nil
	})
}

func enabledWord(enabled bool) string {
	if enabled {
		return "enabled"
	}
	return "disabled"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// healthByID indexes the delivery figures by endpoint.
func healthByID(hs []webhooks.Health) map[uuid.UUID]webhooks.Health {
	out := make(map[uuid.UUID]webhooks.Health, len(hs))
	for _, h := range hs {
		out[h.WebhookID] = h
	}
	return out
}

// webhooksList runs `platform webhooks list --tenant ID`.
func webhooksList(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks list", "platform webhooks list --tenant ID", stderr)
	if _, code := cmd.parse(args, 0, stderr); code >= 0 {
		return code
	}
	return cmd.withWebhooks(*tenant, false, stderr, func(ctx context.Context, env webhookEnv) error {
		hooks, err := env.m.List(ctx, env.caller)
		if err != nil {
			return err
		}
		hs, err := env.m.Health(ctx, env.caller)
		if err != nil {
			return err
		}
		health := healthByID(hs)
		return writeTable(stdout, "ID\tURL\tENABLED\tEVENTS\tPENDING\tDELIVERED\tDEAD", len(hooks), func(w io.Writer, i int) {
			h := hooks[i]
			f := health[h.ID]
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", h.ID, h.URL, yesNo(h.Enabled), eventsColumn(h.EventTypes),
				f.Pending, f.Delivered, f.Dead)
		})
	})
}

// eventsColumn shows an endpoint's event types, "all" when it has every one.
func eventsColumn(types []string) string {
	if len(types) == len(events.Names()) {
		return "all"
	}
	return strings.Join(types, ",")
}

// webhooksShow runs `platform webhooks show ID --tenant ID`.
func webhooksShow(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks show", "platform webhooks show ID --tenant ID", stderr)
	id, code := webhookID(cmd, args, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withWebhooks(*tenant, false, stderr, func(ctx context.Context, env webhookEnv) error {
		h, err := env.m.Get(ctx, env.caller, id)
		if err != nil {
			return err
		}
		hs, err := env.m.Health(ctx, env.caller)
		if err != nil {
			return err
		}
		f := healthByID(hs)[h.ID]
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(w, "id:\t%s\n", h.ID)
		fmt.Fprintf(w, "url:\t%s\n", h.URL)
		fmt.Fprintf(w, "description:\t%s\n", orDash(oneLine(h.Description)))
		fmt.Fprintf(w, "events:\t%s\n", strings.Join(h.EventTypes, ","))
		state := enabledWord(h.Enabled)
		if h.DisabledReason != "" {
			state += " (" + oneLine(h.DisabledReason) + ")"
		}
		fmt.Fprintf(w, "state:\t%s\n", state)
		fmt.Fprintf(w, "created:\t%s by %s\n", h.CreatedAt.UTC().Format(time.RFC3339), h.CreatedBy)
		fmt.Fprintf(w, "updated:\t%s\n", h.UpdatedAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "pending:\t%d (retrying %d, oldest since %s)\n", f.Pending, f.Retrying, timeOrDash(f.OldestPendingAt))
		fmt.Fprintf(w, "delivered:\t%d (last at %s)\n", f.Delivered, timeOrDash(f.LastDeliveredAt))
		fmt.Fprintf(w, "dead:\t%d\n", f.Dead)
		fmt.Fprintf(w, "last failure:\t%s\n", timeOrDash(f.LastFailureAt))
		fmt.Fprintf(w, "delivery time:\tp50 %s, p90 %s\n", secondsOrDash(f.DeliveryP50Seconds), secondsOrDash(f.DeliveryP90Seconds))
		return w.Flush()
	})
}

// secondsOrDash shows an optional duration in seconds, or a dash.
func secondsOrDash(s *float64) string {
	if s == nil {
		return "-"
	}
	return (time.Duration(*s * float64(time.Second))).Round(time.Millisecond).String()
}

// oneLine keeps a free text on its table line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// webhooksUpdate runs `platform webhooks update ID --tenant ID ...`.
func webhooksUpdate(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks update",
		"platform webhooks update ID --tenant ID [--url U] [--events T,T] [--description D] [--enable|--disable] [--allow-loopback]", stderr)
	url := cmd.fs.String("url", "", "a new URL")
	events := cmd.fs.String("events", "", "the comma-separated event types to send from now on")
	description := cmd.fs.String("description", "", "a new description (empty: none)")
	enable := cmd.fs.Bool("enable", false, "enable the endpoint")
	disable := cmd.fs.Bool("disable", false, "disable the endpoint (its pending deliveries wait)")
	loopback := cmd.fs.Bool("allow-loopback", false, "let the new URL be a loopback address (the server must allow them too)")
	id, code := webhookID(cmd, args, stderr)
	if code >= 0 {
		return code
	}
	if *enable && *disable {
		fmt.Fprintf(stderr, "%s: give at most one of --enable and --disable\n", cmd.name)
		return 2
	}
	set := flagsSet(cmd.fs)
	var in webhooks.Input
	if set["url"] {
		in.URL = url
	}
	if set["description"] {
		in.Description = description
	}
	if set["events"] {
		in.EventTypes = splitEvents(*events)
	}
	if *enable || *disable {
		enabled := *enable
		in.Enabled = &enabled
	}
	if in.URL == nil && in.Description == nil && in.EventTypes == nil && in.Enabled == nil {
		fmt.Fprintf(stderr, "%s: nothing to change: give --url, --events, --description, --enable or --disable\n", cmd.name)
		cmd.fs.Usage()
		return 2
	}
	return cmd.withWebhooks(*tenant, *loopback, stderr, func(ctx context.Context, env webhookEnv) error {
		h, err := env.m.Update(ctx, env.caller, id, in)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "webhook %s of tenant %s: %s, %s, events: %s\n", h.ID, *tenant, h.URL, enabledWord(h.Enabled), eventsColumn(h.EventTypes))
		return nil
	})
}

// webhooksDelete runs `platform webhooks delete ID --tenant ID`.
func webhooksDelete(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks delete", "platform webhooks delete ID --tenant ID", stderr)
	id, code := webhookID(cmd, args, stderr)
	if code >= 0 {
		return code
	}
	return cmd.withWebhooks(*tenant, false, stderr, func(ctx context.Context, env webhookEnv) error {
		if err := env.m.Delete(ctx, env.caller, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted webhook %s of tenant %s with its deliveries\n", id, *tenant)
		return nil
	})
}

// webhooksRotateSecret runs `platform webhooks rotate-secret ID --tenant ID [--overlap 24h]`.
func webhooksRotateSecret(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks rotate-secret", "platform webhooks rotate-secret ID --tenant ID [--overlap 24h]", stderr)
	overlap := cmd.fs.Duration("overlap", webhooks.DefaultOverlap,
		fmt.Sprintf("how long the old secret keeps signing too (at most %s)", webhooks.MaxOverlap))
	id, code := webhookID(cmd, args, stderr)
	if code >= 0 {
		return code
	}
	if *overlap <= 0 || *overlap > webhooks.MaxOverlap {
		fmt.Fprintf(stderr, "%s: --overlap must be more than 0s and at most %s\n", cmd.name, webhooks.MaxOverlap)
		return 2
	}
	return cmd.withWebhooks(*tenant, false, stderr, func(ctx context.Context, env webhookEnv) error {
		secret, err := env.m.RotateSecret(ctx, env.caller, id, *overlap)
		if err != nil {
			return err
		}
		until := time.Now().Add(*overlap).UTC().Format(time.RFC3339)
		fmt.Fprintln(stdout, secret)
		fmt.Fprintf(stderr, "New signing secret of webhook %s; it is shown only this once: store it now. The previous secret keeps signing too until about %s.\n", id, until)
		return nil
	})
}

// webhooksDeliveries runs `platform webhooks deliveries ID --tenant ID`.
func webhooksDeliveries(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks deliveries",
		"platform webhooks deliveries ID --tenant ID [--status pending|delivered|dead] [--limit 50] [--cursor C]", stderr)
	status := cmd.fs.String("status", "", "only the deliveries in this status: pending, delivered or dead")
	limit := cmd.fs.Int("limit", webhookDeliveriesPage, fmt.Sprintf("at most this many deliveries (1 to %d)", maxWebhookDeliveriesPage))
	cursor := cmd.fs.String("cursor", "", "the next page: the cursor the previous page printed")
	id, code := webhookID(cmd, args, stderr)
	if code >= 0 {
		return code
	}
	switch *status {
	case "", webhooks.DeliveryPending, webhooks.DeliveryDelivered, webhooks.DeliveryDead:
	default:
		fmt.Fprintf(stderr, "%s: --status must be pending, delivered or dead\n", cmd.name)
		return 2
	}
	if *limit < 1 || *limit > maxWebhookDeliveriesPage {
		fmt.Fprintf(stderr, "%s: --limit must be 1 to %d\n", cmd.name, maxWebhookDeliveriesPage)
		return 2
	}
	return cmd.withWebhooks(*tenant, false, stderr, func(ctx context.Context, env webhookEnv) error {
		page, err := env.m.Deliveries(ctx, env.caller, env.ids, id, *status, *cursor, *limit)
		if err != nil {
			return err
		}
		err = writeTable(stdout, "DELIVERY\tEVENT TYPE\tSTATUS\tATTEMPTS\tLAST STATUS\tNEXT ATTEMPT\tLAST ERROR", len(page.Items), func(w io.Writer, i int) {
			d := page.Items[i]
			last := "-"
			if d.LastStatus != 0 {
				last = fmt.Sprint(d.LastStatus)
			}
			next := "-"
			if d.Status == webhooks.DeliveryPending {
				next = timeOrDash(d.NextAttemptAt)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.EventType, d.Status, d.Attempts, last, next,
				orDash(truncate(oneLine(d.LastError), lastErrorWidth)))
		})
		if err != nil {
			return err
		}
		if page.NextCursor != "" {
			fmt.Fprintf(stderr, "More deliveries: add --cursor %s\n", page.NextCursor)
		}
		return nil
	})
}

// truncate cuts s to at most n characters, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// webhooksRedeliver runs `platform webhooks redeliver ID DELIVERY_ID --tenant ID`.
func webhooksRedeliver(args []string, stdout, stderr io.Writer) int {
	cmd, tenant := newTenantCommand("platform webhooks redeliver", "platform webhooks redeliver ID DELIVERY_ID --tenant ID", stderr)
	ids, code := webhookArgs(cmd, args, stderr, "ID", "DELIVERY_ID")
	if code >= 0 {
		return code
	}
	id, did := ids[0], ids[1]
	return cmd.withWebhooks(*tenant, false, stderr, func(ctx context.Context, env webhookEnv) error {
		d, err := env.m.Redeliver(ctx, env.caller, env.ids, id, did)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "delivery %s (%s, event %s) of webhook %s is %s again, next attempt %s\n",
			d.ID, d.EventType, d.EventID, id, d.Status, timeOrDash(d.NextAttemptAt))
		return nil
	})
}
