package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// CPUSplit is the cost per cycle of the first and the last N cycles of
// one long session (Config.CPUSplit): whether a session gets dearer as
// its history grows, or a cold start makes its first cycles dear.
type CPUSplit struct {
	Cycles, N int
	// First and Last are per cycle over the first and the last N cycles.
	First, Last splitCost
}

// splitCost is what a range of cycles cost, per cycle.
type splitCost struct {
	CPU     time.Duration // this process's (getrusage)
	Machine time.Duration // every process's on the machine (/proc/stat)
	Wall    time.Duration
}

// splitMark is the counters at a point of the long session.
type splitMark struct {
	cpu, busy time.Duration
	at        time.Time
}

func markNow() splitMark { return splitMark{processCPU(), machineBusy(), time.Now()} }

func (m splitMark) costTo(end splitMark, n int) splitCost {
	return splitCost{
		CPU:     (end.cpu - m.cpu) / time.Duration(n),
		Machine: (end.busy - m.busy) / time.Duration(n),
		Wall:    end.at.Sub(m.at) / time.Duration(n),
	}
}

// cpuSplit runs one session of cycles cycles and measures its first and
// last n around those ranges only.
func cpuSplit(ctx context.Context, cycle cycleFunc, cycles, n int) (*CPUSplit, error) {
	if n <= 0 || 2*n > cycles {
		return nil, fmt.Errorf("--cpu-split %d: want at least 1 and at most half of --cpu-split-cycles (%d)", n, cycles)
	}
	session := fmt.Sprintf("cpusplit-%d", time.Now().UnixNano())
	var marks []splitMark
	for i := 0; i < cycles; i++ {
		if i == 0 || i == cycles-n {
			marks = append(marks, markNow())
		}
		if _, _, err := cycle(ctx, session, i); err != nil {
			return nil, err
		}
		if i == n-1 || i == cycles-1 {
			marks = append(marks, markNow())
		}
	}
	return &CPUSplit{Cycles: cycles, N: n, First: marks[0].costTo(marks[1], n), Last: marks[2].costTo(marks[3], n)}, nil
}

// print writes the split, a line.
func (s *CPUSplit) print(w io.Writer) {
	change := 0.0
	if s.First.CPU > 0 {
		change = 100 * float64(s.Last.CPU-s.First.CPU) / float64(s.First.CPU)
	}
	fmt.Fprintf(w, "CPU per cycle of one long session (%d cycles): first %d %s (machine %s, wall %s), last %d %s (machine %s, wall %s) (%+.1f%%)\n",
		s.Cycles, s.N, ms(s.First.CPU), ms(s.First.Machine), ms(s.First.Wall),
		s.N, ms(s.Last.CPU), ms(s.Last.Machine), ms(s.Last.Wall), change)
}
