package inbox_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdpoint/holdpoint/internal/servicetest"
	"github.com/holdpoint/holdpoint/internal/waitfor"
	"github.com/holdpoint/holdpoint/service"
	"github.com/holdpoint/holdpoint/service/auth"
	"github.com/holdpoint/holdpoint/service/protocol"
)

// The helpers of the engine's tests (service/runtime_test.go) that the
// inbox's tests use.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var testCaller = auth.Caller{TenantID: "default", Actor: "test"}

// scriptModel answers from a function of the request, so tests can drive an
// agent for any number of turns.
type scriptModel struct {
	fn func(req *protocol.ModelRequest) protocol.Message
}

func (m *scriptModel) Name() string { return "script" }

func (m *scriptModel) Generate(_ context.Context, req *protocol.ModelRequest, _ func(protocol.ModelChunk)) (*protocol.ModelResponse, error) {
	return &protocol.ModelResponse{Message: m.fn(req), FinishReason: "stop"}, nil
}

func text(role, s string) protocol.Message {
	return protocol.Message{Role: role, Content: []protocol.Part{protocol.TextPart(s)}}
}

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

func ptr[T any](v T) *T { return &v }
