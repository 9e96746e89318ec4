//go:build bench

package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/holdpoint/holdpoint/internal/bench"
)

// peersRun is `platform bench --peers DIR`: the approval cycle beside the
// peers of a folder prepared by scripts/peers.sh.
type peersRun struct {
	cfg       bench.PeersConfig
	workloads string
}

// peersFlags registers the flags of the peers comparison.
func (b *benchRun) peersFlags(fs *flag.FlagSet) {
	p := &peersRun{}
	b.peers = p
	fs.StringVar(&p.cfg.Dir, "peers", "", "instead of the approval cycle alone: run it (in-process, a fresh database each run) alternated with the peers of this folder (scripts/peers.sh prepares it: make bench) at the same sessions and cycles, and print cycles/s and the ratios")
	fs.StringVar(&p.workloads, "peer-workloads", "8x20,1x60", "SESSIONSxCYCLES,... the peers comparison runs (--peers)")
	fs.IntVar(&p.cfg.Rounds, "rounds", 1, "rounds of the peers comparison, each running every workload on every runtime; the table shows medians (--peers)")
	fs.DurationVar(&p.cfg.Timeout, "peer-timeout", 5*time.Minute, "the longest a peer's run may take before it is killed and reported as timed out (--peers)")
}

// checkPeers reads the comparison's flags; b.peers is nil without --peers.
func (b *benchRun) checkPeers(fs *flag.FlagSet) error {
	if !flagsSet(fs)["peers"] {
		b.peers = nil
		return nil
	}
	ws, err := bench.ParseWorkloads(b.peers.workloads)
	if err != nil {
		return fmt.Errorf("--peer-workloads: %w", err)
	}
	b.peers.cfg.Workloads = ws
	if b.peers.cfg.Rounds <= 0 {
		return fmt.Errorf("--rounds must be positive")
	}
	return nil
}

// runPeers runs the comparison, each run of the platform on a migrated
// database of its own and each of LangGraph's on an empty one, and adds
// its rows to --markdown.
func (b *benchRun) runPeers(ctx context.Context, stderr io.Writer) int {
	cfg := b.peers.cfg
	cfg.Out = b.cfg.Out
	cfg.Database = func(ctx context.Context, migrated bool) (string, func(), error) {
		if migrated {
			return createBenchDatabase(ctx)
		}
		return createDatabase(ctx, "holdpoint_peer", false)
	}
	c, err := bench.RunPeers(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "platform bench --peers:", err)
		return 1
	}
	if b.markdown == "" {
		return 0
	}
	for _, row := range c.Rows() {
		if err := bench.AppendMarkdown(b.markdown, row); err != nil {
			fmt.Fprintln(stderr, "platform bench: --markdown:", err)
			return 1
		}
	}
	return 0
}
