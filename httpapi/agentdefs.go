package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/service"
)

// mimeDotprompt is the media type of a .prompt file uploaded as is; it is
// not one a browser form can send, so in dev mode it asks for a CORS
// preflight like JSON does.
const mimeDotprompt = "text/x-dotprompt"

// registerAgentDefs adds the routes of the tenants' own agents.
func (a *api) registerAgentDefs(g *echo.Group) {
	g.GET("/agents", a.listAgentDefs)
	g.GET("/agents/:name", a.getAgentDef)
	g.PUT("/agents/:name", a.putAgentDef)
	g.DELETE("/agents/:name", a.disableAgentDef)
}

// isAgentUpload reports whether the request is a .prompt file uploaded to
// PUT /api/v1/agents/:name (its body is not JSON).
func isAgentUpload(c echo.Context) bool {
	if c.Request().Method != http.MethodPut || c.Path() != "/api/v1/agents/:name" {
		return false
	}
	mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return err == nil && mt == mimeDotprompt
}

func (a *api) agentDefs() error {
	if a.opts.Agents == nil {
		return service.Errorf(codeUnimplemented, "this server does not keep tenants' agents")
	}
	return nil
}

// putAgentDef stores a new version of the caller's tenant's agent:
// PUT /api/v1/agents/:name with a .prompt file (Content-Type
// text/x-dotprompt) or its JSON form (application/json).
func (a *api) putAgentDef(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	if err := a.agentDefs(); err != nil {
		return err
	}
	src, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	v, err := a.opts.Agents.Put(c.Request().Context(), caller, c.Param("name"), src)
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"name": c.Param("name"), "version": v.Version, "createdBy": v.CreatedBy, "createdAt": v.CreatedAt})
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	return c.JSONBlob(http.StatusCreated, b)
}

// getAgentDef answers the caller's tenant's agent: its current definition
// and its versions, or ?version=N's definition.
func (a *api) getAgentDef(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	if err := a.agentDefs(); err != nil {
		return err
	}
	version := 0
	if v := c.QueryParam("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<30 {
			return invalid("version must be a positive integer")
		}
		version = n
	}
	info, err := a.opts.Agents.Get(c.Request().Context(), caller, c.Param("name"), version)
	if err != nil {
		return err
	}
	return writeJSON(c, info)
}

// listAgentDefs answers the caller's tenant's agents.
func (a *api) listAgentDefs(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	if err := a.agentDefs(); err != nil {
		return err
	}
	items, err := a.opts.Agents.List(c.Request().Context(), caller)
	if err != nil {
		return err
	}
	if items == nil {
		items = []service.TenantAgentRecord{}
	}
	return writeJSON(c, map[string]any{"items": items})
}

// disableAgentDef disables the caller's tenant's agent.
func (a *api) disableAgentDef(c echo.Context) error {
	caller, err := a.opts.Caller(c)
	if err != nil {
		return err
	}
	if err := a.agentDefs(); err != nil {
		return err
	}
	if err := a.opts.Agents.Disable(c.Request().Context(), caller, c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
