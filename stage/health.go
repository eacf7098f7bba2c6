package stage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// Dependencies the stage reports on (the `dependency` label).
const (
	depBroker = "broker"
	depStore  = "object_store"
	depEngine = "engine"
)

// Probe checks one dependency within ctx (the stage gives it a deadline).
type Probe struct {
	Name  string // broker, object_store, ...
	Check func(ctx context.Context) error
}

// health is what the stage knows of its dependencies: each is up until a
// probe or an operation on it fails, and up again after the next success.
// While any is down the stage reports not ready and fetches nothing new;
// in-flight work retries with back-off. A broken engine stays broken.
type health struct {
	mu     sync.Mutex
	down   map[string]downState
	broken error // the engine cannot run again (walk.ErrEngineBroken)
	// onChange is called outside mu with the dependency and its new state.
	onChange func(dep string, up bool)
}

type downState struct {
	since time.Time
	err   string
}

func newHealth(onChange func(dep string, up bool)) *health {
	return &health{down: map[string]downState{}, onChange: onChange}
}

// fail marks dep down with err; it reports whether dep was up before.
func (h *health) fail(dep string, err error) bool {
	h.mu.Lock()
	_, was := h.down[dep]
	if !was {
		h.down[dep] = downState{since: time.Now(), err: err.Error()}
	} else {
		st := h.down[dep]
		st.err = err.Error()
		h.down[dep] = st
	}
	h.mu.Unlock()
	if !was && h.onChange != nil {
		h.onChange(dep, false)
	}
	return !was
}

// ok marks dep up; it returns how long it was down (0 when it was up).
func (h *health) ok(dep string) time.Duration {
	h.mu.Lock()
	st, was := h.down[dep]
	delete(h.down, dep)
	h.mu.Unlock()
	if !was {
		return 0
	}
	if h.onChange != nil {
		h.onChange(dep, true)
	}
	return max(time.Since(st.since), time.Nanosecond)
}

func (h *health) breakEngine(err error) {
	h.mu.Lock()
	first := h.broken == nil
	if first {
		h.broken = err
	}
	h.mu.Unlock()
	if first && h.onChange != nil {
		h.onChange(depEngine, false)
	}
}

// err is nil when every dependency is up, else says which are not and why.
func (h *health) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken != nil {
		return fmt.Errorf("engine unusable, restart the replica: %v", h.broken)
	}
	if len(h.down) == 0 {
		return nil
	}
	names := make([]string, 0, len(h.down))
	for n := range h.down {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		st := h.down[n]
		parts[i] = fmt.Sprintf("%s unavailable for %s: %s", n, time.Since(st.since).Round(100*time.Millisecond), st.err)
	}
	return errors.New(strings.Join(parts, "; "))
}

func (h *health) engineBroken() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.broken != nil
}

// backoff is the wait before retry number attempt (1, 2, ...): exponential
// from min, capped at max, with full jitter in its upper half so replicas
// that failed together do not retry together.
func backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// waitHealthy returns once every dependency is up (true) or ctx ends
// (false). This is the pause: nothing new is fetched while the stage could
// not finish it.
func (s *Stage) waitHealthy(ctx context.Context) bool {
	for s.health.err() != nil {
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return false
		}
	}
	return ctx.Err() == nil
}

// probeLoop runs the dependency probes until ctx ends.
func (s *Stage) probeLoop(ctx context.Context) {
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	for {
		for _, p := range s.o.Probes {
			pctx, cancel := context.WithTimeout(ctx, s.o.ProbeTimeout)
			err := p.Check(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.dependencyFailed(p.Name, "probe", err)
			} else {
				s.dependencyOK(p.Name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Stage) dependencyFailed(dep, op string, err error) {
	s.m.retries.WithLabelValues(dep).Inc()
	if s.health.fail(dep, err) {
		s.log.Warn("dependency unavailable: not ready, pausing consumption, retrying with back-off",
			"dependency", dep, "op", op, "err", err)
	}
}

func (s *Stage) dependencyOK(dep string) {
	if d := s.health.ok(dep); d > 0 {
		s.log.Info("dependency available again: resuming", "dependency", dep, "outage", d.Round(time.Millisecond))
	}
}

// persist runs f until it succeeds, retrying a failure as the given
// dependency's outage with capped, jittered back-off. It returns nil, or
// ctx's error once ctx ends (the shutdown deadline).
func (s *Stage) persist(ctx context.Context, dep, op string, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			s.dependencyOK(dep)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.dependencyFailed(dep, op, err)
		if !sleepCtx(ctx, backoff(attempt, s.o.RetryBackoffMin, s.o.RetryBackoffMax)) {
			return ctx.Err()
		}
	}
}
