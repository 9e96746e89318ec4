package service

import "context"

// Internals the external tests (package service_test, which may import
// service/pgstore) reach.

// ErrBadKey is errBadKey.
var ErrBadKey = errBadKey

// KeyCacheSizes returns the lengths of the key cache's order list and map.
func KeyCacheSizes(a *Tenants) (int, int) {
	a.keys.mu.Lock()
	defer a.keys.mu.Unlock()
	return a.keys.order.Len(), len(a.keys.entries)
}

// CheckInput is checkInput.
var CheckInput = checkInput

// CheckInit is checkInit.
var CheckInit = checkInit

// ValidateResumeAgainstHistory is validateResumeAgainstHistory.
var ValidateResumeAgainstHistory = validateResumeAgainstHistory

// PlanResume reports planResume's verdict.
func PlanResume(res *Resume, history []Message, a *Agent) error {
	_, err := planResume(res, history, a)
	return err
}

// SignState is Runtime.signState.
func (r *Runtime) SignState(ctx context.Context, c Caller, agent string, st SessionState) (string, error) {
	return r.signState(ctx, c, agent, st)
}
