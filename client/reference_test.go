package client_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdpoint/holdpoint/client"
)

// TestAgainstGenkitReference runs the seed page's flows with this client
// against two servers: this platform, and the Genkit JS 1.42 reference
// (tests/compat/reference-server.mjs, the same agent served by
// @genkit-ai/express). The reference refuses a turn without init and
// answers streams as text/plain, so the flows pass there only when the
// client speaks the protocol as the JS client does.
func TestAgainstGenkitReference(t *testing.T) {
	t.Parallel()
	servers := []struct {
		name  string
		agent func(t *testing.T) *client.Agent
	}{
		{"holdpoint", func(t *testing.T) *client.Agent { return newServer(t).client(t).Agent("bankingAgent") }},
		{"genkit-js", referenceAgent},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			agent := s.agent(t)
			t.Run("approve", func(t *testing.T) { approveFlow(t, agent) })
			t.Run("reject", func(t *testing.T) { rejectFlow(t, agent) })
			t.Run("stream", func(t *testing.T) { streamFlow(t, agent) })
		})
	}
}

// approveFlow: ask, pause on userApproval, approve, done; the snapshot of
// the answer reads completed.
func approveFlow(t *testing.T, agent *client.Agent) {
	ctx := testContext(t)
	chat, first, ask := askTransfer(t, agent, "Transfer $50 to account 12345")
	if ask.Name != "userApproval" || first.SnapshotID() == "" {
		t.Fatalf("interrupt %+v, snapshot %q", ask, first.SnapshotID())
	}
	done, err := chat.Resume(ctx, ask.Respond(decision{Approved: true}))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if done.FinishReason() != "stop" || !strings.HasPrefix(done.Text(), "Done") {
		t.Fatalf("answer %q (%s)", done.Text(), done.FinishReason())
	}
	snap, err := agent.Snapshot(ctx, done.SnapshotID())
	if err != nil || snap.Status != client.SnapshotCompleted || snap.SessionID != first.SessionID() {
		t.Fatalf("snapshot %+v: %v", snap, err)
	}
}

// rejectFlow answers no: the turn ends without the transfer.
func rejectFlow(t *testing.T, agent *client.Agent) {
	chat, _, ask := askTransfer(t, agent, "Transfer $50 to account 12345")
	res, err := chat.Resume(testContext(t), ask.Respond(decision{Approved: false, Feedback: "wrong account"}))
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	if res.FinishReason() != "stop" || strings.HasPrefix(res.Text(), "Done") {
		t.Fatalf("answer %q (%s) after a rejection", res.Text(), res.FinishReason())
	}
}

// streamFlow streams both turns of the cycle.
func streamFlow(t *testing.T, agent *client.Agent) {
	ctx := testContext(t)
	chat := agent.Chat()
	paused, err := chat.SendStream(ctx, "Transfer $50 to account 12345").Response()
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	ints := paused.Interrupts()
	if paused.FinishReason() != client.FinishInterrupted || len(ints) != 1 {
		t.Fatalf("streamed turn: %s with %d interrupts", paused.FinishReason(), len(ints))
	}
	chunks := 0
	s := chat.ResumeStream(ctx, ints[0].Respond(decision{Approved: true}))
	for _, err := range s.Chunks() {
		if err != nil {
			t.Fatalf("resume stream: %v", err)
		}
		chunks++
	}
	done, err := s.Response()
	if err != nil || !strings.HasPrefix(done.Text(), "Done") || chunks == 0 {
		t.Fatalf("streamed resume: %v, answer %q after %d chunks", err, done.Text(), chunks)
	}
}

// referenceAgent starts the Genkit JS reference server and returns its
// bankingAgent. Without node or the compat suite's packages (installed by
// make test, see tests/compat/install.sh) it skips, and under CI fails.
func referenceAgent(t *testing.T) *client.Agent {
	dir, err := filepath.Abs(filepath.Join("..", "tests", "compat"))
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(dir, "node_modules", "@genkit-ai", "express"))
	node, pathErr := exec.LookPath("node")
	if statErr != nil || pathErr != nil {
		msg := "the Genkit JS reference needs node and tests/compat/node_modules (bash tests/compat/install.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "reference-server.mjs", t.TempDir())
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				port <- p
			}
		}
	}()
	select {
	case p := <-port:
		c, err := client.New("http://127.0.0.1:"+p, client.WithAgentsPath(""))
		if err != nil {
			t.Fatal(err)
		}
		return c.Agent("bankingAgent")
	case <-time.After(2 * time.Minute):
		t.Fatal("the reference server did not start listening within 2 minutes")
		return nil
	}
}
