package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// The dashboard's webhook pages: the tenant's endpoints with their delivery
// figures (GET /ui/webhooks), one endpoint's deliveries (GET
// /ui/webhooks/:id) and the redelivery of a finished one (POST
// /ui/webhooks/:id/deliveries/:delivery/redeliver). Creating and changing
// endpoints stays in the API and the CLI, which show the signing secret
// once. Everything goes through the caller's tenant, as the API does.

// uiDeliveriesPage is how many deliveries the endpoint's page shows at once.
const uiDeliveriesPage = 50

// uiDeliveryStatuses are the status filters of an endpoint's page.
var uiDeliveryStatuses = []string{"", webhooks.DeliveryPending, webhooks.DeliveryDelivered, webhooks.DeliveryDead}

// moment is a time as the webhook pages show it: how long ago or ahead,
// with the exact time on hover.
type moment struct{ t *time.Time }

// Set reports whether there is a time.
func (m moment) Set() bool { return m.t != nil && !m.t.IsZero() }

// Rel is the time relative to now: "3m ago", "in 59m".
func (m moment) Rel() string {
	if !m.Set() {
		return ""
	}
	d := time.Until(*m.t)
	if d > time.Second {
		return "in " + roughDuration(d)
	}
	return roughDuration(-d) + " ago"
}

// Abs is the exact time, in UTC.
func (m moment) Abs() string {
	if !m.Set() {
		return ""
	}
	return m.t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// deliverySeconds is a delivery time as people read it: 0.4s, 12s, 3m.
func deliverySeconds(v *float64) string {
	switch {
	case v == nil:
		return ""
	case *v < 10:
		return strconv.FormatFloat(*v, 'f', 1, 64) + "s"
	default:
		return roughDuration(time.Duration(*v * float64(time.Second)))
	}
}

// uiWebhook is an endpoint with its delivery figures (zero when it has
// none yet).
type uiWebhook struct {
	webhooks.Webhook
	Health webhooks.Health
}

func (w uiWebhook) Created() moment       { return moment{&w.CreatedAt} }
func (w uiWebhook) LastDelivered() moment { return moment{w.Health.LastDeliveredAt} }
func (w uiWebhook) LastFailure() moment   { return moment{w.Health.LastFailureAt} }
func (w uiWebhook) OldestPending() moment { return moment{w.Health.OldestPendingAt} }
func (w uiWebhook) P50() string           { return deliverySeconds(w.Health.DeliveryP50Seconds) }
func (w uiWebhook) P90() string           { return deliverySeconds(w.Health.DeliveryP90Seconds) }

// uiDelivery is one row of an endpoint's deliveries.
type uiDelivery struct {
	webhooks.Delivery
	// Redeliver is the path of its redelivery form ("" while pending:
	// it is attempted again on its own).
	Redeliver string
}

func (d uiDelivery) Created() moment     { return moment{&d.CreatedAt} }
func (d uiDelivery) LastAttempt() moment { return moment{d.LastAttemptAt} }
func (d uiDelivery) NextAttempt() moment { return moment{d.NextAttemptAt} }

// webhooksPage is the list of the tenant's endpoints.
type webhooksPage struct {
	page
	// Enabled is false when this server keeps no webhooks.
	Enabled bool
	Items   []uiWebhook
}

// webhookPage is one endpoint and a page of its deliveries.
type webhookPage struct {
	page
	Webhook  uiWebhook
	Status   string
	Statuses []string
	Items    []uiDelivery
	// Next is the query of the next page ("" when none); Notice and
	// Problem are a redelivery's outcome, shown once.
	Next            string
	Notice, Problem string
}

// healthOf returns the tenant's endpoints' figures by endpoint.
func (a *api) healthOf(c echo.Context, caller service.Caller) (map[uuid.UUID]webhooks.Health, error) {
	health, err := a.opts.Webhooks.Health(c.Request().Context(), caller)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]webhooks.Health, len(health))
	for _, h := range health {
		out[h.WebhookID] = h
	}
	return out, nil
}

