package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/keys"
	"github.com/holdpoint/holdpoint/service/limits"
	"github.com/holdpoint/holdpoint/service/observe"
	"github.com/holdpoint/holdpoint/service/readiness"
)

// Caller is who an invocation acts for (defined in service/auth, which
// the features beside the engine share).
type Caller = auth.Caller

// Options configure a Runtime.
type Options struct {
	Logger *slog.Logger
	// HeartbeatInterval is how often a detached turn refreshes its pending
	// snapshot (default 5s).
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is the age after which a pending snapshot's heartbeat
	// is stale and the snapshot reads as expired (default 15s).
	HeartbeatTimeout time.Duration
	// Observer hears turns, model and tool calls, interrupts and detached
	// jobs, for metrics (default: nothing).
	Observer observe.Observer
	// TracerProvider makes the spans of turns, model and tool calls and
	// store batches (default: none).
	TracerProvider trace.TracerProvider
	// EarlyClaims makes every resume claim its interrupts before the model
	// runs, in a transaction of its own. By default a synchronous,
	// unstreamed resume of a prompt agent that runs no tool claims them
	// with its turn's write: one commit fewer, but the inbox shows the
	// interrupts pending while the model works, and a resume that loses a
	// race has paid for a model call.
	EarlyClaims bool
	// Limits bound what one turn may do, whatever the model asks (zero
	// fields: limits.DefaultTurn).
	Limits limits.Turn
	// Detach bounds the detached turns (zero fields: limits.DefaultDetach).
	Detach limits.Detach
	// LostToolCallAfter is how long a tool call may stay running, with no
	// detached job running its turn, before the sweep marks it unknown
	// (default DefaultLostToolCallAfter). A synchronous turn writes its
	// calls' outcomes only with its end, so a call its dead instance left
	// running is found by nothing else. Keep it well above any tool's run
	// time: an outcome that lands after the mark is still recorded.
	LostToolCallAfter time.Duration
	// Readiness, when set, keeps the background workers (the detached
	// turn runner, the deadline sweeper) from taking new work while the
	// instance is not ready; nil: always ready.
	Readiness *readiness.Readiness
}

// DefaultLostToolCallAfter is the sweep's bound when Options sets none:
// far beyond any turn a client waits for.
const DefaultLostToolCallAfter = time.Hour

// Runtime runs the registered agents' turns and persists their sessions.
type Runtime struct {
	store  Store
	log    *slog.Logger
	opts   Options
	obs    observe.Observer
	tracer trace.Tracer
	mu     sync.RWMutex
	agents map[string]*Agent
	// tenantAgents are the agents tenants define (nil: none).
	tenantAgents TenantAgents

	// bg is the lifetime of detached turns: they outlive the request that
	// started them and stop at Shutdown.
	bg       context.Context
	bgCancel context.CancelFunc
	bgWG     sync.WaitGroup
	running  sync.Map // JobRef -> context.CancelFunc of its detached turn

	// instanceID names this process as the owner of the jobs it runs.
	instanceID string
	// keys caches the tenants' keys (state signatures, event ids).
	keys *keys.Ring
	// abortsHeard is true while the abort listener is connected.
	abortsHeard atomic.Bool
	// stopping is set at shutdown: no new jobs, and cancelled detached
	// turns keep their jobs for another instance.
	stopping atomic.Bool

	// limits and detach are opts' bounds with their defaults filled in.
	limits limits.Turn
	detach limits.Detach
	// jobSlots holds a token for each detached turn running here, its own
	// and those taken over alike (detach.PerInstance); jobKick wakes the
	// job runner when a slot frees, so a queued turn starts at once.
	jobSlots chan struct{}
	jobKick  chan struct{}
	// jobRounds counts the job runner's rounds (each a look at the queue,
	// or a decision not to look), so a test can wait for the runner to
	// have looked instead of sleeping.
	jobRounds atomic.Uint64
	// memory returns the heap to the system after turns that held much.
	memory memoryReturner
}

// NewRuntime returns a runtime over store.
func NewRuntime(store Store, opts Options) *Runtime {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 5 * time.Second
	}
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = 15 * time.Second
	}
	if opts.Observer == nil {
		opts.Observer = observe.Nop{}
	}
	if opts.LostToolCallAfter <= 0 {
		opts.LostToolCallAfter = DefaultLostToolCallAfter
	}
	bg, cancel := context.WithCancel(context.Background())
	turnLimits, detach := opts.Limits.WithDefaults(), opts.Detach.WithDefaults()
	return &Runtime{
		limits:     turnLimits,
		detach:     detach,
		jobSlots:   make(chan struct{}, detach.PerInstance),
		jobKick:    make(chan struct{}, 1),
		store:      store,
		log:        opts.Logger,
		opts:       opts,
		obs:        opts.Observer,
		tracer:     tracerOf(opts.TracerProvider),
		agents:     map[string]*Agent{},
		bg:         bg,
		bgCancel:   cancel,
		instanceID: uuid.NewString(),
		keys:       keys.NewRing(signingKeysOf(store)),
	}
}

