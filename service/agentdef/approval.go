package agentdef

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/holdpoint/holdpoint/service/approval"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/store"
)

// Bounds of an approval condition: its length, and what one evaluation
// may cost (CEL's cost units; a comparison is about 1, a comprehension
// pays for each element it visits).
const (
	MaxConditionLength = 1000
	conditionCostLimit = 10000
)

// Approval is an HTTP tool's approval policy: the platform pauses each call
// (or each one its condition picks) before it runs, until humans approve it
// (see approval.Policy). `approval: true` is the empty policy: every
// call, one approval by whoever may decide the session's interrupts.
type Approval struct {
	// When is a CEL condition over the tool's input (the variable input,
	// the call's input as decoded JSON: numbers are doubles), e.g.
	// "input.amount > 1000"; empty: every call needs approval.
	When string
	// Scope is the scope an approver's key must hold; empty: any operator.
	Scope string
	// Approvals is how many distinct approvers are needed (0: one).
	Approvals int
	// AllowEdit lets an approver change the input before approving.
	AllowEdit bool
	// Attempts bounds how many times an approved call runs (0: the
	// platform's default).
	Attempts int
	// Escalate hands a call still pending after a while to another scope.
	Escalate *approval.Escalation
}

// Policy is the runtime's policy of a, with its condition compiled: build
// it once per agent version (compiling costs more than evaluating). tool
// names the tool in errors.
func (a *Approval) Policy(tool string) (*approval.Policy, error) {
	p := a.bounds()
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("tool %s: approval: %w", tool, err)
	}
	if a.When != "" {
		c, err := CompileCondition(a.When)
		if err != nil {
			return nil, fmt.Errorf("tool %s: approval.when: %w", tool, err)
		}
		p.When = func(ctx context.Context, input json.RawMessage) (bool, error) {
			ok, err := c.Eval(ctx, input)
			if err != nil {
				return false, store.Errorf(store.CodeFailedPrecondition, "tool %s: its approval condition could not be evaluated: %v", tool, err)
			}
			return ok, nil
		}
	}
	return p, nil
}

// bounds is the runtime's policy of a without its condition.
func (a *Approval) bounds() *approval.Policy {
	p := &approval.Policy{Scope: a.Scope, Approvals: a.Approvals, AllowEdit: a.AllowEdit, Attempts: a.Attempts}
	if a.Escalate != nil {
		p.Escalate = &approval.Escalation{After: a.Escalate.After, Scope: a.Escalate.Scope}
	}
	return p
}

// Condition is a compiled approval condition.
type Condition struct {
	prg cel.Program
}

// conditionEnv is the CEL environment of conditions: one variable, input.
var conditionEnv = func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("input", cel.DynType))
	if err != nil {
		panic(err)
	}
	return env
}()

// CompileCondition compiles a CEL approval condition: at most
// MaxConditionLength bytes, over the one variable input (dyn), of type
// bool (or dyn, checked when it runs).
func CompileCondition(expr string) (*Condition, error) {
	if len(expr) > MaxConditionLength {
		return nil, fmt.Errorf("the condition is %d bytes, more than the %d allowed", len(expr), MaxConditionLength)
	}
	ast, iss := conditionEnv.Compile(expr)
	if iss.Err() != nil {
		e := iss.Errors()[0]
		return nil, fmt.Errorf("%s does not compile: at column %d: %s", quoteCondition(expr), e.Location.Column()+1, oneLine(e.Message))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%s is of type %s: a condition must be a boolean", quoteCondition(expr), t)
	}
	prg, err := conditionEnv.Program(ast, cel.CostLimit(conditionCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%s: %s", quoteCondition(expr), oneLine(err.Error()))
	}
	return &Condition{prg: prg}, nil
}

// Eval evaluates the condition on a call's input (JSON; empty is null).
// An input that does not decode, a failed evaluation (a missing key, the
// cost limit) or a result that is not a boolean is an error.
func (c *Condition) Eval(ctx context.Context, input json.RawMessage) (bool, error) {
	var v any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &v); err != nil {
			return false, fmt.Errorf("the input is not JSON: %v", err)
		}
	}
	out, _, err := c.prg.ContextEval(ctx, map[string]any{"input": v})
	if err != nil {
		return false, err
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("the condition gave a %s, not a boolean", out.Type().TypeName())
	}
	return bool(b), nil
}