// uiWebhooks lists the tenant's endpoints: GET /ui/webhooks.
func (a *api) uiWebhooks(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	p := webhooksPage{page: pageOf(c, "Webhooks", caller.TenantID), Enabled: a.opts.Webhooks != nil}
	if !p.Enabled {
		return a.render(c, "webhooks.html", p)
	}
	list, err := a.opts.Webhooks.List(c.Request().Context(), caller)
	if err != nil {
		return err
	}
	health, err := a.healthOf(c, caller)
	if err != nil {
		return err
	}
	for _, w := range list {
		p.Items = append(p.Items, uiWebhook{Webhook: w, Health: health[w.ID]})
	}
	return a.render(c, "webhooks.html", p)
}

// uiWebhook shows an endpoint and its deliveries, newest first:
// GET /ui/webhooks/:id?status=&cursor=.
func (a *api) uiWebhook(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	if a.opts.Webhooks == nil {
		return a.render(c, "webhooks.html", webhooksPage{page: pageOf(c, "Webhooks", caller.TenantID)})
	}
	id, err := pathUUID(c, "id", "webhook")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	w, err := a.opts.Webhooks.Get(ctx, caller, id)
	if err != nil {
		return err
	}
	status := c.QueryParam("status")
	deliveries, err := a.opts.Webhooks.Deliveries(ctx, caller, a.opts.EventIDs, id, status, c.QueryParam("cursor"), uiDeliveriesPage)
	if err != nil {
		return err
	}
	health, err := a.healthOf(c, caller)
	if err != nil {
		return err
	}
	p := webhookPage{page: pageOf(c, "Webhook", caller.TenantID), Webhook: uiWebhook{Webhook: *w, Health: health[id]},
		Status: status, Statuses: uiDeliveryStatuses}
	back := url.Values{}
	if status != "" {
		back.Set("status", status)
	}
	if cursor := c.QueryParam("cursor"); cursor != "" {
		back.Set("cursor", cursor)
	}
	for _, d := range deliveries.Items {
		row := uiDelivery{Delivery: d}
		if d.Status != webhooks.DeliveryPending {
			row.Redeliver = "/ui/webhooks/" + id.String() + "/deliveries/" + d.ID.String() + "/redeliver"
			if len(back) > 0 {
				row.Redeliver += "?" + back.Encode()
			}
		}
		p.Items = append(p.Items, row)
	}
	if deliveries.NextCursor != "" {
		q := url.Values{"cursor": {deliveries.NextCursor}}
		if status != "" {
			q.Set("status", status)
		}
		p.Next = q.Encode()
	}
	p.Notice, p.Problem = takeFlash(c, webhookFlash(id))
	return a.render(c, "webhook.html", p)
}

// uiRedeliver queues a delivered or dead delivery again and sends the
// browser back to the endpoint's page (303), which tells how it went:
// POST /ui/webhooks/:id/deliveries/:delivery/redeliver?status=&cursor=
// (the page's filter and position to go back to). The authentication
// middleware holds it to the dashboard's rules for every change: the
// session's CSRF token and the dashboard's own origin.
func (a *api) uiRedeliver(c echo.Context) error {
	caller, err := a.uiCaller(c)
	if err != nil {
		return err
	}
	if a.opts.Webhooks == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/webhooks")
	}
	id, err := pathUUID(c, "id", "webhook")
	if err != nil {
		return err
	}
	did, err := pathUUID(c, "delivery", "delivery")
	if err != nil {
		return err
	}
	back := url.Values{}
	for _, s := range uiDeliveryStatuses[1:] {
		if c.QueryParam("status") == s {
			back.Set("status", s)
		}
	}
	if cursor := c.QueryParam("cursor"); cursor != "" && len(cursor) <= 200 {
		back.Set("cursor", cursor)
	}
	to := "/ui/webhooks/" + id.String()
	if len(back) > 0 {
		to += "?" + back.Encode()
	}
	d, err := a.opts.Webhooks.Redeliver(c.Request().Context(), caller, a.opts.EventIDs, id, did)
	switch {
	case err == nil:
		setFlash(c, webhookFlash(id), "n", fmt.Sprintf("Delivery %s (%s) is queued again: %s.", d.ID, d.EventType, d.Status))
	case service.AsError(err).Status == service.CodeFailedPrecondition:
		setFlash(c, webhookFlash(id), "p", service.AsError(err).Message)
	default:
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

// webhookFlash is the flash key of an endpoint's page.
func webhookFlash(id uuid.UUID) string { return "webhook:" + id.String() }