// Register adds an agent. Names are unique.
func (r *Runtime) Register(a *Agent) error {
	if err := a.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.agents[a.Name]; ok {
		return Errorf(CodeAlreadyExists, "agent %q is already registered", a.Name)
	}
	r.agents[a.Name] = a
	return nil
}

// Lookup returns the named agent or NOT_FOUND.
func (r *Runtime) Lookup(name string) (*Agent, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.agents[name]
	if !ok {
		return nil, Errorf(CodeNotFound, "agent %q not found", name)
	}
	return a, nil
}

// AgentNames lists the registered agents, sorted.
func (r *Runtime) AgentNames() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.agents))
	for n := range r.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Shutdown stops taking jobs, cancels the detached turns still running here,
// waits for them (or for ctx), and hands their jobs back so another
// instance resumes them at once instead of waiting for a stale heartbeat.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.stopping.Store(true)
	r.bgCancel()
	done := make(chan struct{})
	go func() { r.bgWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	n, rerr := r.store.ReleaseJobs(rctx, r.instanceID)
	if rerr != nil {
		r.log.Warn("handing back detached turns failed; they resume once their heartbeat is stale", "err", rerr)
	} else if n > 0 {
		r.log.Info("handed back detached turns", "jobs", n)
	}
	return err
}

// signingKeysOf is the keyring's loader over store; a runtime without a
// store (a parsing test) has no keys, so what it returns is unsigned.
func signingKeysOf(store Store) func(ctx context.Context, tenantID, purpose string) ([]SigningKey, error) {
	if store == nil {
		return func(context.Context, string, string) ([]SigningKey, error) {
			return nil, errors.New("no store: no keys")
		}
	}
	return store.SigningKeys
}

// TenantAgents supplies the agents tenants define as rows, served next to
// the agents registered in the binary (which take precedence).
type TenantAgents interface {
	// TenantAgent returns the tenant's agent at version (0: its current
	// version), Disabled set when the tenant disabled it; ErrNotFound when
	// the tenant has no such agent or version.
	TenantAgent(ctx context.Context, tenantID, name string, version int) (*Agent, error)
	// TenantAgentNames lists the tenant's enabled agents.
	TenantAgentNames(ctx context.Context, tenantID string) ([]string, error)
}

// SetTenantAgents makes the runtime serve the agents tenants define. Call
// it before serving.
func (r *Runtime) SetTenantAgents(ta TenantAgents) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tenantAgents = ta
}

// LookupFor returns the agent name serves for the caller: a registered
// agent, else the caller's tenant's own (which may be disabled), else
// NOT_FOUND.
func (r *Runtime) LookupFor(ctx context.Context, c Caller, name string) (*Agent, error) {
	if a, err := r.Lookup(name); err == nil {
		return a, nil
	}
	return r.tenantAgent(ctx, c, name, 0)
}

// agentOfSnapshot is the agent that goes on from a snapshot of the agent
// name a (what LookupFor found) wrote: always the kind of definition that
// wrote it (compiled into the binary when its version is 0, else the
// tenant's agent), at the version it records, unless a tenant's agent says
// resume: latest and the snapshot is not paused. When this instance has no
// such definition the error is FAILED_PRECONDITION, before anything ran.
func (r *Runtime) agentOfSnapshot(ctx context.Context, c Caller, a *Agent, snapshotID string, version int, paused bool) (*Agent, error) {
	switch {
	case version == 0 && a.Version == 0:
		return a, nil
	case version == 0:
		return nil, snapshotKindError(snapshotID, "the compiled agent "+a.Name, a, paused)
	case a.Version == version || (a.Version > 0 && a.ResumeLatest && !paused):
		return a, nil
	}
	at, err := r.tenantAgent(ctx, c, a.Name, version)
	if e := AsError(err); err != nil && e.Status == CodeNotFound {
		return nil, snapshotKindError(snapshotID, fmt.Sprintf("tenant agent %s version %d", a.Name, version), a, paused)
	}
	if err != nil {
		return nil, err
	}
	if at.Disabled {
		return nil, Errorf(CodeNotFound, "agent %q not found", a.Name)
	}
	return at, nil
}

// snapshotKindError refuses to go on from a snapshot on another definition
// than the one that wrote it.
func snapshotKindError(snapshotID, wrote string, here *Agent, paused bool) error {
	serves := "the compiled agent " + here.Name
	if here.Version > 0 {
		serves = fmt.Sprintf("tenant agent %s version %d", here.Name, here.Version)
	}
	verb, what := "written", "go on from"
	if paused {
		verb, what = "paused", "resume"
	}
	return Errorf(CodeFailedPrecondition, "snapshot %s was %s by %s; this instance serves %s: it cannot %s it", snapshotID, verb, wrote, serves, what)
}

