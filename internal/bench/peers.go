package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Workload is a number of concurrent sessions, each running a number of
// approval cycles.
type Workload struct {
	Sessions, Cycles int
}

func (w Workload) String() string { return fmt.Sprintf("%dx%d", w.Sessions, w.Cycles) }

// DefaultWorkloads is what the peers comparison runs unless told
// otherwise: 8 sessions of 20 cycles, and one session of 60.
var DefaultWorkloads = []Workload{{8, 20}, {1, 60}}

// ParseWorkloads reads a comma-separated list of SESSIONSxCYCLES
// (8x20,1x60).
func ParseWorkloads(s string) ([]Workload, error) {
	var ws []Workload
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		a, b, ok := strings.Cut(f, "x")
		sessions, err1 := strconv.Atoi(a)
		cycles, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || sessions <= 0 || cycles <= 0 {
			return nil, fmt.Errorf("workload %q: want SESSIONSxCYCLES, both positive (8x20)", f)
		}
		ws = append(ws, Workload{sessions, cycles})
	}
	return ws, nil
}

// PeerResult is one run of a peer: its throughput and how much its store
// grew, or why it has none.
type PeerResult struct {
	CyclesPerSec float64
	Bytes        int64 // the store's growth (files or tables), whole run
	HasBytes     bool
	// Failed says why the run has no figures ("timed out after 5m0s",
	// "exit status 1: ..."); "" for a run that measured.
	Failed string
}

// ParsePeerLine reads a peer's output: its last line that is a JSON
// object, with cyclesPerSec and the store's growth under one of the names
// the peers use (storeBytes, dbBytesGrowth, bytes).
func ParsePeerLine(out []byte) (PeerResult, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var v struct {
			CyclesPerSec  *float64 `json:"cyclesPerSec"`
			StoreBytes    *int64   `json:"storeBytes"`
			DBBytesGrowth *int64   `json:"dbBytesGrowth"`
			Bytes         *int64   `json:"bytes"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return PeerResult{}, fmt.Errorf("peer output %q: %w", line, err)
		}
		if v.CyclesPerSec == nil || *v.CyclesPerSec <= 0 {
			return PeerResult{}, fmt.Errorf("peer output %q: no positive cyclesPerSec", line)
		}
		r := PeerResult{CyclesPerSec: *v.CyclesPerSec}
		for _, b := range []*int64{v.StoreBytes, v.DBBytesGrowth, v.Bytes} {
			if b != nil {
				r.Bytes, r.HasBytes = *b, true
				break
			}
		}
		return r, nil
	}
	return PeerResult{}, errors.New("peer printed no JSON line")
}

// runPeerCommand runs argv in dir for at most timeout and parses its JSON
// line. A failure (it could not start, it exited non-zero, it timed out,
// it printed no figures) is a PeerResult with Failed set, not an error: a
// peer that fails is a row of the table. On timeout the peer's whole
// process group is killed, so a node or go child does not linger.
func runPeerCommand(ctx context.Context, dir string, timeout time.Duration, argv ...string) PeerResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return PeerResult{Failed: fmt.Sprintf("timed out after %s", timeout)}
	case err != nil:
		return PeerResult{Failed: failure(err, stderr.Bytes())}
	}
	r, err := ParsePeerLine(stdout.Bytes())
	if err != nil {
		return PeerResult{Failed: err.Error()}
	}
	return r
}

// failure is err with the last line of the peer's stderr, short enough
// for a table cell.
func failure(err error, stderr []byte) string {
	msg := err.Error()
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		msg += ": " + last
	}
	if len(msg) > 120 {
		msg = msg[:117] + "..."
	}
	return msg
}

// Peer is one of the other runtimes the approval cycle is compared with.
type Peer struct {
	// Name is the runtime's name in the table.
	Name string
	// Present says whether the peers folder dir holds this peer.
	Present func(dir string) bool
	// Run runs w once: dir is the peers folder, scratch a fresh empty
	// directory that is removed after, dbURL a fresh empty database (for
	// the peers with NeedsDB) that is dropped after.
	Run     func(ctx context.Context, dir, scratch, dbURL string, w Workload, timeout time.Duration) PeerResult
	NeedsDB bool
}

// Peers are the runtimes of the peers folder (see its README): Genkit JS
// with its file session store, LangGraph.js with its PostgreSQL
// checkpointer, and Genkit Go's experimental agents with their file store
// (the binary scripts/peers.sh builds).
var Peers = []Peer{
	nodePeer("genkit-js (file store)", "genkit_cycle.mjs", false),
	nodePeer("langgraph-js (postgres)", "langgraph_cycle.mjs", true),
	{
		Name:    "genkit-go (file store)",
		Present: func(dir string) bool { return fileExists(filepath.Join(dir, GenkitGoBinary)) },
		Run: func(ctx context.Context, dir, scratch, _ string, w Workload, timeout time.Duration) PeerResult {
			bin, _ := filepath.Abs(filepath.Join(dir, GenkitGoBinary))
			return runPeerCommand(ctx, dir, timeout, bin, "-dir", scratch,
				"-sessions", strconv.Itoa(w.Sessions), "-cycles", strconv.Itoa(w.Cycles))
		},
	},
}

// GenkitGoBinary is where scripts/peers.sh builds the Genkit Go peer, in
// the peers folder.
const GenkitGoBinary = "genkitgo-peer"

// nodePeer runs script of the peers folder with node: its first argument
// is the scratch directory, or the fresh database's URL when needsDB.
func nodePeer(name, script string, needsDB bool) Peer {
	return Peer{
		Name:    name,
		NeedsDB: needsDB,
		Present: func(dir string) bool { return fileExists(filepath.Join(dir, script)) },
		Run: func(ctx context.Context, dir, scratch, dbURL string, w Workload, timeout time.Duration) PeerResult {
			node, err := exec.LookPath("node")
			if err != nil {
				return PeerResult{Failed: "node not found"}
			}
			target := scratch
			if needsDB {
				target = dbURL
			}
			return runPeerCommand(ctx, dir, timeout, node, script, target,
				strconv.Itoa(w.Sessions), strconv.Itoa(w.Cycles))
		},
	}
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
