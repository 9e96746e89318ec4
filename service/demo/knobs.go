package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// Environment variables of the test knobs (see the package documentation).
const (
	// EnvLedger names a file that gets one JSON line per executed transfer.
	EnvLedger = "HOLDPOINT_DEMO_LEDGER"
	// EnvToolDelay is how long the demo model waits before answering a
	// tool message.
	EnvToolDelay = "HOLDPOINT_DEMO_TOOL_DELAY"
	// EnvApprovalDeadline is how long a demo approval waits before it is
	// denied for the human (DefaultApprovalDeadline when unset).
	EnvApprovalDeadline = "HOLDPOINT_DEMO_APPROVAL_DEADLINE"
	// EnvStreamGates names a directory: a statement request that says
	// "gate <name>" streams half its chunks, writes the file <name>.held
	// there (the stream is held: a test waits for it instead of for a
	// time), then waits until the file <name> exists there, so a test can
	// drop the stream or abort the turn mid-way.
	EnvStreamGates = "HOLDPOINT_DEMO_STREAM_GATES"
	// EnvFreshRefs, when set to anything, gives every tool request the
	// model makes a ref of its own, new at each call (as most providers
	// do), instead of one derived from the conversation: a model asked the
	// same again answers other refs.
	EnvFreshRefs = "HOLDPOINT_DEMO_FRESH_REFS"
)

// gateRE finds the gate a statement request names.
var gateRE = regexp.MustCompile(`\bgate ([a-z0-9-]{1,64})\b`)

// waitGate marks a gated stream held (the file <name>.held) and holds it
// until the gate's file exists in the HOLDPOINT_DEMO_STREAM_GATES
// directory (at once when that is not set), or ctx ends.
func waitGate(ctx context.Context, name string) error {
	dir := os.Getenv(EnvStreamGates)
	if dir == "" {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, name+".held"), nil, 0o644); err != nil {
		return err
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// approvalDeadlineFromEnv reads HOLDPOINT_DEMO_APPROVAL_DEADLINE; an
// invalid value is an error (Register refuses to start) and the default
// meanwhile.
func approvalDeadlineFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvApprovalDeadline)
	if v == "" {
		return DefaultApprovalDeadline, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return DefaultApprovalDeadline, fmt.Errorf("%s=%q is not a positive duration (e.g. 30s)", EnvApprovalDeadline, v)
	}
	return d, nil
}

// LedgerLine is one line of the HOLDPOINT_DEMO_LEDGER file.
type LedgerLine struct {
	Ref           string  `json:"ref"`
	Amount        float64 `json:"amount"`
	ToAccount     string  `json:"toAccount"`
	TransactionID string  `json:"transactionId"`
	PID           int     `json:"pid"`
	At            string  `json:"at"`
}

// ledgerFileMu serializes this process's appends, so that concurrent
// transfers never interleave their lines (O_APPEND alone makes each write
// atomic only on local file systems).
var ledgerFileMu sync.Mutex

// appendLedgerFile records an executed transfer in the HOLDPOINT_DEMO_LEDGER
// file, if set. The line is synced before transferMoney returns, so a
// process killed right after the tool ran has already left its trace: that
// is what lets a test count executions across processes and crashes.
func appendLedgerFile(t Transfer) error {
	path := os.Getenv(EnvLedger)
	if path == "" {
		return nil
	}
	line, err := json.Marshal(LedgerLine{
		Ref: t.Ref, Amount: t.Amount, ToAccount: t.ToAccount, TransactionID: t.TransactionID,
		PID: os.Getpid(), At: t.At.Format(time.RFC3339Nano),
	})
	if err != nil {
		return err
	}
	ledgerFileMu.Lock()
	defer ledgerFileMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvLedger, err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", EnvLedger, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", EnvLedger, err)
	}
	return f.Close()
}

// toolDelayFromEnv reads HOLDPOINT_DEMO_TOOL_DELAY. An unparsable value is
// returned as an error that the model reports on every affected call, so a
// typo fails loudly instead of silently running without the delay.
func toolDelayFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvToolDelay)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a non-negative duration (e.g. 2s)", EnvToolDelay, v)
	}
	return d, nil
}
