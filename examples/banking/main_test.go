package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holdpoint/holdpoint/examples/internal/exampletest"
	"github.com/holdpoint/holdpoint/service"
)

// TestSeedFlow builds the example and runs the Genkit guide's flow against
// it: send, interrupt, approve, answer; deny; several transfers at once.
func TestSeedFlow(t *testing.T) {
	t.Parallel()
	checkSeedFlow(t, exampletest.Start(t, "."))
}

// TestOutsideTheModule builds the example as a user's own program would
// be: its main.go alone in a directory with a go.mod that requires this
// module (through a replace directive pointing at this checkout).
func TestOutsideTheModule(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module example.com/mybank\n\ngo 1.26\n\n" +
		"require github.com/holdpoint/holdpoint v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/holdpoint/holdpoint => " + root + "\n"
	for name, body := range map[string][]byte{"main.go": src, "go.mod": []byte(gomod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "mybank")
	build := exec.Command("go", "build", "-mod=mod", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the program outside the module: %v\n%s", err, out)
	}
	checkSeedFlow(t, exampletest.Run(t, bin))
}

func checkSeedFlow(t *testing.T, s *exampletest.Server) {
	t.Helper()
	init := service.AgentInit{SessionID: "seed"}
	res := s.Turn(t, "bankingAgent", init, exampletest.User("Transfer $500 to my savings account."))
	asks := exampletest.Interrupts(res)
	if res.FinishReason != "interrupted" || len(asks) != 1 || asks[0].Name != "userApproval" {
		t.Fatalf("send: %+v", res)
	}
	exampletest.Contains(t, "approval input", string(asks[0].Input), `"action":"transferMoney"`, `"details":"Transfer $500.00 to your savings account"`)

	// An answer the interrupt's output type refuses changes nothing.
	if status, body := s.Refused(t, "bankingAgent", init, exampletest.Respond(asks[0], `{"approved":"yes"}`)); status != 400 {
		t.Fatalf("bad answer: %d %s", status, body)
	}
	done := s.Turn(t, "bankingAgent", init, exampletest.Respond(asks[0], `{"approved":true}`))
	exampletest.Contains(t, "answer", exampletest.Text(done), "Done: transferred $500.00 to your savings account (transaction txn-")

	// Deny: nothing moves.
	deny := service.AgentInit{SessionID: "deny"}
	res = s.Turn(t, "bankingAgent", deny, exampletest.User("Pay Bob $20"))
	out := s.Turn(t, "bankingAgent", deny, exampletest.Respond(exampletest.Interrupts(res)[0], `{"approved":false,"feedback":"not today"}`))
	exampletest.Contains(t, "denial", exampletest.Text(out), "Cancelled: the transfer of $20.00 to Bob was not executed.", "not today")
	snap := s.Snapshot(t, "bankingAgent", "deny")
	for _, m := range snap.State.Messages {
		for _, p := range m.Content {
			if p.ToolRequest != nil && p.ToolRequest.Name == "transferMoney" {
				t.Fatal("a denied transfer was requested")
			}
		}
	}

	// Several transfers: one approval each, answered together.
	many := service.AgentInit{SessionID: "many"}
	res = s.Turn(t, "bankingAgent", many, exampletest.User("Send $5 to Alice and $6 to account 12345"))
	asks = exampletest.Interrupts(res)
	if len(asks) != 2 {
		t.Fatalf("two transfers: %d approvals", len(asks))
	}
	both := exampletest.Respond(asks[0], `{"approved":true}`)
	both.Resume.Respond = append(both.Resume.Respond, exampletest.Respond(asks[1], `{"approved":true}`).Resume.Respond...)
	out = s.Turn(t, "bankingAgent", many, both)
	if n := strings.Count(exampletest.Text(out), "Done: transferred"); n != 2 {
		t.Fatalf("two approvals: %q", exampletest.Text(out))
	}
}