// tenantAgent is the caller's tenant's agent at version (0: current).
func (r *Runtime) tenantAgent(ctx context.Context, c Caller, name string, version int) (*Agent, error) {
	r.mu.RLock()
	ta := r.tenantAgents
	r.mu.RUnlock()
	if ta == nil || c.TenantID == "" {
		return nil, Errorf(CodeNotFound, "agent %q not found", name)
	}
	a, err := ta.TenantAgent(ctx, c.TenantID, name, version)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "agent %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

// AgentNamesFor lists the agents the caller may use: the registered ones
// and its tenant's enabled ones, sorted.
func (r *Runtime) AgentNamesFor(ctx context.Context, c Caller) ([]string, error) {
	names := r.AgentNames()
	r.mu.RLock()
	ta := r.tenantAgents
	r.mu.RUnlock()
	if ta == nil || c.TenantID == "" {
		return names, nil
	}
	own, err := ta.TenantAgentNames(ctx, c.TenantID)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range names {
		seen[n] = true
	}
	for _, n := range own {
		if !seen[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

// SigningSecrets returns a tenant's secrets of a purpose that still
// verify, newest (the signing one) first: what an HTTP tool call is signed
// with (keys.PurposeTool) during a rotation's grace period.
func (r *Runtime) SigningSecrets(ctx context.Context, tenantID, purpose string) ([][]byte, error) {
	keys, err := r.keys.Keys(ctx, tenantID, purpose, false)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.Secret)
	}
	return out, nil
}

// RecentSessions lists the caller's tenant's most recently updated
// sessions (at most limit, 1 to 100) after the position after (the last
// row of the previous page; zero for the first), with their latest
// snapshot's status as reads show it (a stale pending one is expired). An
// end user's caller sees only its own.
func (r *Runtime) RecentSessions(ctx context.Context, c Caller, after SessionPosition, limit int) ([]SessionSummary, error) {
	if limit < 1 || limit > 100 {
		return nil, Errorf(CodeInvalidArgument, "limit must be from 1 to 100")
	}
	found, err := r.store.RecentSessions(ctx, c.TenantID, c.EndUser, after, limit)
	if err != nil {
		return nil, err
	}
	for i := range found {
		found[i].Status = r.EffectiveStatus(&Snapshot{Status: found[i].Status, HeartbeatAt: found[i].HeartbeatAt})
	}
	return found, nil
}

// FindSessions finds the caller's tenant's sessions whose id is q, or whose
// end user is q (at most 50, newest first). An end user's caller sees only
// its own.
func (r *Runtime) FindSessions(ctx context.Context, c Caller, q string) ([]SessionSummary, error) {
	if q == "" || len(q) > 256 {
		return nil, Errorf(CodeInvalidArgument, "search for a session id or an end user (1 to 256 bytes)")
	}
	found, err := r.store.FindSessions(ctx, c.TenantID, q, 50)
	if err != nil {
		return nil, err
	}
	if c.EndUser == "" {
		return found, nil
	}
	var own []SessionSummary
	for _, s := range found {
		if s.EndUser == c.EndUser {
			own = append(own, s)
		}
	}
	return own, nil
}

// SessionSnapshots lists a session's snapshots, newest first (at most
// 100), for operators: the caller's tenant, and its end user's only.
func (r *Runtime) SessionSnapshots(ctx context.Context, c Caller, sessionID string) ([]Snapshot, error) {
	return r.sessionSnapshots(ctx, c, c.Scope(), sessionID)
}

// OperatorSessionSnapshots is SessionSnapshots as the tenant's operators
// see it (the dashboard's session page): of any end user's session.
func (r *Runtime) OperatorSessionSnapshots(ctx context.Context, c Caller, sessionID string) ([]Snapshot, error) {
	return r.sessionSnapshots(ctx, c, OperatorScope(c.TenantID), sessionID)
}

func (r *Runtime) sessionSnapshots(ctx context.Context, c Caller, scope Scope, sessionID string) ([]Snapshot, error) {
	sess, err := r.store.LoadSession(ctx, scope, sessionID)
	if errors.Is(err, ErrNotFound) {
		return nil, Errorf(CodeNotFound, "Session %s not found", sessionID)
	}
	if err != nil {
		return nil, err
	}
	snaps, err := r.store.ListSessionSnapshots(ctx, c.TenantID, sess.ID)
	if err != nil {
		return nil, err
	}
	for i := range snaps {
		snaps[i].Status = r.EffectiveStatus(&snaps[i])
	}
	return snaps, nil
}

// InstanceID names this process among the instances sharing the database
// (the owner of its detached turns and webhook deliveries).
func (r *Runtime) InstanceID() string { return r.instanceID }
