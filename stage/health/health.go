package stage

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/internal/redact"
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

// health is what the stage knows of its dependencies. A dependency is
// down while anything holds it down: its probe, the fetch loop, or an
// operation retrying on it (a batch's walk or commit, an event's publish).
// Each holder lets go only when its own next attempt succeeds, so a probe
// that passes while a batch's writes still fail cannot make the stage
// ready between two of the batch's attempts: readiness stays 503, with
// the reason, for as long as any retry is stuck. While any dependency is
// down the stage fetches nothing new; in-flight work retries with
// back-off. A broken engine stays broken.
type health struct {
	mu     sync.Mutex
	down   map[string]*outage // by dependency; absent while it is up
	broken error              // the engine cannot run again (walk.ErrEngineBroken)
	// back maps a dependency to a channel closed when its probe passes
	// again after failing: retries sleeping out their back-off wake then,
	// instead of keeping the stage not ready for up to RetryBackoffMax
	// after the outage ended.
	back map[string]chan struct{}
	seq  atomic.Uint64 // numbers one-off holders (newHolder)
	// onChange is called outside mu with the dependency and its new state.
	onChange func(dep string, up bool)
}

// outage is one dependency's time down and who holds it down.
type outage struct {
	since time.Time
	holds map[string]*hold // by holder
}

// hold is one holder's reason for keeping a dependency down.
type hold struct {
	since    time.Time
	attempts int
	err      string
}

// holdProbe holds a dependency down while its probe fails. The fetch
// loop holds the broker as "fetch"; a retrying operation takes a one-off
// name (newHolder, batch.holder) that its own success or its end releases.
const holdProbe = "probe"

func newHealth(onChange func(dep string, up bool)) *health {
	return &health{down: map[string]*outage{}, back: map[string]chan struct{}{}, onChange: onChange}
}

// newHolder is a holder name no other operation uses: what it does (shown
// in readiness), then '#' and a number.
func (h *health) newHolder(what string) string {
	return what + "#" + strconv.FormatUint(h.seq.Add(1), 10)
}

// holder is the name b's attempts hold dependencies down by.
func (b *batch) holder() string { return fmt.Sprintf("batch#%p", b) }

// holderRole is what a holder does ("batch" of "batch#12").
func holderRole(holder string) string {
	role, _, _ := strings.Cut(holder, "#")
	return role
}

// fail records that holder's attempt on dep failed with err; it reports
// whether dep was up before.
func (h *health) fail(dep, holder string, err error) bool {
	h.mu.Lock()
	o := h.down[dep]
	was := o != nil
	if o == nil {
		o = &outage{since: time.Now(), holds: map[string]*hold{}}
		h.down[dep] = o
	}
	hd := o.holds[holder]
	if hd == nil {
		hd = &hold{since: time.Now()}
		o.holds[holder] = hd
	}
	hd.attempts++
	hd.err = redact.String(err.Error())
	h.mu.Unlock()
	if !was && h.onChange != nil {
		h.onChange(dep, false)
	}
	return !was
}

// ok records that holder's attempt on dep succeeded; it returns how long
// dep was down when that was its last holder (0 when dep is still held
// down, or was up).
func (h *health) ok(dep, holder string) time.Duration {
	h.mu.Lock()
	o := h.down[dep]
	if o == nil || o.holds[holder] == nil {
		h.mu.Unlock()
		return 0
	}
	delete(o.holds, holder)
	if holder == holdProbe {
		if ch, ok := h.back[dep]; ok {
			close(ch)
			delete(h.back, dep)
		}
	}
	var d time.Duration
	if len(o.holds) == 0 {
		delete(h.down, dep)
		d = max(time.Since(o.since), time.Nanosecond)
	}
	broken := h.broken != nil
	h.mu.Unlock()
	if d > 0 && h.onChange != nil && !(dep == depEngine && broken) {
		h.onChange(dep, true)
	}
	return d
}

