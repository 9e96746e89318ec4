// Package tenantagents serves the agents tenants define as rows: it checks
// a definition a tenant uploads (a dotprompt .prompt file or its JSON form,
// package agentdef) and stores it as the agent's next version, and builds
// the runtime's agent of a version on demand, with its interrupts and the
// HTTP tools that call the tenant's own backend (package httptool).
package tenantagents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/agentdef"
	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/httptool"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/protocol"
	"github.com/holdpoint/holdpoint/service/store"
)

// ModelResolver gives tenant agents their models by name.
type ModelResolver interface {
	// Check reports why a definition may not name the model (unknown, or
	// its provider is not configured on this server); nil when it may.
	Check(name string) error
	// Model returns the model (built once, then shared).
	Model(ctx context.Context, name string) (protocol.Model, error)
}

// Manager keeps the tenants' agents: it is the runtime's
// service.TenantAgents and what the API and the CLI change them through.
type Manager struct {
	// Store keeps the agents and their versions.
	Store store.TenantAgentStore
	// Runtime serves them; its registered agents' names are taken.
	Runtime *service.Runtime
	// Models resolves the models definitions name.
	Models ModelResolver
	// AllowLoopback lets tool URLs point at this machine (serve --dev, or
	// --allow-loopback-tools for tests).
	AllowLoopback bool
	// Client configures the HTTP tool calls (retries, body bound); its
	// Policy is set per tenant.
	Client httptool.Client
	// Log hears what the callers of a tool must not see: the host and the
	// address of a tool URL the address policy refused (default
	// slog.Default()).
	Log *slog.Logger

	mu      sync.Mutex
	built   map[string]*service.Agent // tenant/name/version -> agent (versions are immutable)
	clients httptool.Clients
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// Put checks a definition and stores it as the next version of the
// caller's tenant's agent name. A definition error is INVALID_ARGUMENT with
// details {line, field}. A name is ALREADY_EXISTS, naming what has it,
// when it is the name in any case of one of this process's own agents or
// of one any instance recorded as compiled in, or of another of the
// tenant's agents in another case (names are unique case-insensitively).
// Nothing is stored unless every check passes.
func (m *Manager) Put(ctx context.Context, c auth.Caller, name string, src []byte) (*store.TenantAgentVersion, error) {
	if !nameRE.MatchString(name) {
		return nil, store.Errorf(store.CodeInvalidArgument, "agent name %q: want a letter, then letters, digits, _ or -, at most 64", name)
	}
	for _, own := range m.Runtime.AgentNames() {
		if strings.EqualFold(own, name) {
			return nil, store.Errorf(store.CodeAlreadyExists, "agent %q: %q is one of this server's own agents: choose another name", name, own)
		}
	}
	def, err := agentdef.Parse(src)
	if err != nil {
		return nil, definitionError(err)
	}
	switch {
	case def.Name == "":
		def.Name = name
	case def.Name != name:
		return nil, fieldError("name", "the definition names agent %q but is uploaded as %q", def.Name, name)
	}
	if err := m.Models.Check(def.Model); err != nil {
		return nil, fieldError("model", "%v", err)
	}
	policy, err := m.policy(ctx, c.TenantID)
	if err != nil {
		return nil, err
	}
	for i, t := range def.HTTPTools {
		if err := httptool.CheckURL(t.URL, policy); err != nil {
			if httptool.LoopbackRefused(err) {
				// Only the operator may allow this machine's hosts.
				return nil, fieldError(fmt.Sprintf("holdpoint.httpTools[%d].url", i), "%v (loopback hosts need the operator's --allow-loopback-tools)", err)
			}
			return nil, fieldError(fmt.Sprintf("holdpoint.httpTools[%d].url", i), "%v", err)
		}
	}
	// The runtime's own checks (schemas compile, names, ...), on a scratch
	// runtime, with a stand-in model: the real one is built at the first turn.
	a, err := m.agent(c.TenantID, def, 1, standIn{})
	if err != nil {
		return nil, store.Errorf(store.CodeInvalidArgument, "invalid agent definition: %v", err)
	}
	if err := service.NewRuntime(nil, service.Options{}).Register(a); err != nil {
		return nil, store.Errorf(store.CodeInvalidArgument, "%v", err)
	}
	stored, err := agentdef.Marshal(def)
	if err != nil {
		return nil, err
	}
	return m.Store.PutTenantAgent(ctx, c.TenantID, name, string(src), stored, c.Actor)
}

// Info is a tenant's agent as the API shows it.
type Info struct {
	store.TenantAgentRecord
	Versions []store.TenantAgentVersion `json:"versions,omitempty"`
}

// Get returns the caller's tenant's agent with its current definition and
// its versions (version 0), or one version's definition.
func (m *Manager) Get(ctx context.Context, c auth.Caller, name string, version int) (*Info, error) {
	rec, err := m.Store.GetTenantAgent(ctx, c.TenantID, name, version)
	if errors.Is(err, store.ErrNotFound) {
		if version > 0 {
			return nil, store.Errorf(store.CodeNotFound, "agent %q has no version %d", name, version)
		}
		return nil, store.Errorf(store.CodeNotFound, "agent %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	out := &Info{TenantAgentRecord: *rec}
	if version == 0 {
		if out.Versions, err = m.Store.ListTenantAgentVersions(ctx, c.TenantID, name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// List returns the caller's tenant's agents with their current
// definitions.
func (m *Manager) List(ctx context.Context, c auth.Caller) ([]store.TenantAgentRecord, error) {
	return m.Store.ListTenantAgents(ctx, c.TenantID)
}

// Disable disables the caller's tenant's agent: new turns are refused
// (NOT_FOUND), its sessions stay readable.
func (m *Manager) Disable(ctx context.Context, c auth.Caller, name string) error {
	ok, err := m.Store.DisableTenantAgent(ctx, c.TenantID, name, c.Actor)
	if err != nil {
		return err
	}
	if !ok {
		if _, err := m.Store.GetTenantAgent(ctx, c.TenantID, name, 0); errors.Is(err, store.ErrNotFound) {
			return store.Errorf(store.CodeNotFound, "agent %q not found", name)
		}
	}
	return nil
}

// TenantAgent implements service.TenantAgents.
func (m *Manager) TenantAgent(ctx context.Context, tenantID, name string, version int) (*service.Agent, error) {
	rec, err := m.Store.GetTenantAgent(ctx, tenantID, name, version)
	if err != nil {
		return nil, err
	}
	key := tenantID + "\x00" + name + "\x00" + fmt.Sprint(rec.Version)
	m.mu.Lock()
	a, ok := m.built[key]
	m.mu.Unlock()
	if !ok {
		def, err := agentdef.ParseJSON(rec.Definition)
		if err != nil {
			return nil, fmt.Errorf("stored definition of %s version %d: %w", name, rec.Version, err)
		}
		model, err := m.Models.Model(ctx, def.Model)
		if err != nil {
			return nil, store.Errorf(store.CodeFailedPrecondition, "agent %q: model %s is not available on this server: %v", name, def.Model, err)
		}
		if a, err = m.agent(tenantID, def, rec.Version, model); err != nil {
			return nil, fmt.Errorf("stored definition of %s version %d: %w", name, rec.Version, err)
		}
		m.mu.Lock()
		if m.built == nil {
			m.built = map[string]*service.Agent{}
		}
		if len(m.built) > 10000 {
			clear(m.built) // a crude bound; versions rebuild cheaply
		}
		m.built[key] = a
		m.mu.Unlock()
	}
	out := *a
	out.Disabled = rec.DisabledAt != nil
	return &out, nil
}

// TenantAgentNames implements service.TenantAgents.
func (m *Manager) TenantAgentNames(ctx context.Context, tenantID string) ([]string, error) {
	recs, err := m.Store.ListTenantAgents(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range recs {
		if r.DisabledAt == nil {
			names = append(names, r.Name)
		}
	}
	return names, nil
}

// agent builds the runtime's agent of a definition, with its tools'
// approval conditions compiled (once per version: TenantAgent keeps it).
func (m *Manager) agent(tenantID string, def *agentdef.Definition, version int, model protocol.Model) (*service.Agent, error) {
	a := &service.Agent{
		Name: def.Name, Description: def.Description, ServerManaged: true, System: def.System, Model: model,
		Config: def.Config, MaxToolRounds: def.MaxToolRounds, Version: version, ResumeLatest: def.Resume == "latest",
	}
	offered := func(n string) bool { return def.Tools == nil || slices.Contains(def.Tools, n) }
	for _, i := range def.Interrupts {
		if !offered(i.Name) {
			continue
		}
		t := &service.Tool{Name: i.Name, Description: i.Description, InputSchema: i.Input, OutputSchema: i.Output,
			Interrupt: true, ExpiresAfter: i.ExpiresAfter}
		if i.OnExpire != nil {
			t.OnExpire = &service.ExpireRespond{Output: i.OnExpire}
		}
		a.Tools = append(a.Tools, t)
	}
	for _, h := range def.HTTPTools {
		if !offered(h.Name) {
			continue
		}
		var approval *approval.Policy
		if h.Approval != nil {
			var err error
			if approval, err = h.Approval.Policy(h.Name); err != nil {
				return nil, err
			}
		}
		// The receiver deduplicates by call id (the contract of an HTTP
		// tool), so a turn taken over may call again, except a gated
		// call: whether a call a human approved ran is never left to the
		// receiver's keeping of that contract. Its call becomes unknown,
		// and a human confirms, cancels or retries it (on the same call id).
		a.Tools = append(a.Tools, &service.Tool{Name: h.Name, Description: h.Description, InputSchema: h.Input,
			OutputSchema: h.Output, Run: m.httpRun(toolSource{tenantID, def.Name, version}, h), Prepare: m.prepareHTTP,
			Idempotent: approval == nil, Approval: approval})
	}
	return a, nil
}

// policy is the tenant's tool URL policy.
func (m *Manager) policy(ctx context.Context, tenantID string) (httptool.Policy, error) {
	hosts, err := m.Store.TenantToolHosts(ctx, tenantID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return httptool.Policy{}, err
	}
	return httptool.Policy{AllowLoopback: m.AllowLoopback, AllowedHosts: hosts}, nil
}

// client is the HTTP client of a tenant's policy (one transport per
// policy, so connections are reused), with m.Client's settings.
func (m *Manager) client(p httptool.Policy) *httptool.Client {
	m.mu.Lock()
	if m.clients.Base == nil {
		m.clients.Base = &m.Client
	}
	m.mu.Unlock()
	return m.clients.For(p)
}

// toolSource is the agent whose HTTP tools make calls, as the calls' signed
// bodies name it.
type toolSource struct {
	tenantID string
	agent    string
	version  int
}

// toolAnswer is what an HTTP tool's endpoint answers: its output, or an
// interrupt that pauses the turn (a confirmation the endpoint asks for).
type toolAnswer struct {
	Output    json.RawMessage `json:"output"`
	Interrupt json.RawMessage `json:"interrupt"`
}

// preparedHTTP is what an HTTP tool's call needs from the platform, read
// before the call is recorded.
type preparedHTTP struct {
	secrets [][]byte
	policy  httptool.Policy
}

// prepareHTTP is an HTTP tool's Prepare: the tenant's signing secrets and
// address policy.
func (m *Manager) prepareHTTP(ctx context.Context, tenantID string) (any, error) {
	secrets, err := m.Runtime.SigningSecrets(ctx, tenantID, keys.PurposeTool)
	if err != nil {
		return nil, err
	}
	policy, err := m.policy(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	return &preparedHTTP{secrets: secrets, policy: policy}, nil
}

// httpRun is an HTTP tool's Run: it POSTs the signed call and reads the
// endpoint's answer (a gated tool's call has been approved by then: the
// platform asks before Run runs). The signed body names the tenant, the
// agent, the tool and the URL, so that the call cannot be replayed to
// another tool's endpoint (httptool.VerifyToolCall).
func (m *Manager) httpRun(src toolSource, h agentdef.HTTPTool) func(context.Context, service.ToolCall) (json.RawMessage, error) {
	tenantID := src.tenantID
	return func(ctx context.Context, call service.ToolCall) (json.RawMessage, error) {
		p, ok := call.Prepared.(*preparedHTTP)
		if !ok {
			v, err := m.prepareHTTP(ctx, tenantID)
			if err != nil {
				return nil, err
			}
			p = v.(*preparedHTTP)
		}
		secrets, policy := p.secrets, p.policy
		snapshotID := ""
		if call.TurnID != "" && call.SessionID != "" {
			snapshotID = call.TurnID
		}
		body, err := json.Marshal(httptool.ToolCall{Tenant: tenantID, Agent: src.agent, AgentVersion: src.version,
			Tool: h.Name, URL: h.URL, CallID: call.ID, Input: call.Input, SessionID: call.SessionID,
			SnapshotID: snapshotID, EndUser: call.EndUser, Resumed: call.Resumed})
		if err != nil {
			return nil, err
		}
		timeout := h.Timeout
		if timeout <= 0 {
			timeout = 10 * time.Second
		}
		res, err := m.client(policy).Do(ctx, httptool.Request{URL: h.URL, Timeout: timeout, ID: call.ID, Body: body, Secrets: secrets})
		if res != nil && call.Trace != nil {
			call.Trace.HTTPStatus, call.Trace.Attempts = res.Status, res.Attempts
		}
		if err != nil {
			m.logRefusal(src, h.Name, err)
			return nil, callError(h.Name, h.Approval != nil, err)
		}
		var ans toolAnswer
		if err := json.Unmarshal(res.Body, &ans); err != nil || (ans.Output == nil) == (ans.Interrupt == nil) {
			return nil, store.Errorf(store.CodeFailedPrecondition, "tool %s: its endpoint answered %d with a body that is not {\"output\": ...} or {\"interrupt\": ...}", h.Name, res.Status)
		}
		if ans.Interrupt != nil {
			return nil, &service.InterruptError{Metadata: ans.Interrupt}
		}
		if v := service.ValidateJSON(h.Output, ans.Output); len(v) > 0 {
			e := store.Errorf(store.CodeFailedPrecondition, "tool %s: its endpoint answered an output that does not match the tool's output schema: %s", h.Name, strings.Join(v, "; "))
			e.Details = map[string]any{"violations": v}
			return nil, e
		}
		return ans.Output, nil
	}
}

// logRefusal logs, for the operator, why the address policy refused a
// tool call: the host and the address, which callError keeps from the
// client.
func (m *Manager) logRefusal(src toolSource, tool string, err error) {
	var ce *httptool.CallError
	if !errors.As(err, &ce) || !ce.PolicyRefusal() {
		return
	}
	log := m.Log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("tenant tool call refused", "tenant", src.tenantID, "agent", src.agent, "version", src.version, "tool", tool, "err", err)
}

// callError is what the client learns of a failed call: what went wrong,
// never the tenant's URL, the host, the address it resolved to or the
// endpoint's body. A gated (so approved) call the endpoint received and
// never answered may have run (service.ErrMayHaveRun): it is recorded
// unknown.
func callError(tool string, gated bool, err error) error {
	var ce *httptool.CallError
	if !errors.As(err, &ce) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return store.Errorf(store.CodeUnavailable, "tool %s: its endpoint could not be called", tool)
	}
	if ce.MayHaveRun && gated {
		// An approved call is never left to the receiver's keeping of
		// the idempotency contract (see Idempotent above).
		return fmt.Errorf("%w: %w", service.ErrMayHaveRun, store.Errorf(store.CodeAborted,
			"tool %s: its endpoint received the call and did not answer (%d attempts); it may have run, and it is not run again: a human must confirm, cancel or retry it with the same idempotency key", tool, ce.Attempts))
	}
	switch ce.Kind {
	case httptool.KindRefused:
		if ce.PolicyRefusal() {
			return store.Errorf(store.CodeFailedPrecondition, "tool %s: its URL is not allowed by the address policy", tool)
		}
		return store.Errorf(store.CodeFailedPrecondition, "tool %s: its endpoint answered a redirect, which is not followed", tool)
	case httptool.KindStatus:
		if ce.Status >= 500 {
			return store.Errorf(store.CodeUnavailable, "tool %s: its endpoint answered %d after %d attempts", tool, ce.Status, ce.Attempts)
		}
		return store.Errorf(store.CodeFailedPrecondition, "tool %s: its endpoint answered %d", tool, ce.Status)
	case httptool.KindTooLarge:
		return store.Errorf(store.CodeFailedPrecondition, "tool %s: its endpoint's answer is too large", tool)
	case httptool.KindTimeout:
		return store.Errorf(store.CodeUnavailable, "tool %s: its endpoint did not answer in time (%d attempts)", tool, ce.Attempts)
	default:
		return store.Errorf(store.CodeUnavailable, "tool %s: its endpoint could not be reached (%d attempts)", tool, ce.Attempts)
	}
}

// definitionError turns a parse error into INVALID_ARGUMENT with its line
// and field as details.
func definitionError(err error) error {
	var de *agentdef.Error
	if errors.As(err, &de) {
		e := store.Errorf(store.CodeInvalidArgument, "invalid agent definition: %s", de.Error())
		d := map[string]any{}
		if de.Line > 0 {
			d["line"] = de.Line
		}
		if de.Field != "" {
			d["field"] = de.Field
		}
		if len(d) > 0 {
			e.Details = d
		}
		return e
	}
	return store.Errorf(store.CodeInvalidArgument, "invalid agent definition: %v", err)
}

func fieldError(field, format string, args ...any) error {
	e := store.Errorf(store.CodeInvalidArgument, "invalid agent definition: %s: %s", field, fmt.Sprintf(format, args...))
	e.Details = map[string]any{"field": field}
	return e
}

// standIn is the model of a definition being checked.
type standIn struct{}

func (standIn) Name() string { return "check" }

func (standIn) Generate(context.Context, *protocol.ModelRequest, func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	return nil, errors.New("not a model")
}
