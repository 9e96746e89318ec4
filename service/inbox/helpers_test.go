package inbox_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
)

// The helpers of the engine's tests (service/runtime_test.go) that the
// inbox's tests use.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testCaller = auth.Caller{TenantID: "default", Actor: "test"}

// newRuntime returns a runtime on a fresh database whose store runs as the
// application role (row-level security on).
func newRuntime(t *testing.T) *service.Runtime {
	t.Helper()
	return servicetest.New(t, servicetest.Options{}).Runtime
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	return waitfor.Until(t, what, timeout, cond)
}
