package service

import (
	"context"
	"time"
)

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

// JobRounds is how many rounds the runtime's job runner has made.
func JobRounds(r *Runtime) uint64 { return r.jobRounds.Load() }

// AbortsHeard reports whether the runtime's abort listener is connected.
func AbortsHeard(r *Runtime) bool { return r.abortsHeard.Load() }

// SetTokenClock makes a mint user tokens stamped by now.
func SetTokenClock(a *Tenants, now func() time.Time) { a.now = now }

// SetKeyCacheClock makes a's key cache read the time from now.
func SetKeyCacheClock(a *Tenants, now func() time.Time) {
	a.keys.mu.Lock()
	defer a.keys.mu.Unlock()
	a.keys.now = now
}
