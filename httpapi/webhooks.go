package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/webhooks"
)

// Bounds of the deliveries list.
const (
	defaultDeliveriesPage = 50
	maxDeliveriesPage     = 200
)

// registerWebhooks adds the routes of the tenants' webhook endpoints.
func (a *api) registerWebhooks(g *echo.Group) {
	g.POST("/webhooks", a.createWebhook)
	g.GET("/webhooks", a.listWebhooks)
	g.GET("/webhooks/:id", a.getWebhook)
	g.PATCH("/webhooks/:id", a.updateWebhook)
	g.DELETE("/webhooks/:id", a.deleteWebhook)
	g.POST("/webhooks/:id/rotate-secret", a.rotateWebhookSecret)
	g.GET("/webhooks/:id/deliveries", a.listWebhookDeliveries)
	g.GET("/webhooks/:id/deliveries/:delivery", a.getWebhookDelivery)
	g.POST("/webhooks/:id/deliveries/:delivery/redeliver", a.redeliverWebhookDelivery)
}

// webhookCaller is the caller of a webhook route, when this server keeps
// webhooks.
func (a *api) webhookCaller(c echo.Context) (service.Caller, error) {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return caller, err
	}
	if a.opts.Webhooks == nil {
		return caller, service.Errorf(codeUnimplemented, "webhooks are not enabled on this server")
	}
	return caller, nil
}

// webhookTarget is webhookCaller and the endpoint the path names (:id).
func (a *api) webhookTarget(c echo.Context) (service.Caller, uuid.UUID, error) {
	caller, err := a.webhookCaller(c)
	if err != nil {
		return caller, uuid.Nil, err
	}
	id, err := pathUUID(c, "id", "webhook")
	return caller, id, err
}

// pathUUID is the path parameter name as an id; one that is not an id
// names nothing (404 "what not found").
func pathUUID(c echo.Context, name, what string) (uuid.UUID, error) {
	raw := c.Param(name)
	id, err := uuid.Parse(raw)
	if err != nil || len(raw) != 36 {
		return uuid.Nil, service.Errorf(service.CodeNotFound, "%s not found", what)
	}
	return id, nil
}

const webhookShape = `{"url": "https://...", "eventTypes": ["interrupt.created", ...], "description": "...", "enabled": true}`

// webhookInput decodes the body of a create or an update, strictly.
func webhookInput(c echo.Context) (webhooks.Input, error) {
	var in webhooks.Input
	if ok, err := decodeBody(c, &in, webhookShape, true); err != nil {
		return in, err
	} else if !ok {
		return in, invalid("missing body: expected %s", webhookShape)
	}
	return in, nil
}

// webhookView is an endpoint with its delivery figures.
type webhookView struct {
	webhooks.Webhook
	Health *webhooks.Health `json:"health,omitempty"`
}

// createWebhook adds an endpoint: POST /api/v1/webhooks. The answer (201)
// carries the signing secret, shown this once.
func (a *api) createWebhook(c echo.Context) error {
	caller, err := a.webhookCaller(c)
	if err != nil {
		return err
	}
	in, err := webhookInput(c)
	if err != nil {
		return err
	}
	w, err := a.opts.Webhooks.Create(c.Request().Context(), caller, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, w)
}

