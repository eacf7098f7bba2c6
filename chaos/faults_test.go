package chaos

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"gocloud.dev/blob"
)

// faultNames are the faults a run can make, in the order it makes them.
// WALKSTAGE_CHAOS_FAULTS picks some: "kills,s3" runs only those, "-expensive"
// all but that one; empty or "all" runs every one. Bad messages, resends
// and conflicts are always sent.
var faultNames = []string{
	"latetopic",  // the input topic is created after the stage started
	"s3",         // an S3 fault proxy between the stage and versitygw, the whole run
	"kills",      // SIGKILL of the stage mid-batch, under a backlog
	"outages",    // SIGSTOP of the broker, then of the object store
	"storekill",  // SIGKILL of versitygw, restarted on the same data directory
	"brokerlost", // SIGKILL of the broker, a fresh one (empty log) on the same address
	"recreate",   // the three topics deleted and created again under the running stage
	"oversized",  // malformed messages with a 2 MiB header and with a 600 KiB key
	"expensive",  // expensive valid Node2Vec requests beside a stream of small ones
}

type faultSet map[string]bool

func parseFaults(s string) (faultSet, error) {
	return parseSet("WALKSTAGE_CHAOS_FAULTS", s, faultNames)
}

// parseSet reads a selection of names from the variable env: empty or
// "all" is every name, "a,b" only those, "-a,-b" all but those.
func parseSet(env, s string, names []string) (faultSet, error) {
	all := faultSet{}
	for _, n := range names {
		all[n] = true
	}
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return all, nil
	}
	items := strings.Split(s, ",")
	exclude := strings.HasPrefix(strings.TrimSpace(items[0]), "-")
	fs := faultSet{}
	if exclude {
		fs = all
	}
	for _, it := range items {
		it = strings.TrimSpace(it)
		name, neg := strings.CutPrefix(it, "-")
		if neg != exclude {
			return nil, fmt.Errorf("%s=%q: either list the faults to make or, each with a leading -, those to leave out", env, s)
		}
		if !all[name] {
			return nil, fmt.Errorf("%s=%q: no fault %q (faults: %s)", env, s, name, strings.Join(names, ","))
		}
		fs[name] = !neg
	}
	return fs, nil
}

func (fs faultSet) String() string {
	var on []string
	for _, n := range faultNames {
		if fs[n] {
			on = append(on, n)
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// faultClock knows whether a fault is in progress and when the last one
// cleared: a partition that does not move is stuck only once its fault
// has cleared for a while.
type faultClock struct {
	mu      sync.Mutex
	active  int
	cleared time.Time
	last    string
}

func (c *faultClock) begin(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active++
	c.last = what
}

func (c *faultClock) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.active--
	c.cleared = time.Now()
}

// quietSince is when the last fault cleared; ok is false while one is in
// progress.
func (c *faultClock) quietSince() (time.Time, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cleared, c.last, c.active == 0
}

// offsetMonitor samples the stage group's committed offsets and the input
// topic's end offsets, and finds two kinds of failure in them: a commit
// beyond the log's end (an acknowledgement carried into another log), and
// a partition that stays behind its end without moving, long after the
// last fault cleared, while the stage moves no other partition either (a
// stuck batch; one partition waiting while the stage works through a
// backlog elsewhere is slow, not stuck, and is judged once that is done).
type offsetMonitor struct {
	stall  time.Duration
	faults *faultClock

	mu       sync.Mutex
	gen      int
	paused   bool
	since    map[int32]time.Time // when each partition last moved or was caught up
	prev     map[int32]int64
	stuck    []string
	ahead    []string
	stuckNow map[int32]bool
	lastMove time.Time // when any partition's commit last moved
	samples  int
}

func newOffsetMonitor(stall time.Duration, faults *faultClock) *offsetMonitor {
	return &offsetMonitor{stall: stall, faults: faults, since: map[int32]time.Time{}, prev: map[int32]int64{}, stuckNow: map[int32]bool{}}
}

// pause stops judging while the log is being replaced; resume starts again
// on generation gen, with every partition's clock restarted.
func (m *offsetMonitor) pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused = true
}

func (m *offsetMonitor) resume(gen int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused, m.gen, m.lastMove = false, gen, time.Time{}
	m.since, m.prev, m.stuckNow = map[int32]time.Time{}, map[int32]int64{}, map[int32]bool{}
}

func (m *offsetMonitor) run(ctx context.Context, cl *kgo.Client, every time.Duration, rel func(time.Time) string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		m.mu.Lock()
		paused, gen := m.paused, m.gen
		m.mu.Unlock()
		if paused {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		// Committed first, then the end: a commit is never ahead of an end
		// read after it, whatever happens in between.
		com, err := committedOffsets(sctx, cl, stageGroup, "in", partitions)
		var end map[int32]int64
		if err == nil {
			end, err = endOffsets(sctx, cl, "in", partitions)
		}
		cancel()
		if err != nil {
			continue // the broker is away: a fault, not a finding
		}
		m.observe(time.Now(), gen, com, end, rel)
	}
}

func (m *offsetMonitor) observe(now time.Time, gen int, com, end map[int32]int64, rel func(time.Time) string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.paused || gen != m.gen {
		return
	}
	m.samples++
	quiet, lastFault, ok := m.faults.quietSince()
	for p := range int32(partitions) {
		if prev, seen := m.prev[p]; !seen || com[p] != prev {
			m.lastMove = now
		}
	}
	for p := range int32(partitions) {
		c, e := com[p], end[p]
		if c > e {
			m.ahead = append(m.ahead, fmt.Sprintf("in/%d: committed %d, the log ends at %d (log generation %d, %s)", p, c, e, gen, rel(now)))
		}
		prev, seen := m.prev[p]
		if !seen || c != prev || max(c, 0) >= e {
			m.since[p], m.prev[p], m.stuckNow[p] = now, c, false
			continue
		}
		if !ok || m.stuckNow[p] || now.Sub(m.lastMove) < m.stall/2 {
			continue
		}
		from := m.since[p]
		if quiet.After(from) {
			from = quiet
		}
		if now.Sub(from) >= m.stall {
			m.stuckNow[p] = true
			m.stuck = append(m.stuck, fmt.Sprintf("in/%d: committed %d of %d, unmoved since %s (%s after the last fault, %s, cleared)",
				p, c, e, rel(m.since[p]), now.Sub(from).Round(time.Second), lastFault))
		}
	}
}

func (m *offsetMonitor) findings() (stuck, ahead []string, samples int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.stuck), slices.Clone(m.ahead), m.samples
}

