package service

import (
	"context"
)

// Internals the external tests (package service_test, which may import
// service/pgstore) reach.

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
