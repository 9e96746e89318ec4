package wait

import (
	"context"
	"log/slog"
	"time"
)

// KeepListening runs listen (a LISTEN connection that blocks until it
// fails) until ctx ends, reconnecting with backoff: 100 ms, doubling to
// 5 s, back to 100 ms after a connection that lived 10 s. down runs each
// time the connection is lost; while it is down, callers poll instead.
func KeepListening(ctx context.Context, log *slog.Logger, what string, listen func(context.Context) error, down func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := listen(ctx)
		down()
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		log.Warn(what+" lost its connection; polling until it is back", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// Every runs fn at once and then every interval until ctx ends or fn says
// stop.
func Every(ctx context.Context, interval time.Duration, fn func() (stop bool)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !fn() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sleep waits d or until ctx ends, whichever comes first, and returns
// ctx's error when it ended first (at once for d <= 0 and an ended ctx).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
