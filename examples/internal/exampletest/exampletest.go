// Package exampletest runs an example program the way a user would: built
// with `go build`, serving on a loopback port with a fresh database, and
// driven over HTTP with the agent protocol.
package exampletest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testdb"
	"github.com/holdpoint/holdpoint/internal/testproc"
	"github.com/holdpoint/holdpoint/service"
)

// Server is a running example.
type Server struct {
	// URL is the base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Log holds what the server wrote (so far: read it while it runs).
	Log *testproc.Output
}

// Start builds the Go package in dir (a main package) and runs
// `serve --dev` on a free loopback port against a fresh database, with the
// extra environment env; the server is stopped (SIGTERM) when the test
// ends. The package is built once per test process (see Build).
func Start(t *testing.T, dir string, env ...string) *Server {
	t.Helper()
	return Run(t, Build(t, dir), env...)
}

// built is one package's build, made once per test process.
type built struct {
	once sync.Once
	bin  string
	err  error
}

var (
	builds   sync.Map // absolute package directory -> *built
	binDir   string   // where the builds go, made by the first one
	binDirMu sync.Mutex
)

// Build builds the Go package in dir the first time it is asked, into a
// directory Main removes, and returns the binary's path; later calls (the
// package's other tests, in parallel or not) wait for that build and
// share it.
func Build(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := builds.LoadOrStore(abs, &built{})
	b := v.(*built)
	b.once.Do(func() { b.bin, b.err = goBuild(abs) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// goBuild runs go build for the package in dir.
func goBuild(dir string) (string, error) {
	binDirMu.Lock()
	if binDir == "" {
		d, err := os.MkdirTemp("", "holdpoint-example-")
		if err != nil {
			binDirMu.Unlock()
			return "", err
		}
		binDir = d
	}
	out, err := os.MkdirTemp(binDir, filepath.Base(dir)+"-")
	binDirMu.Unlock()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(out, "example")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if log, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build in %s: %v\n%s", dir, err, log)
	}
	return bin, nil
}

// Main runs the tests of an example's package (call it from TestMain)
// and removes what Build built.
func Main(m *testing.M) {
	code := m.Run()
	binDirMu.Lock()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	binDirMu.Unlock()
	os.Exit(code)
}

// Run runs the built program bin as Start does.
func Run(t *testing.T, bin string, env ...string) *Server {
	t.Helper()
	addr := testproc.FreeAddr(t)
	cmd := exec.Command(bin, "serve", "--dev", "--addr", addr, "--log-level", "warn")
	cmd.Env = append(append(os.Environ(), "DATABASE_URL="+testdb.URL(t)), env...)
	p := testproc.Start(t, "the example's server", cmd, 20*time.Second)
	s := &Server{URL: "http://" + addr, Log: p.Out}
	// Generous: on a loaded machine a start (migrations included) can take
	// many seconds; the loop ends as soon as the server answers.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := http.Get(s.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-p.Done():
			t.Fatalf("the example exited before it was ready: %v\n%s", p.Err(), p.Out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the example was not ready within 2 minutes:\n%s", p.Out)
		}
	}
}

// Turn runs one turn of agent (JSON, not streamed) and returns its output;
// an answer other than 200 fails the test.
func (s *Server) Turn(t *testing.T, agent string, init service.AgentInit, input service.AgentInput) *service.AgentOutput {
	t.Helper()
	status, body := s.post(t, "/api/agents/"+agent, map[string]any{"data": input, "init": init})
	if status != http.StatusOK {
		t.Fatalf("POST %s: %d %s", agent, status, body)
	}
	var res struct{ Result service.AgentOutput }
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return &res.Result
}

// Refused runs a turn that must be answered with an HTTP error and returns
// its status and body.
func (s *Server) Refused(t *testing.T, agent string, init service.AgentInit, input service.AgentInput) (int, string) {
	t.Helper()
	status, body := s.post(t, "/api/agents/"+agent, map[string]any{"data": input, "init": init})
	if status == http.StatusOK {
		t.Fatalf("POST %s: 200 %s, want an error", agent, body)
	}
	return status, string(body)
}

// Snapshot returns the latest snapshot of a session.
func (s *Server) Snapshot(t *testing.T, agent, sessionID string) *service.Snapshot {
	t.Helper()
	status, body := s.post(t, "/api/agents/"+agent+"/getSnapshot", map[string]any{"data": map[string]string{"sessionId": sessionID}})
	if status != http.StatusOK {
		t.Fatalf("getSnapshot %s: %d %s", sessionID, status, body)
	}
	var res struct{ Result service.Snapshot }
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("snapshot %s: %v", body, err)
	}
	return &res.Result
}

// Get GETs an /api/v1 route and decodes its answer into v.
func (s *Server) Get(t *testing.T, path string, v any) {
	t.Helper()
	res, err := http.Get(s.URL + "/api/v1" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func (s *Server) post(t *testing.T, path string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// User is a user message input.
func User(text string) service.AgentInput {
	return service.AgentInput{Message: &service.Message{Role: service.RoleUser, Content: []service.Part{service.TextPart(text)}}}
}

// Interrupts are the interrupted tool requests of an output.
func Interrupts(out *service.AgentOutput) []*service.ToolRequest {
	var reqs []*service.ToolRequest
	if out == nil || out.Message == nil {
		return nil
	}
	for _, p := range out.Message.Content {
		if _, ok := p.Metadata["interrupt"]; ok && p.ToolRequest != nil {
			reqs = append(reqs, p.ToolRequest)
		}
	}
	return reqs
}

// Respond is a resume answering req with output (JSON).
func Respond(req *service.ToolRequest, output string) service.AgentInput {
	return service.AgentInput{Resume: &service.Resume{Respond: []service.Part{{
		ToolResponse: &service.ToolResponse{Name: req.Name, Ref: req.Ref, Output: json.RawMessage(output)}}}}}
}

// Restart is a resume restarting req with the resumed metadata (JSON, or
// "" for none).
func Restart(req *service.ToolRequest, resumed string) service.AgentInput {
	p := service.Part{ToolRequest: &service.ToolRequest{Name: req.Name, Ref: req.Ref, Input: req.Input}}
	if resumed != "" {
		p.Metadata = service.Metadata{"resumed": json.RawMessage(resumed)}
	}
	return service.AgentInput{Resume: &service.Resume{Restart: []service.Part{p}}}
}

// Text is the text of an output's message.
func Text(out *service.AgentOutput) string {
	if out == nil || out.Message == nil {
		return ""
	}
	return out.Message.Text()
}

// Contains fails the test unless s contains every want.
func Contains(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Fatalf("%s %q lacks %q", what, s, w)
		}
	}
}