// listWebhooks answers the tenant's endpoints with their delivery figures:
// GET /api/v1/webhooks.
func (a *api) listWebhooks(c echo.Context) error {
	caller, err := a.webhookCaller(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	list, err := a.opts.Webhooks.List(ctx, caller)
	if err != nil {
		return err
	}
	views, err := a.webhookViews(c, caller, list)
	if err != nil {
		return err
	}
	return writeJSON(c, map[string]any{"items": views})
}

// webhookViews are endpoints with their delivery figures.
func (a *api) webhookViews(c echo.Context, caller service.Caller, list []webhooks.Webhook) ([]webhookView, error) {
	health, err := a.opts.Webhooks.Health(c.Request().Context(), caller)
	if err != nil {
		return nil, err
	}
	byID := map[uuid.UUID]*webhooks.Health{}
	for i := range health {
		byID[health[i].WebhookID] = &health[i]
	}
	out := make([]webhookView, len(list))
	for i, w := range list {
		out[i] = webhookView{Webhook: w, Health: byID[w.ID]}
	}
	return out, nil
}

// getWebhook answers one endpoint: GET /api/v1/webhooks/:id.
func (a *api) getWebhook(c echo.Context) error {
	caller, id, err := a.webhookTarget(c)
	if err != nil {
		return err
	}
	w, err := a.opts.Webhooks.Get(c.Request().Context(), caller, id)
	if err != nil {
		return err
	}
	views, err := a.webhookViews(c, caller, []webhooks.Webhook{*w})
	if err != nil {
		return err
	}
	return writeJSON(c, views[0])
}

// updateWebhook changes the fields the body has: PATCH /api/v1/webhooks/:id.
func (a *api) updateWebhook(c echo.Context) error {
	caller, id, err := a.webhookTarget(c)
	if err != nil {
		return err
	}
	in, err := webhookInput(c)
	if err != nil {
		return err
	}
	w, err := a.opts.Webhooks.Update(c.Request().Context(), caller, id, in)
	if err != nil {
		return err
	}
	return writeJSON(c, w)
}

// deleteWebhook removes an endpoint and its deliveries:
// DELETE /api/v1/webhooks/:id.
func (a *api) deleteWebhook(c echo.Context) error {
	caller, id, err := a.webhookTarget(c)
	if err != nil {
		return err
	}
	if err := a.opts.Webhooks.Delete(c.Request().Context(), caller, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// rotateWebhookSecret gives an endpoint a new signing secret (shown this
// once); the old ones keep signing for the overlap (default 24h):
// POST /api/v1/webhooks/:id/rotate-secret with {"overlap": "1h"}.
func (a *api) rotateWebhookSecret(c echo.Context) error {
	caller, id, err := a.webhookTarget(c)
	if err != nil {
		return err
	}
	var in struct {
		Overlap *string `json:"overlap"`
	}
	if _, err := decodeBody(c, &in, `{"overlap": "24h"}`, true); err != nil {
		return err
	}
	var overlap time.Duration
	if in.Overlap != nil {
		if overlap, err = time.ParseDuration(*in.Overlap); err != nil || overlap < 0 {
			e := service.Errorf(service.CodeInvalidArgument, "overlap: want a duration such as 24h or 30m")
			e.Details = map[string]any{"field": "overlap"}
			return e
		}
	}
	secret, err := a.opts.Webhooks.RotateSecret(c.Request().Context(), caller, id, overlap)
	if err != nil {
		return err
	}
	return writeJSON(c, map[string]string{"id": id.String(), "secret": secret})
}

// listWebhookDeliveries answers a page of an endpoint's deliveries, newest
// first: GET /api/v1/webhooks/:id/deliveries?status=&limit=&cursor=.
func (a *api) listWebhookDeliveries(c echo.Context) error {
	caller, id, err := a.webhookTarget(c)
	if err != nil {
		return err
	}
	limit := defaultDeliveriesPage
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxDeliveriesPage {
			e := service.Errorf(service.CodeInvalidArgument, "limit: want 1 to %d", maxDeliveriesPage)
			e.Details = map[string]any{"field": "limit"}
			return e
		}
		limit = n
	}
	page, err := a.opts.Webhooks.Deliveries(c.Request().Context(), caller, a.opts.EventIDs, id,
		c.QueryParam("status"), c.QueryParam("cursor"), limit)
	if err != nil {
		return err
	}
	if page.Items == nil {
		page.Items = []webhooks.Delivery{}
	}
	return writeJSON(c, page)
}

// deliveryIDs is webhookTarget and the delivery the path names (:delivery).
func (a *api) deliveryIDs(c echo.Context) (service.Caller, uuid.UUID, uuid.UUID, error) {
	caller, id, err := a.webhookTarget(c)
	if err != nil {
		return caller, uuid.Nil, uuid.Nil, err
	}
	did, err := pathUUID(c, "delivery", "delivery")
	return caller, id, did, err
}

// getWebhookDelivery answers one delivery:
// GET /api/v1/webhooks/:id/deliveries/:delivery.
func (a *api) getWebhookDelivery(c echo.Context) error {
	caller, id, did, err := a.deliveryIDs(c)
	if err != nil {
		return err
	}
	d, err := a.opts.Webhooks.Delivery(c.Request().Context(), caller, a.opts.EventIDs, id, did)
	if err != nil {
		return err
	}
	return writeJSON(c, d)
}

// redeliverWebhookDelivery queues a delivered or dead delivery again (202):
// POST /api/v1/webhooks/:id/deliveries/:delivery/redeliver.
func (a *api) redeliverWebhookDelivery(c echo.Context) error {
	caller, id, did, err := a.deliveryIDs(c)
	if err != nil {
		return err
	}
	d, err := a.opts.Webhooks.Redeliver(c.Request().Context(), caller, a.opts.EventIDs, id, did)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}