// quoteCondition quotes a condition for a message, shortened when long.
func quoteCondition(expr string) string {
	const max = 120
	if len(expr) > max {
		r := []rune(expr)
		if len(r) > max {
			return fmt.Sprintf("the condition %q...", string(r[:max]))
		}
	}
	return fmt.Sprintf("the condition %q", expr)
}

// approval reads an HTTP tool's approval: true (the empty policy), false
// or null (none), or a mapping of the policy's keys.
func (b *builder) approval(v any, p path, tool string) (*Approval, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case bool:
		if v {
			return &Approval{}, nil
		}
		return nil, nil
	case map[string]any:
		return b.approvalPolicy(v, p, tool)
	}
	return nil, b.errf(p, "must be true, false or a mapping of when, scope, approvals, allowEdit, attempts and escalate (%s)", kind(v))
}

// approvalPolicy reads the mapping form of an approval.
func (b *builder) approvalPolicy(m map[string]any, p path, tool string) (*Approval, error) {
	if err := b.checkKeys(m, p, allowOnly("when", "scope", "approvals", "allowEdit", "attempts", "escalate")); err != nil {
		return nil, err
	}
	a := &Approval{}
	var err error
	if a.When, err = b.str(m, p, "when"); err != nil {
		return nil, err
	}
	if a.When != "" {
		if _, err := CompileCondition(a.When); err != nil {
			return nil, b.errf(p.key("when"), "tool %s: %s", tool, err)
		}
	}
	if a.Scope, err = b.scope(m, p, "scope", true); err != nil {
		return nil, err
	}
	if a.Approvals, err = b.count(m, p, "approvals", approval.MaxApprovals); err != nil {
		return nil, err
	}
	if v := m["allowEdit"]; v != nil {
		e, ok := v.(bool)
		if !ok {
			return nil, b.errf(p.key("allowEdit"), "must be true or false (%s)", kind(v))
		}
		a.AllowEdit = e
	}
	if a.Attempts, err = b.count(m, p, "attempts", approval.MaxAttempts); err != nil {
		return nil, err
	}
	if a.Escalate, err = b.escalation(m, p); err != nil {
		return nil, err
	}
	if err := a.bounds().Validate(); err != nil { // what the checks above missed
		return nil, b.errf(p, "tool %s: %s", tool, err)
	}
	return a, nil
}

// escalation reads approval.escalate.
func (b *builder) escalation(m map[string]any, p path) (*approval.Escalation, error) {
	em, err := b.mapping(m, p, "escalate")
	if err != nil || em == nil {
		return nil, err
	}
	ep := p.key("escalate")
	if err := b.checkKeys(em, ep, allowOnly("after", "scope")); err != nil {
		return nil, err
	}
	e := &approval.Escalation{}
	v := em["after"]
	if v == nil {
		return nil, b.missing(ep, "after")
	}
	d, ok := duration(v)
	if !ok || d <= 0 {
		return nil, b.errf(ep.key("after"), "must be a positive duration such as 30m or 4h")
	}
	e.After = d
	if em["scope"] == nil {
		return nil, b.missing(ep, "scope")
	}
	if e.Scope, err = b.scope(em, ep, "scope", false); err != nil {
		return nil, err
	}
	return e, nil
}

// scope reads an approver scope such as approve:payments.
func (b *builder) scope(m map[string]any, p path, key string, optional bool) (string, error) {
	s, err := b.str(m, p, key)
	if err != nil {
		return "", err
	}
	if err := auth.ValidateScope(s, optional); err != nil {
		return "", b.errf(p.key(key), "%s", err)
	}
	return s, nil
}

// count reads a whole number from 1 to limit (0 when absent).
func (b *builder) count(m map[string]any, p path, key string, limit int) (int, error) {
	v := m[key]
	if v == nil {
		return 0, nil
	}
	n, ok := integer(v)
	if !ok || n < 1 || n > int64(limit) {
		return 0, b.errf(p.key(key), "must be a whole number from 1 to %d", limit)
	}
	return int(n), nil
}
