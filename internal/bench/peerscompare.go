package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// PeersConfig is a comparison of the approval cycle on this platform
// (in-process, each run on a fresh database) with the peers of a peers
// folder, at the same sessions and cycles, alternated round after round
// so that a noisy machine weighs on every runtime alike.
type PeersConfig struct {
	// Dir is the peers folder prepared by scripts/peers.sh; when it does
	// not exist, the platform runs alone.
	Dir       string
	Workloads []Workload
	Rounds    int
	// Timeout bounds each run of a peer.
	Timeout time.Duration
	Out     io.Writer
	// Database creates a fresh database on the server and returns its
	// URL and a function that drops it: migrated for the platform's runs,
	// empty for a peer's (LangGraph's checkpointer makes its own tables).
	Database func(ctx context.Context, migrated bool) (string, func(), error)
	// Peers defaults to Peers.
	Peers []Peer
}

// OursName is the platform's name in the comparison table.
const OursName = "holdpoint (in-process)"

// runtimeRuns is one runtime's runs of one workload, a run a round.
type runtimeRuns struct {
	Name string
	Ours bool
	Runs []PeerResult
	// TurnP50, TurnP99 are the platform's, a run a round.
	TurnP50, TurnP99 []time.Duration
}

// Comparison is what RunPeers measured: per workload, the platform's runs
// first, then each peer's.
type Comparison struct {
	Workloads []Workload
	Runtimes  [][]*runtimeRuns // [workload][runtime]
	Rounds    int
}

// RunPeers runs the comparison and prints its table.
func RunPeers(ctx context.Context, cfg PeersConfig) (*Comparison, error) {
	if len(cfg.Workloads) == 0 {
		cfg.Workloads = DefaultWorkloads
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	peers := cfg.presentPeers()
	c := &Comparison{Workloads: cfg.Workloads, Rounds: cfg.Rounds}
	for range cfg.Workloads {
		rs := []*runtimeRuns{{Name: OursName, Ours: true}}
		for _, p := range peers {
			rs = append(rs, &runtimeRuns{Name: p.Name})
		}
		c.Runtimes = append(c.Runtimes, rs)
	}
	for round := 0; round < cfg.Rounds; round++ {
		for wi, w := range cfg.Workloads {
			if err := cfg.runRound(ctx, round, w, peers, c.Runtimes[wi]); err != nil {
				return c, err
			}
		}
	}
	PrintComparison(cfg.Out, c)
	return c, nil
}

// presentPeers are the peers of the folder; it prints the folder's or a
// peer's absence.
func (cfg PeersConfig) presentPeers() []Peer {
	peers := cfg.Peers
	if peers == nil {
		peers = Peers
	}
	if st, err := os.Stat(cfg.Dir); err != nil || !st.IsDir() {
		fmt.Fprintf(cfg.Out, "peers: %s absent; running platform bench alone\n", cfg.Dir)
		return nil
	}
	var present []Peer
	for _, p := range peers {
		if p.Present == nil || p.Present(cfg.Dir) {
			present = append(present, p)
		} else {
			fmt.Fprintf(cfg.Out, "peers: %s absent from %s (scripts/peers.sh prepares it); skipped\n", p.Name, cfg.Dir)
		}
	}
	return present
}

// runRound runs workload w once on every runtime, starting with a
// different one each round (the platform first in round 1). Only a
// failure to set a run up (a database) is an error; a run that fails is
// recorded as such.
func (cfg PeersConfig) runRound(ctx context.Context, round int, w Workload, peers []Peer, rs []*runtimeRuns) error {
	n := len(rs)
	for k := 0; k < n; k++ {
		i := (round + k) % n
		var r PeerResult
		var err error
		if i == 0 {
			r, err = cfg.runOurs(ctx, w, rs[0])
		} else {
			r, err = cfg.runPeer(ctx, peers[i-1], w)
		}
		if err != nil {
			return err
		}
		rs[i].Runs = append(rs[i].Runs, r)
		figure := r.Failed
		if figure == "" {
			figure = rate(r.CyclesPerSec) + " cycles/s"
		}
		fmt.Fprintf(cfg.Out, "round %d/%d, %s: %s %s\n", round+1, cfg.Rounds, w, rs[i].Name, figure)
	}
	return nil
}

// runOurs runs the platform's cycle (in-process) on a fresh database.
func (cfg PeersConfig) runOurs(ctx context.Context, w Workload, rr *runtimeRuns) (PeerResult, error) {
	url, drop, err := cfg.Database(ctx, true)
	if err != nil {
		return PeerResult{}, fmt.Errorf("database for %s: %w", OursName, err)
	}
	defer drop()
	res, err := Run(ctx, Config{DatabaseURL: url, Mode: "inprocess", Sessions: w.Sessions, Cycles: w.Cycles})
	if err != nil {
		return PeerResult{Failed: err.Error()}, nil
	}
	rr.TurnP50 = append(rr.TurnP50, res.TurnP50)
	rr.TurnP99 = append(rr.TurnP99, res.TurnP99)
	total := float64(w.Sessions * w.Cycles)
	return PeerResult{CyclesPerSec: res.CyclesPerSecond(), Bytes: int64(res.BytesPerCycle * total), HasBytes: true}, nil
}

// runPeer runs p once with a scratch directory of its own, and a fresh
// database when it needs one.
func (cfg PeersConfig) runPeer(ctx context.Context, p Peer, w Workload) (PeerResult, error) {
	scratch, err := os.MkdirTemp("", "holdpoint-peer-")
	if err != nil {
		return PeerResult{}, err
	}
	defer os.RemoveAll(scratch)
	var url string
	if p.NeedsDB {
		var drop func()
		if url, drop, err = cfg.Database(ctx, false); err != nil {
			return PeerResult{}, fmt.Errorf("database for %s: %w", p.Name, err)
		}
		defer drop()
	}
	return p.Run(ctx, cfg.Dir, scratch, url, w, cfg.Timeout), nil
}
