package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	Broker = "broker"
	Store  = "object_store"
	Engine = "engine"
)

// Probe checks one dependency within ctx (RunProbes gives it a deadline).
type Probe struct {
	Name  string // broker, object_store, ...
	Check func(ctx context.Context) error
}

// Tracker is what the stage knows of its dependencies. A dependency is
// down while anything holds it down: its probe, the fetch loop, or an
// operation retrying on it (a batch's walk or commit, an event's publish).
// Each holder lets go only when its own next attempt succeeds, so a probe
// that passes while a batch's writes still fail cannot make the stage
// ready between two of the batch's attempts: readiness stays 503, with
// the reason, for as long as any retry is stuck. While any dependency is
// down the stage fetches nothing new; in-flight work retries with
// back-off. A broken engine stays broken.
type Tracker struct {
	mu     sync.Mutex
	down   map[string]*outage // by dependency; absent while it is up
	broken error              // the engine cannot run again (walk.ErrEngineBroken)
	// back maps a dependency to a channel closed when its probe passes
	// again after failing: retries sleeping out their back-off wake then,
	// instead of keeping the stage not ready for up to RetryBackoffMax
	// after the outage ended.
	back map[string]chan struct{}
	seq  atomic.Uint64 // numbers one-off holders (NewHolder)
	o    Options
}

