package livegraph

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Records large enough for Apply to spread them over goroutines leave the
// state the one-goroutine loop leaves: every vertex's delta, the counts, the
// added vertices and the compacted graph, over a base of several tree mids
// (so several goroutines write), for every variant a window does not use.
func TestApplyParallelEqualsSerial(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(len(v.name))))
			const n = midFan*leafFan + 3000 // two mids
			m, base := newModel(t, v, n, n, rng)
			par, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			ser, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			ser.serialApply = true
			for r := range 4 {
				var rec []Update
				for len(rec) < applyParallelMin+100 {
					rec = append(rec, m.randomRecord(rng)...)
				}
				for _, l := range []*Live{par, ser} {
					if err := l.Apply(0, int64(r), rec); err != nil {
						t.Fatal(err)
					}
				}
				if r%2 == 1 { // a publication between records: nodes copied on write again
					par.Publish()
					ser.Publish()
				}
			}
			ps, ss := par.Publish(), ser.Publish()
			if ps.NumVertices() != ss.NumVertices() || ps.Stats() != ss.Stats() {
				t.Fatalf("parallel: %d vertices, %+v; serial: %d vertices, %+v", ps.NumVertices(), ps.Stats(), ss.NumVertices(), ss.Stats())
			}
			if ps.Stats().Inserted < applyParallelMin {
				t.Fatalf("only %d inserts: the records did not exercise the parallel path", ps.Stats().Inserted)
			}
			sameApplied(t, "parallel", ps, "serial", ss, m.build(t, "base"))
		})
	}
}

