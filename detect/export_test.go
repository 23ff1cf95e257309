package detect

import (
	"context"
	"time"

	"github.com/bulkmilter/bulkmilter/store"
)

// Decide exposes decide to the benchmarks, which are an external test
// package (they read the benchmark sample, which imports detect).
func Decide(e *Engine, ctx context.Context, a *Analysis, rcpts []string, at time.Time) Verdict {
	return e.decide(ctx, a, store.Observation{Recipients: rcpts, Time: at}, false, e.opt.Store.Observe, e.thresholds(ctx, rcpts, at))
}
