// Package ctxsleep holds Sleep: a wait that ends early when its context
// does, for the retry and poll loops of source, sink, store, stage and
// the hybrid engine.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