// A background compaction's work keeps to the goroutines WithWorkers gives
// it, so that the applier's own find cores free: Compact, and the records
// its catch up applies over the compacted base, each on one goroutine here
// where the cores would allow four; the tail FinishRebase applies on the
// applier takes the live graph's own workers again. Before the bound, both
// spread over GOMAXPROCS goroutines, and on the 16-core host the applier,
// whose records waited for cores the compaction held, fell a second and
// more behind its stream (docs/benchmarks/live-graph.md).
func TestCompactionKeepsToItsWorkers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	v := variants[1] // weighted, labelled
	rng := rand.New(rand.NewPCG(5, 7))
	const n = midFan*leafFan + 3000 // two mids: a record spreads over two goroutines
	m, base := newModel(t, v, n, n, rng)
	var applier, compact, catchUp atomic.Int64
	l, err := New(base, withWorkerHook(func() { applier.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	record := func() []Update {
		var rec []Update
		for len(rec) < applyParallelMin+100 {
			rec = append(rec, m.randomRecord(rng)...)
		}
		return rec
	}
	off := int64(0)
	apply := func() {
		t.Helper()
		if err := l.Apply(0, off, record()); err != nil {
			t.Fatal(err)
		}
		off++
	}
	apply()
	if got := applier.Load(); got != 2 {
		t.Fatalf("a record over two mids went to %d goroutines, want 2", got)
	}
	from, err := l.BeginCompaction()
	if err != nil {
		t.Fatal(err)
	}
	rb, err := l.NewRebaser()
	if err != nil {
		t.Fatal(err)
	}
	apply()
	apply()
	g, err := Compact(context.Background(), from, WithWorkers(1), withWorkerHook(func() { compact.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	if got := compact.Load(); got != 1 {
		t.Errorf("Compact with one worker started %d goroutines (GOMAXPROCS 4)", got)
	}
	if all, err := Compact(context.Background(), from); err != nil || all.Checksum() != g.Checksum() {
		t.Fatalf("Compact on all cores: %v, or a graph other than on one (%v)", err, all.Checksum() != g.Checksum())
	}
	if err := rb.Base(g, WithWorkers(1), withWorkerHook(func() { catchUp.Add(1) })); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.CatchUp(); err != nil {
		t.Fatal(err)
	}
	if got := catchUp.Load(); got != 2 {
		t.Errorf("the catch up applied two records on %d goroutines, want one each", got)
	}
	applier.Store(0)
	apply() // the tail
	if _, st, err := l.FinishRebase(rb); err != nil || st.TailUpdates == 0 {
		t.Fatalf("FinishRebase: %v, tail %d updates", err, st.TailUpdates)
	}
	if got := catchUp.Load(); got != 2 {
		t.Errorf("the tail went to the catch up's workers (%d goroutines started there in all)", got)
	}
	if got := applier.Load(); got != 4 {
		t.Errorf("the record applied before the swap and its tail went to %d of the applier's goroutines, want 2 each", got)
	}
	applier.Store(0)
	apply()
	if got := applier.Load(); got != 2 {
		t.Errorf("after the swap a record went to %d goroutines, want 2", got)
	}
	if l.Snapshot().NumVertices() == 0 {
		t.Fatal("no snapshot")
	}
}

// Records handed over together (ApplyRecords, the applier's pass over the
// records queued behind one) leave what Apply on each in turn leaves: every
// vertex's delta, the counts, the watermark and the compacted graph. Records
// too small to be spread over goroutines alone are spread together, and a
// refused record among them is passed as Apply passes it, the others
// applied.
func TestApplyRecordsEqualsApply(t *testing.T) {
	cases := []struct {
		name string
		per  int // updates a record
		bad  int // index of a record with an unknown op, or -1
	}{
		{"small records", applyParallelMin / 4, -1},
		{"large records", 3 * resolvePerWorker / 4, -1}, // lookups on several goroutines too
		{"a refused record", applyParallelMin / 4, 3},
	}
	for _, c := range cases {
		for _, v := range variants {
			t.Run(c.name+"/"+v.name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(17, uint64(len(v.name)+c.bad)))
				const n = midFan*leafFan + 3000 // two mids
				m, base := newModel(t, v, n, n, rng)
				var workers atomic.Int64
				merged, err := New(base, withWorkerHook(func() { workers.Add(1) }))
				if err != nil {
					t.Fatal(err)
				}
				one, err := New(base)
				if err != nil {
					t.Fatal(err)
				}
				// Record 5 has no updates (the applier passes a record the
				// reader dead-lettered so); the refused one is not drawn
				// from the model, which holds what the others do.
				var recs []Record
				for i := range 8 {
					var ups []Update
					switch i {
					case c.bad:
						ups = []Update{{Op: Insert, Src: m.ids[0], Dst: m.ids[1]}, {Op: 9, Src: m.ids[1], Dst: m.ids[0]}}
					case 5:
					default:
						for len(ups) < c.per {
							ups = append(ups, m.randomRecord(rng)...)
						}
					}
					recs = append(recs, Record{Partition: int32(i % 3), Offset: int64(10 + i/3), Updates: ups})
				}
				errs := merged.ApplyRecords(recs)
				for i, r := range recs {
					err := one.Apply(r.Partition, r.Offset, r.Updates)
					if err != nil {
						_ = one.Apply(r.Partition, r.Offset, nil)
					}
					var got error
					if errs != nil {
						got = errs[i]
					}
					if (err == nil) != (got == nil) {
						t.Fatalf("record %d: ApplyRecords %v, Apply %v", i, got, err)
					}
				}
				if c.bad < 0 && workers.Load() < 2 {
					t.Fatalf("records of %d updates each went to %d goroutines, want one a mid", c.per, workers.Load())
				}
				ps, ss := merged.Publish(), one.Publish()
				if ps.NumVertices() != ss.NumVertices() || ps.Stats() != ss.Stats() || !reflect.DeepEqual(ps.Watermark(), ss.Watermark()) {
					t.Fatalf("merged: %d vertices, %+v, watermark %v; one by one: %d vertices, %+v, watermark %v",
						ps.NumVertices(), ps.Stats(), ps.Watermark(), ss.NumVertices(), ss.Stats(), ss.Watermark())
				}
				sameApplied(t, "merged", ps, "one by one", ss, m.build(t, "base"))
			})
		}
	}
}

// stepCores is a Cores whose answer the test sets; it keeps the largest n
// it was asked about.
type stepCores struct{ answer, asked atomic.Int64 }

// countedCores answers answer and counts the questions.
type countedCores struct{ answer, asked atomic.Int64 }

func (c *countedCores) Cores(int) int {
	c.asked.Add(1)
	return int(c.answer.Load())
}

func (c *stepCores) Cores(n int) int {
	for {
		a := c.asked.Load()
		if int64(n) <= a || c.asked.CompareAndSwap(a, int64(n)) {
			break
		}
	}
	return int(c.answer.Load())
}

// A pass takes as many goroutines as WithCores answers at its start,
// bounded by WithWorkers and the mids it writes, at least one; the state
// stays the serial loop's. Compact keeps the goroutines above the answer
// waiting: with one core allowed, one goroutine compacts it all, to the
// same graph. Why: the stage's walkers hold the cores while walk jobs run
// or wait, and a pass spread over every core took them from the walks
// (docs/benchmarks/live-graph.md, "Ingest beside walks").
func TestPassesKeepToTheCores(t *testing.T) {
	v := variants[1] // weighted, labelled
	rng := rand.New(rand.NewPCG(23, 29))
	const n = midFan*leafFan + 3000 // two mids
	m, base := newModel(t, v, n, n, rng)
	var started atomic.Int64
	var cores stepCores
	l, err := New(base, WithWorkers(4), withWorkerHook(func() { started.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	l.SetCores(&cores)
	ser, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	ser.serialApply = true
	cases := []struct {
		answer int64
		want   int64 // goroutines the record's pass starts
	}{
		{answer: 2, want: 2},
		{answer: 1, want: 1},
		{answer: 0, want: 1},  // at least one
		{answer: 16, want: 2}, // no more than the record's mids
		{answer: 1, want: 1},
	}
	for i, c := range cases {
		// Below 2*resolvePerWorker updates: the lookups take no goroutine
		// of their own, so every start counted is the pass's.
		var rec []Update
		for len(rec) < applyParallelMin+100 {
			rec = append(rec, m.randomRecord(rng)...)
		}
		cores.answer.Store(c.answer)
		started.Store(0)
		for _, x := range []*Live{l, ser} {
			if err := x.Apply(0, int64(i), rec); err != nil {
				t.Fatal(err)
			}
		}
		if got := started.Load(); got != c.want {
			t.Errorf("record %d with %d cores allowed: %d goroutines, want %d", i, c.answer, got, c.want)
		}
	}
	if got := cores.asked.Load(); got != 4 {
		t.Errorf("the passes asked for %d cores, want WithWorkers' 4", got)
	}
	ps, ss := l.Publish(), ser.Publish()
	if ps.Stats() != ss.Stats() {
		t.Fatalf("bounded passes: %+v; serial: %+v", ps.Stats(), ss.Stats())
	}
	for v := range uint32(ps.NumVertices()) {
		if a, b := ps.Vertex(v), ss.Vertex(v); !reflect.DeepEqual(a, b) {
			t.Fatalf("vertex %d: bounded passes %+v, serial %+v", v, a, b)
		}
	}
	var compacting atomic.Int64
	one := &stepCores{}
	one.answer.Store(1)
	g, err := Compact(context.Background(), ps, WithWorkers(4), WithCores(one), withWorkerHook(func() { compacting.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	if got := compacting.Load(); got != 1 {
		t.Errorf("Compact with one core allowed of four: %d goroutines took vertices, want 1", got)
	}
	if got := one.asked.Load(); got != 4 {
		t.Errorf("Compact asked for %d cores, want WithWorkers' 4", got)
	}
	all, err := Compact(context.Background(), ps, WithWorkers(4))
	if err != nil {
		t.Fatal(err)
	}
	if g.Checksum() != all.Checksum() || g.Checksum() != m.build(t, "base").Checksum() {
		t.Fatal("the compaction on one allowed core differs from the one on four, or from the model")
	}

	// A compaction started beside walks takes the cores again when they
	// end: the first goroutine takes its vertices and holds on until the
	// three above the answer of one have asked again and again (they
	// wait, asking every yieldPause), then the answer goes to four; each
	// goroutine holds on after its first vertices until all four took
	// theirs (at most four of the graph's 67 chunks are taken meanwhile).
	// The guards only keep a failure from hanging: the count then says how
	// many took vertices.
	var widened atomic.Int64
	rising := &countedCores{}
	rising.answer.Store(1)
	g, err = Compact(context.Background(), ps, WithWorkers(4), WithCores(rising), withWorkerHook(func() {
		if widened.Add(1) == 1 {
			for guard := time.Now().Add(10 * time.Second); rising.asked.Load() < 30 && time.Now().Before(guard); {
				time.Sleep(time.Millisecond)
			}
			rising.answer.Store(4)
		}
		for guard := time.Now().Add(10 * time.Second); widened.Load() < 4 && time.Now().Before(guard); {
			time.Sleep(time.Millisecond)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := widened.Load(); got != 4 {
		t.Errorf("Compact allowed one core, then four: %d goroutines took vertices, want 4", got)
	}
	if g.Checksum() != all.Checksum() {
		t.Fatal("the compaction that widened differs from the one on four")
	}
}

// sameApplied fails t unless snapshots a and b, the same records applied
// two ways (named by how), hold the same vertices, and both compact to the
// model's graph want.
func sameApplied(t *testing.T, howA string, a *Snapshot, howB string, b *Snapshot, want *graph.Graph) {
	t.Helper()
	for v := range uint32(a.NumVertices()) {
		if va, vb := a.Vertex(v), b.Vertex(v); !reflect.DeepEqual(va, vb) {
			t.Fatalf("vertex %d: %s %+v, %s %+v", v, howA, va, howB, vb)
		}
	}
	for _, c := range []struct {
		how string
		s   *Snapshot
	}{{howA, a}, {howB, b}} {
		g, err := Compact(context.Background(), c.s)
		if err != nil {
			t.Fatal(err)
		}
		if g.Checksum() != want.Checksum() {
			t.Fatalf("the compaction of the %s snapshot differs from the model", c.how)
		}
	}
}

// A parallel pass keeps its scratch (the updates' dense ids, their order
// by tree mid, the per-goroutine counts) from one pass to the next: a
// record that writes nothing (deletes of edges the graph lacks) allocates
// no memory per update, only the pass's few goroutines. Made anew, the
// scratch was about 20 bytes an update, bytes that bring the collector's
// next cycle nearer while the applier ingests (issue 37).
func TestApplyPassReusesScratch(t *testing.T) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 4, Seed: 3, Weighted: true, Name: "scratch"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	// Deletes of a vertex's edge to itself: the generator's self-loops,
	// if any, are few, and the check after the passes counts them.
	rng := rand.New(rand.NewPCG(5, 5))
	rec := make([]Update, 4*applyParallelMin)
	for i := range rec {
		v := int64(rng.IntN(base.NumVertices()))
		rec[i] = Update{Op: Delete, Src: v, Dst: v}
	}
	apply := func() {
		if err := l.Apply(-1, 0, rec); err != nil {
			t.Fatal(err)
		}
	}
	apply() // the first pass makes the scratch
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	allocs := testing.AllocsPerRun(20, apply)
	runtime.ReadMemStats(&m1)
	if st := l.Publish().Stats(); st.Tombstones > int64(len(rec))/100 {
		t.Fatalf("the deletes killed %d targets' edges, want almost none: %+v", st.Tombstones, st)
	}
	perUpdate := float64(m1.TotalAlloc-m0.TotalAlloc) / 21 / float64(len(rec))
	t.Logf("%.0f objects a pass, %.3f bytes an update", allocs, perUpdate)
	if perUpdate > 1 {
		t.Errorf("a pass that wrote nothing allocated %.2f bytes per update (%.0f objects a pass), want at most 1: its scratch is made anew", perUpdate, allocs)
	}
	if allocs > 16 {
		t.Errorf("a pass that wrote nothing allocated %.0f objects, want at most 16 (its goroutines, their closures and wait groups)", allocs)
	}
}

// A publication while walks go on (its delta index made at once) lists
// the vertices written in a list kept from one publication to the next,
// its pointers cleared in between so that it keeps no old state alive:
// grown anew by appends, it was a dozen pointer-holding arrays a
// publication of a thousand vertices written.
func TestPublishReusesItsChangeList(t *testing.T) {
	base, l := walkedLive(t, "changes")
	rng := rand.New(rand.NewPCG(6, 6))
	rec := make([]Update, 1000)
	next := func() {
		for i := range rec {
			rec[i] = Update{Op: Insert, Src: int64(rng.IntN(base.NumVertices())), Dst: 1, Weight: 1, Has: HasWeight}
		}
		if err := l.Apply(-1, 0, rec); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		next()
		l.Publish()
	}
	// The count is the process's: another goroutine's allocation (the
	// runtime's, a test's left over) lands in it too, so the fewest of a
	// few publications is Publish's own (CI once saw 14).
	allocs := math.Inf(1)
	for range 5 {
		next()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		l.Publish()
		runtime.ReadMemStats(&m1)
		allocs = min(allocs, float64(m1.Mallocs-m0.Mallocs))
	}
	t.Logf("a publication of %d vertices written: %.0f objects (the fewest of 5)", len(rec), allocs)
	if allocs > 13 {
		t.Errorf("a publication of about %d vertices written allocated %.0f objects, want at most 13 (the new index's arrays, its side and appended sets' holders, and its spans' goroutines)", len(rec), allocs)
	}
	for i, c := range l.changeBuf[:cap(l.changeBuf)] {
		if c.D != nil {
			t.Fatalf("the kept change list's entry %d still points to vertex %d's state", i, c.V)
		}
	}
}

// A publication that folds the delta index's patch into its base level
// allocates the folded index (its words and base level, Bytes) and little
// else: not also the patch an Update would have made for the fold to drop
// at once, which was up to 48 bytes a vertex with a delta at every fold
// (docs/benchmarks/live-graph.md, "The fold without its patch").
func TestPublishFoldsWithoutAPatch(t *testing.T) {
	base, l := walkedLive(t, "fold")
	rng := rand.New(rand.NewPCG(7, 7))
	rec := make([]Update, 1000)
	const slack = 16 << 10 // the snapshot, its watermark and channel
	folds := 0
	for range 40 {
		for i := range rec {
			rec[i] = Update{Op: Insert, Src: int64(rng.IntN(base.NumVertices())), Dst: 1, Weight: 1, Has: HasWeight}
		}
		if err := l.Apply(-1, 0, rec); err != nil {
			t.Fatal(err)
		}
		before := l.index.Pending()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		s := l.Publish()
		runtime.ReadMemStats(&m1)
		x := s.idx
		if x == nil || x.Pending() != 0 || before == 0 {
			continue // not a fold
		}
		folds++
		if got := int64(m1.TotalAlloc - m0.TotalAlloc); got > x.Bytes()+slack {
			t.Errorf("a publication that folded %d vertices with a delta allocated %d bytes, want at most the folded index's %d and %d more", x.Len(), got, x.Bytes(), slack)
		}
	}
	if folds == 0 {
		t.Fatal("no publication folded the index's patch")
	}
	t.Logf("%d folds", folds)
}

// While walks take every publication's index, a publication drops the
// applier's tree (the index holds every record), and a tree no snapshot
// saw is taken over by the next epoch: writing again the vertices it
// held allocates no mid, leaf or state (before, each vertex written after
// a drop cost a 48-byte state, and each leaf of 64 a 528-byte node). The
// vertices' edge arrays have room for the second write's edge, so the
// write should allocate nearly nothing; the walks' view is checked too.
func TestPublishDroppedTreeIsTakenOver(t *testing.T) {
	base, l := walkedLive(t, "spare")
	rng := rand.New(rand.NewPCG(8, 8))
	srcs := rng.Perm(base.NumVertices())[:1000]
	var rec []Update
	for _, v := range srcs {
		for range 5 { // DeltaCap(5) = 6: room for one more
			rec = append(rec, Update{Op: Insert, Src: int64(v), Dst: int64(rng.IntN(base.NumVertices())), Weight: 1, Has: HasWeight})
		}
	}
	if err := l.Apply(-1, 0, rec); err != nil {
		t.Fatal(err)
	}
	first := l.Publish()
	first.DeltaIndex()
	rec = rec[:0]
	for _, v := range srcs {
		rec = append(rec, Update{Op: Insert, Src: int64(v), Dst: 7, Weight: 2, Has: HasWeight})
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if err := l.Apply(-1, 1, rec); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	allocs := m1.Mallocs - m0.Mallocs
	t.Logf("writing %d vertices of the dropped tree again: %d objects", len(srcs), allocs)
	if allocs > 20 {
		t.Errorf("writing %d vertices of the dropped tree again allocated %d objects, want at most 20 (no state, leaf or mid of their own)", len(srcs), allocs)
	}
	s := l.Publish()
	for _, v := range srcs {
		dv := s.Vertex(uint32(v))
		if e := dv.Edges(); len(e) != 6 || e[5] != (walk.DeltaEdge{Target: 7, Weight: 2}) || dv.MaxWeight != 2 {
			t.Fatalf("vertex %d: appended edges %v (max weight %v), want 5 then 7 of weight 2", v, e, dv.MaxWeight)
		}
	}
	// Both publications dropped their tree: what the delta counts beyond
	// the index is the edge arrays, the same room both times.
	if st := s.Stats(); st.DeltaEdges != 6000 || st.Vertices != 1000 || st.Bytes != first.Stats().Bytes {
		t.Errorf("stats: %d delta edges on %d vertices in %d bytes, want 6000 on 1000 in %d", st.DeltaEdges, st.Vertices, st.Bytes, first.Stats().Bytes)
	}
}

// Taking over the dropped tree changes nothing a snapshot shows: a live
// graph whose publications are walked or not at random (so trees are
// dropped, taken over, handed to snapshots between) shows at every
// publication the records of one never walked, and a snapshot kept from
// earlier still shows what it showed when published.
func TestSpareTreeKeepsSnapshots(t *testing.T) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 4, Seed: 4, Weighted: true, Name: "spare"})
	if err != nil {
		t.Fatal(err)
	}
	walked, err := New(base, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(base, WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	n := base.NumVertices()
	view := func(s *Snapshot) []string {
		out := make([]string, s.NumVertices())
		for v := range out {
			if dv := s.Vertex(uint32(v)); dv != nil {
				out[v] = fmt.Sprint(dv.Edges(), dv.Dead(), dv.Live, dv.BaseWeight, dv.MaxWeight, dv.DeadBits)
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var kept *Snapshot
	var keptView []string
	for step := range 60 {
		rec := make([]Update, 300)
		for i := range rec {
			// A small range of sources: vertices written again and again.
			src, dst := int64(rng.IntN(n/8)), int64(rng.IntN(n))
			rec[i] = Update{Op: Insert, Src: src, Dst: dst, Weight: float32(1 + rng.IntN(3)), Has: HasWeight}
			if rng.IntN(4) == 0 {
				rec[i] = Update{Op: Delete, Src: src, Dst: dst}
			}
		}
		for _, l := range []*Live{walked, plain} {
			if err := l.Apply(0, int64(step), rec); err != nil {
				t.Fatal(err)
			}
		}
		if rng.IntN(3) == 0 {
			walked.walkedAt.Store(0) // nobody walks: the tree goes to the snapshot
		}
		s, p := walked.Publish(), plain.Publish()
		if rng.IntN(3) != 0 {
			s.DeltaIndex() // a walk: the next publications make their index
		}
		if got, want := view(s), view(p); !slices.Equal(got, want) {
			t.Fatalf("step %d: the walked graph's snapshot differs from the unwalked one's", step)
		}
		if kept != nil && !slices.Equal(view(kept), keptView) {
			t.Fatalf("step %d: a snapshot kept from earlier changed", step)
		}
		if step%5 == 0 {
			kept, keptView = s, view(s)
		}
	}
}

// walkedLive is a one-worker live graph over a small weighted R-MAT graph
// that a walk has already asked for an index, so that every publication
// makes its delta index at once, as while walks go on.
func walkedLive(t *testing.T, name string) (*graph.Graph, *Live) {
	t.Helper()
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 14, EdgeFactor: 4, Seed: 3, Weighted: true, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base, WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	l.Snapshot().DeltaIndex() // a walk: publications make their index at once
	return base, l
}