// release lets go of whatever holder holds, on every dependency: the
// operation ended without succeeding (abandoned at shutdown, refused,
// handed to another replica).
func (h *health) release(holder string) {
	h.mu.Lock()
	var up []string
	for dep, o := range h.down {
		if _, ok := o.holds[holder]; !ok {
			continue
		}
		delete(o.holds, holder)
		if len(o.holds) == 0 {
			delete(h.down, dep)
			if dep != depEngine || h.broken == nil { // a broken engine stays down
				up = append(up, dep)
			}
		}
	}
	h.mu.Unlock()
	if h.onChange != nil {
		for _, dep := range up {
			h.onChange(dep, true)
		}
	}
}

// recovered is closed the next time dep's probe passes after failing.
func (h *health) recovered(dep string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.back[dep]
	if !ok {
		ch = make(chan struct{})
		h.back[dep] = ch
	}
	return ch
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

// err is nil when every dependency is up, else says which are not, since
// when, and what holds each down (the oldest holders first).
func (h *health) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.broken != nil {
		return fmt.Errorf("engine unusable, restart the replica: %v", h.broken)
	}
	if len(h.down) == 0 {
		return nil
	}
	deps := make([]string, 0, len(h.down))
	for d := range h.down {
		deps = append(deps, d)
	}
	sort.Strings(deps)
	parts := make([]string, len(deps))
	for i, d := range deps {
		o := h.down[d]
		holds := make([]*hold, 0, len(o.holds))
		roles := map[*hold]string{}
		for holder, hd := range o.holds {
			holds = append(holds, hd)
			roles[hd] = holderRole(holder)
		}
		sort.Slice(holds, func(a, b int) bool { return holds[a].since.Before(holds[b].since) })
		// A few reasons are enough; a stuck store can hold every batch.
		const shown = 3
		why := make([]string, 0, shown+1)
		for _, hd := range holds[:min(len(holds), shown)] {
			why = append(why, fmt.Sprintf("%s failing for %s (%d attempts): %s", roles[hd],
				time.Since(hd.since).Round(100*time.Millisecond), hd.attempts, hd.err))
		}
		if len(holds) > shown {
			why = append(why, fmt.Sprintf("and %d more", len(holds)-shown))
		}
		parts[i] = fmt.Sprintf("%s unavailable for %s: %s", d, time.Since(o.since).Round(100*time.Millisecond),
			strings.Join(why, "; "))
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
				s.dependencyFailed(p.Name, holdProbe, err)
			} else {
				s.dependencyOK(p.Name, holdProbe)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// dependencyFailed records that holder's attempt on dep failed: dep is
// down (not ready, consumption paused) until holder succeeds.
func (s *Stage) dependencyFailed(dep, holder string, err error) {
	s.m.retries.WithLabelValues(dep).Inc()
	if s.health.fail(dep, holder, err) {
		s.log.Warn("dependency unavailable: not ready, pausing consumption, retrying with back-off",
			"dependency", dep, "op", holderRole(holder), "err", err)
	}
}

// dependencyOK records that holder's attempt on dep succeeded.
func (s *Stage) dependencyOK(dep, holder string) {
	if d := s.health.ok(dep, holder); d > 0 {
		s.log.Info("dependency available again: resuming", "dependency", dep, "outage_seconds", d.Seconds())
	}
}

// retryWait sleeps out the back-off before retry number attempt of work
// that failed on dep, or less when dep's probe finds it back. False means
// ctx ended.
func (s *Stage) retryWait(ctx context.Context, dep string, attempt int) bool {
	t := time.NewTimer(backoff(attempt, s.o.RetryBackoffMin, s.o.RetryBackoffMax))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.health.recovered(dep):
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// persist runs f until it succeeds, retrying a failure as the given
// dependency's outage with capped, jittered back-off; dep stays down
// until f succeeds. It returns nil, or ctx's error once ctx ends (the
// shutdown deadline).
func (s *Stage) persist(ctx context.Context, dep, op string, f func(context.Context) error) error {
	holder := s.health.newHolder(op)
	defer s.health.release(holder)
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			s.dependencyOK(dep, holder)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.dependencyFailed(dep, holder, err)
		if !s.retryWait(ctx, dep, attempt) {
			return ctx.Err()
		}
	}
}