// percentile of ds (nearest rank); 0 for none.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}

// answeredAt is the time of the first event for m's batch produced after m
// was (its timestamp); ok false if there is none.
func answeredAt(m *msg, events map[string][]event) (time.Time, bool) {
	var first time.Time
	from := m.produced.Truncate(time.Millisecond)
	for _, e := range events[m.batchID] {
		if !e.at.Before(from) && (first.IsZero() || e.at.Before(first)) {
			first = e.at
		}
	}
	return first, !first.IsZero()
}

// partCheck reads objects back once and remembers what it found.
type partCheck struct {
	b    *blob.Bucket
	crcs map[string]string // key -> base64 CRC32C, or "error: ..."
}

func (c *partCheck) crc(ctx context.Context, key string) string {
	if v, ok := c.crcs[key]; ok {
		return v
	}
	data, err := c.b.ReadAll(ctx, key)
	v := ""
	if err != nil {
		v = "error: " + err.Error()
	} else {
		var sum [4]byte
		binary.BigEndian.PutUint32(sum[:], crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)))
		v = base64.StdEncoding.EncodeToString(sum[:])
	}
	c.crcs[key] = v
	return v
}

// checkEvent reads back what a succeeded event names: its manifest must be
// there and name the event's batch, and every object of the event must be
// a part of that manifest whose bytes match the manifest's CRC32C. An
// output deleted or replaced after its event was published fails here.
func checkEvent(ctx context.Context, pc *partCheck, e event) error {
	mkey, err := objectKey(e.Manifest)
	if err != nil {
		return fmt.Errorf("manifest %q: %v", e.Manifest, err)
	}
	data, err := pc.b.ReadAll(ctx, mkey)
	if err != nil {
		return fmt.Errorf("manifest %s: %v", mkey, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("manifest %s: %v", mkey, err)
	}
	var problems []string
	if m.BatchID != e.BatchID {
		problems = append(problems, fmt.Sprintf("manifest %s is batch %q", mkey, m.BatchID))
	}
	want := map[string]string{}
	for _, f := range m.Files {
		want[f.Key] = f.CRC32C
	}
	for _, u := range e.Objects {
		k, err := objectKey(u)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		sum, listed := want[k]
		switch got := pc.crc(ctx, k); {
		case !listed:
			problems = append(problems, k+": not in the manifest")
		case strings.HasPrefix(got, "error: "):
			problems = append(problems, k+": "+got)
		case got != sum:
			problems = append(problems, fmt.Sprintf("%s: CRC32C %s, manifest says %s", k, got, sum))
		}
	}
	if len(e.Objects) != len(m.Files) {
		problems = append(problems, fmt.Sprintf("event names %d objects, manifest %d", len(e.Objects), len(m.Files)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// countBy describes a count per name, sorted by name: "a:1,b:2".
func countBy(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var s []string
	for _, k := range ks {
		s = append(s, fmt.Sprintf("%s:%d", k, m[k]))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}