// Options are a Tracker's logger, back-off and observers.
type Options struct {
	// Logger receives a line when a dependency goes down and when it is
	// back (Failed, Succeeded); nil discards them.
	Logger *slog.Logger
	// RetryBackoffMin and RetryBackoffMax bound the wait between retries
	// (RetryWait, Persist): exponential, with jitter.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// OnChange, when set, is called outside the Tracker's lock with a
	// dependency and its new state.
	OnChange func(dep string, up bool)
	// OnFailure, when set, is called for every failed attempt Failed
	// records (the stage counts them).
	OnFailure func(dep string)
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

// ProbeHolder holds a dependency down while its probe fails. The fetch
// loop holds the broker as "fetch"; a retrying operation takes a one-off
// name (NewHolder, the stage's batch.holder) that its own success or its
// end releases.
const ProbeHolder = "probe"

// New is a Tracker with every dependency up.
func New(o Options) *Tracker {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{down: map[string]*outage{}, back: map[string]chan struct{}{}, o: o}
}

// NewHolder is a holder name no other operation uses: what it does (shown
// in readiness), then '#' and a number.
func (h *Tracker) NewHolder(what string) string {
	return what + "#" + strconv.FormatUint(h.seq.Add(1), 10)
}

// holderRole is what a holder does ("batch" of "batch#12").
func holderRole(holder string) string {
	role, _, _ := strings.Cut(holder, "#")
	return role
}

// Down records that holder's attempt on dep failed with err, neither
// logged nor counted (Failed does both); it reports whether dep was up
// before.
func (h *Tracker) Down(dep, holder string, err error) bool {
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
	if !was && h.o.OnChange != nil {
		h.o.OnChange(dep, false)
	}
	return !was
}

// Up records that holder's attempt on dep succeeded, without a log line
// (Succeeded logs); it returns how long dep was down when that was its
// last holder (0 when dep is still held down, or was up).
func (h *Tracker) Up(dep, holder string) time.Duration {
	h.mu.Lock()
	o := h.down[dep]
	if o == nil || o.holds[holder] == nil {
		h.mu.Unlock()
		return 0
	}
	delete(o.holds, holder)
	if holder == ProbeHolder {
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
	if d > 0 && h.o.OnChange != nil && !(dep == Engine && broken) {
		h.o.OnChange(dep, true)
	}
	return d
}

// Release lets go of whatever holder holds, on every dependency: the
// operation ended without succeeding (abandoned at shutdown, refused,
// handed to another replica).
func (h *Tracker) Release(holder string) {
	h.mu.Lock()
	var up []string
	for dep, o := range h.down {
		if _, ok := o.holds[holder]; !ok {
			continue
		}
		delete(o.holds, holder)
		if len(o.holds) == 0 {
			delete(h.down, dep)
			if dep != Engine || h.broken == nil { // a broken engine stays down
				up = append(up, dep)
			}
		}
	}
	h.mu.Unlock()
	if h.o.OnChange != nil {
		for _, dep := range up {
			h.o.OnChange(dep, true)
		}
	}
}

// Recovered is closed the next time dep's probe passes after failing.
func (h *Tracker) Recovered(dep string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.back[dep]
	if !ok {
		ch = make(chan struct{})
		h.back[dep] = ch
	}
	return ch
}

// BreakEngine records that the engine cannot run again (walk.ErrEngineBroken):
// it stays down whoever lets go of it.
func (h *Tracker) BreakEngine(err error) {
	h.mu.Lock()
	first := h.broken == nil
	if first {
		h.broken = err
	}
	h.mu.Unlock()
	if first && h.o.OnChange != nil {
		h.o.OnChange(Engine, false)
	}
}

// Err is nil when every dependency is up, else says which are not, since
// when, and what holds each down (the oldest holders first).
func (h *Tracker) Err() error {
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

// EngineBroken reports whether BreakEngine was called.
func (h *Tracker) EngineBroken() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.broken != nil
}

// Backoff is the wait before retry number attempt (1, 2, ...): exponential
// from lo, capped at hi, with full jitter in its upper half so replicas
// that failed together do not retry together.
func Backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// WaitUp returns once every dependency is up (true) or ctx ends (false).
// This is the stage's pause: nothing new is fetched while the stage could
// not finish it.
func (h *Tracker) WaitUp(ctx context.Context) bool {
	for h.Err() != nil {
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return ctx.Err() == nil
}

// RunProbes runs probes every interval, each within timeout, until ctx
// ends; a failing probe holds its dependency down until it passes.
func (h *Tracker) RunProbes(ctx context.Context, probes []Probe, interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, p := range probes {
			pctx, cancel := context.WithTimeout(ctx, timeout)
			err := p.Check(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				h.Failed(p.Name, ProbeHolder, err)
			} else {
				h.Succeeded(p.Name, ProbeHolder)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Failed records that holder's attempt on dep failed: dep is down (not
// ready, consumption paused) until holder succeeds.
func (h *Tracker) Failed(dep, holder string, err error) {
	if h.o.OnFailure != nil {
		h.o.OnFailure(dep)
	}
	if h.Down(dep, holder, err) {
		h.o.Logger.Warn("dependency unavailable: not ready, pausing consumption, retrying with back-off",
			"dependency", dep, "op", holderRole(holder), "err", err)
	}
}

// Succeeded records that holder's attempt on dep succeeded.
func (h *Tracker) Succeeded(dep, holder string) {
	if d := h.Up(dep, holder); d > 0 {
		h.o.Logger.Info("dependency available again: resuming", "dependency", dep, "outage_seconds", d.Seconds())
	}
}

// RetryWait sleeps out the back-off before retry number attempt of work
// that failed on dep, or less when dep's probe finds it back. False means
// ctx ended.
func (h *Tracker) RetryWait(ctx context.Context, dep string, attempt int) bool {
	t := time.NewTimer(Backoff(attempt, h.o.RetryBackoffMin, h.o.RetryBackoffMax))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-h.Recovered(dep):
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// Persist runs f until it succeeds, retrying a failure as the given
// dependency's outage with capped, jittered back-off; dep stays down
// until f succeeds. It returns nil, or ctx's error once ctx ends (the
// shutdown deadline).
func (h *Tracker) Persist(ctx context.Context, dep, op string, f func(context.Context) error) error {
	holder := h.NewHolder(op)
	defer h.Release(holder)
	for attempt := 1; ; attempt++ {
		err := f(ctx)
		if err == nil {
			h.Succeeded(dep, holder)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.Failed(dep, holder, err)
		if !h.RetryWait(ctx, dep, attempt) {
			return ctx.Err()
		}
	}
}
