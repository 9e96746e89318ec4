package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/internal/testproc"
	"go.uber.org/goleak"
)

// runPlatformEnv makes the test binary, started again as a child, run the
// platform command line of its arguments instead of the tests: the tests
// get real `platform` processes (exit codes, signals, logs) without a
// separate build.
const runPlatformEnv = "HOLDPOINT_TEST_RUN_PLATFORM"

func TestMain(m *testing.M) {
	if os.Getenv(runPlatformEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// platformCommand is `platform args...` with DATABASE_URL set to dbURL and
// nothing else from the environment that would change what it runs (a
// model provider: the demo model must answer).
func platformCommand(ctx context.Context, dbURL string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	drop := []string{"DATABASE_URL=", "HOLDPOINT_", "GEMINI_API_KEY=", "GOOGLE_API_KEY=",
		"ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "OPENAI_BASE_URL="}
next:
	for _, kv := range os.Environ() {
		for _, p := range drop {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+dbURL, runPlatformEnv+"=1")
	cmd.SysProcAttr = childAttr()
	return cmd
}

// runPlatform runs a platform command that is expected to end by itself
// (within a minute) and returns its exit code and output.
func runPlatform(t *testing.T, dbURL string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := platformCommand(ctx, dbURL, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("platform %s did not end within a minute; stderr:\n%s", strings.Join(args, " "), errOut.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("platform %s: %v", strings.Join(args, " "), err)
	}
	if strings.Contains(errOut.String(), "WARNING: DATA RACE") {
		t.Errorf("platform %s reported a data race:\n%s", strings.Join(args, " "), errOut.String())
	}
	return code, out.String(), errOut.String()
}

// serveProcess is a `platform serve` child process.
type serveProcess struct {
	base    string // http://127.0.0.1:port
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
}

// startServe starts `platform serve` on dbURL with a free loopback port,
// text logs and the given flags, waits until /readyz answers 200, and stops
// it (SIGTERM) when the test ends.
func startServe(t *testing.T, dbURL string, flags ...string) *serveProcess {
	t.Helper()
	addr := testproc.FreeAddr(t)
	args := append([]string{"serve", "--addr", addr, "--log-format", "text"}, flags...)
	s := &serveProcess{base: "http://" + addr, logPath: filepath.Join(t.TempDir(), "serve.log"), done: make(chan struct{})}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd = platformCommand(context.Background(), dbURL, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30 s of SIGTERM; killing it")
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		log := s.log()
		if strings.Contains(log, "WARNING: DATA RACE") {
			t.Errorf("serve reported a data race")
		}
		if t.Failed() {
			t.Logf("--- log of platform %s ---\n%s", strings.Join(args, " "), log)
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-s.done:
			t.Fatalf("serve exited before it was ready:\n%s", s.log())
		default:
		}
		if res, err := http.Get(s.base + "/readyz"); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve was not ready within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// log is what the process wrote so far.
func (s *serveProcess) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// logLines are the log lines that contain every fragment.
func (s *serveProcess) logLines(fragments ...string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s.log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
line:
	for sc.Scan() {
		for _, f := range fragments {
			if !strings.Contains(sc.Text(), f) {
				continue line
			}
		}
		out = append(out, sc.Text())
	}
	return out
}
