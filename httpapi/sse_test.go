package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/holdpoint/holdpoint/internal/testlog"
	"github.com/holdpoint/holdpoint/service"
)

// An error after the stream started can only travel as an error frame; the
// runtime reports errors before any output, so this drives the handler
// directly.
func TestErrorAfterStreamStarted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"domain", service.Errorf(service.CodeAborted, "interrupt i1 was already resolved"), `data: {"error":{"status":"ABORTED","message":"interrupt i1 was already resolved","requestId":"rid-1"}}`},
		{"internal", errors.New("pgx: secret-host refused"), `data: {"error":{"status":"INTERNAL","message":"internal error","requestId":"rid-1"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			a := &api{log: testlog.Tee(t, &logs)}
			rec := httptest.NewRecorder()
			c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/api/agents/x", nil), rec)
			c.Response().Header().Set(echo.HeaderXRequestID, "rid-1")
			if err := writeFrame(c, messageFrame{Message: service.StreamChunk{TurnEnd: &service.TurnEnd{FinishReason: "stop"}}}); err != nil {
				t.Fatal(err)
			}
			a.handleError(tc.err, c)

			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != mimeEventStream {
				t.Fatalf("status %d, Content-Type %q: want the 200 stream", rec.Code, rec.Header().Get("Content-Type"))
			}
			frames := strings.Split(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n")
			if len(frames) != 2 || frames[1] != tc.want {
				t.Fatalf("frames %q, want the chunk then %s", frames, tc.want)
			}
			if tc.name == "internal" && !strings.Contains(logs.String(), "secret-host") {
				t.Errorf("cause not logged: %s", logs.String())
			}
		})
	}
}
