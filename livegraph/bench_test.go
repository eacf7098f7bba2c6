package livegraph

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// benchBase is the base graph of the ingest benchmark: R-MAT scale 18
// (262,144 vertices, about 3.7 M stored edges), weighted.
var benchBase = sync.OnceValues(func() (*graph.Graph, error) {
	return graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 18, EdgeFactor: 8, Seed: 1, Undirected: true, Weighted: true, Name: "ingest"})
})

// ingestRecords encodes n updates in binary records of per updates each:
// nine inserts in ten (endpoints R-MAT-skewed toward low ids, one in a
// hundred a new vertex), one delete of a base edge.
func ingestRecords(g *graph.Graph, n, per int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 7))
	v := int64(g.NumVertices())
	skewed := func() int64 { return int64(float64(v) * rng.Float64() * rng.Float64()) }
	next := v
	var recs [][]byte
	ups := make([]Update, 0, per)
	for i := 0; i < n; i++ {
		if rng.IntN(10) == 0 {
			s := uint32(skewed())
			if adj := g.Neighbors(s); len(adj) > 0 {
				ups = append(ups, Update{Op: Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
			} else {
				ups = append(ups, Update{Op: Delete, Src: int64(s), Dst: 0})
			}
		} else {
			s, d := skewed(), skewed()
			if rng.IntN(100) == 0 {
				d, next = next, next+1
			}
			ups = append(ups, Update{Op: Insert, Src: s, Dst: d, Weight: float32(1 + rng.IntN(4)), Has: HasWeight})
		}
		if len(ups) == per {
			recs = append(recs, AppendBinary(nil, ups))
			ups = ups[:0]
		}
	}
	return recs
}

// BenchmarkIngest applies 4 Mi updates in binary records of 4,096 on one
// goroutine, publishing a snapshot every 16 records (64 Ki updates), and
// reports updates/s (wall, and per CPU second of the process: the applier
// and the garbage collector) and the delta's memory per appended edge: as
// the live graph counts it, and as the Go heap grew (after a GC, the
// records themselves excluded). "decode" decodes each record first, as a
// lone reader would; "apply" takes them decoded, as the applier does when
// the partition readers decode (source.EdgeReader, one goroutine each);
// "walked" is "apply" with each publication making its snapshot's delta
// index, as while walks go on; "sides" is "walked" with each snapshot's
// side words made, as a weighted DeepWalk job on it makes them. gc-cpu-ms/M-updates is the collector's CPU
// over the applying (runtime/metrics), scan-B/delta-edge and
// scan-walked-B/delta-edge what of the heap it scans, before and after
// the last snapshot's index is made.
func BenchmarkIngest(b *testing.B) {
	g, err := benchBase()
	if err != nil {
		b.Fatal(err)
	}
	const n, per = 4 << 20, 4096
	recs := ingestRecords(g, n, per)
	decoded := make([][]Update, len(recs))
	for i, r := range recs {
		if decoded[i], err = DecodeBinary(r); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name                  string
		decode, walked, sides bool
	}{{"decode", true, false, false}, {"apply", false, false, false}, {"walked", false, true, false}, {"sides", false, true, true}} {
		decode := c.decode
		b.Run(c.name, func(b *testing.B) {
			var buf []Update
			var heapPerEdge, countedPerEdge, indexPerEdge, scanPerEdge, scanWalkedPerEdge float64
			var cpu time.Duration
			var gcCPU float64
			var applied int64
			for b.Loop() {
				b.StopTimer()
				runtime.GC()
				var m0 runtime.MemStats
				runtime.ReadMemStats(&m0)
				l, err := New(g)
				if err != nil {
					b.Fatal(err)
				}
				c0, g0 := cpuTime(), gcCPUSeconds()
				b.StartTimer()
				for i, r := range recs {
					ups := decoded[i]
					if decode {
						buf, err = DecodeBinaryInto(buf[:0], r)
						if err != nil {
							b.Fatal(err)
						}
						ups = buf
					}
					if err := l.Apply(0, int64(i), ups); err != nil {
						b.Fatal(err)
					}
					if i%16 == 15 {
						if c.walked {
							// As while walks go on: each publication makes its
							// snapshot's delta index (Publish).
							l.walkedAt.Store(time.Now().UnixNano())
						}
						if s := l.Publish(); c.sides {
							// As a DeepWalk job on each snapshot: its side
							// words (walk/cpu's ring on the fused table).
							s.DeltaIndex().Sides(true, g.Offsets)
						}
					}
				}
				s := l.Publish()
				b.StopTimer()
				cpu += cpuTime() - c0
				gcCPU += gcCPUSeconds() - g0
				applied += n
				runtime.GC()
				var m1 runtime.MemStats
				runtime.ReadMemStats(&m1)
				st := s.Stats()
				heapPerEdge = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(st.DeltaEdges)
				countedPerEdge = float64(st.Bytes) / float64(st.DeltaEdges)
				scanPerEdge = float64(heapScanBytes()) / float64(st.DeltaEdges)
				// The walkers' index of the last snapshot, built after the
				// heap was read (walks build it; ingest alone does not).
				indexPerEdge = float64(s.DeltaIndex().Bytes()) / float64(st.DeltaEdges)
				// The scannable heap once walks hold the index, as on a
				// stage that walks beside the ingest.
				runtime.GC()
				scanWalkedPerEdge = float64(heapScanBytes()) / float64(st.DeltaEdges)
				runtime.KeepAlive(s)
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "updates/s")
			// On a shared machine the wall clock counts other processes' time
			// too; updates per CPU second of this process is what one core
			// sustains.
			b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "updates/cpu-s")
			// The collector's CPU (all its classes: background and assist
			// marking, pauses) per million updates applied, read from
			// runtime/metrics as the stage's diagnostics read gc_cpu: the
			// cores it takes are cores walks lose (issue 37).
			b.ReportMetric(gcCPU/float64(applied)*1e9, "gc-cpu-ms/M-updates")
			// What of the heap the collector scans for pointers (the base
			// graph's arrays and the records are pointer-free), per
			// appended edge: each cycle's marking reads all of it.
			b.ReportMetric(scanPerEdge, "scan-B/delta-edge")
			b.ReportMetric(scanWalkedPerEdge, "scan-walked-B/delta-edge")
			b.ReportMetric(heapPerEdge, "heap-B/delta-edge")
			b.ReportMetric(countedPerEdge, "counted-B/delta-edge")
			b.ReportMetric(indexPerEdge, "index-B/delta-edge")
		})
	}
}

// gcCPUSeconds is the CPU time the garbage collector has taken so far, an
// estimate the runtime keeps (updated at each collection's end).
func gcCPUSeconds() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// heapScanBytes is the heap's scannable bytes (runtime/metrics
// /gc/scan/heap:bytes) as of the last collection.
func heapScanBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// cpuTime is the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchWalks runs job from every vertex of g on e for b's loop and reports
// steps/s and steps per CPU second of the two walkers (steps/cpu-s-x2: the
// rate on an idle machine, whatever else shares it).
func benchWalks(ctx context.Context, b *testing.B, e *cpu.Engine, g *graph.Graph, job walk.Job) {
	b.Helper()
	job.Starts = make([]uint32, g.NumVertices())
	for i := range job.Starts {
		job.Starts[i] = uint32(i)
	}
	var steps int64
	c0 := cpuTime()
	for b.Loop() {
		err := e.Run(ctx, []walk.Job{job}, func(ch walk.Chunk) error {
			steps += ch.Steps()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric(2*float64(steps)/(cpuTime()-c0).Seconds(), "steps/cpu-s-x2")
}

// BenchmarkOverlayWalk reports DeepWalk steps/s (80-step walks, one per
// vertex) on an R-MAT scale-16 weighted graph: on the base alone, on
// base+delta where the delta holds 10% of the base's edge count in inserts
// and 1% in deletes, and on that snapshot compacted. The target is
// the delta's rate at >= 70% of the compacted graph's.
func BenchmarkOverlayWalk(b *testing.B) {
	// WALKSTAGE_OVERLAY_BENCH_SCALE walks a larger graph: at scale 16 the
	// delta index's words (32 bytes per 64 vertices) stay in the cache,
	// from scale 20 they do not.
	base := overlayBenchBase(b, 16, "overlay-bench")
	snap, compacted := tenPercentDelta(b, base, func(rng *rand.Rand, src, dst int64) Update {
		return Update{Op: Insert, Src: src, Dst: dst, Weight: float32(1 + rng.IntN(4)), Has: HasWeight}
	})
	// Memory per appended edge: the live state (Stats.Bytes), the index
	// the walkers read (walk.DeltaIndex) and its side words, reported on
	// "delta".
	st := snap.Stats()
	perEdge := func(n int64) float64 { return float64(n) / float64(st.DeltaEdges) }
	for _, weighted := range []bool{false, true} {
		alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: weighted}
		for _, c := range []struct {
			name string
			g    *graph.Graph
			ov   walk.Overlay
		}{{"base", base, nil}, {"delta", base, snap}, {"compacted", compacted, nil}} {
			b.Run(c.name+map[bool]string{true: "/weighted", false: ""}[weighted], func(b *testing.B) {
				e, err := cpu.New(c.g, cpu.WithWorkers(2))
				if err != nil {
					b.Fatal(err)
				}
				e.PrepareTables()
				benchWalks(context.Background(), b, e, c.g, walk.Job{Algorithm: alg, Seed: 1, Overlay: c.ov})
				if c.ov != nil {
					b.ReportMetric(perEdge(st.Bytes), "delta-B/edge")
					b.ReportMetric(perEdge(snap.DeltaIndex().Bytes()), "index-B/edge")
					// The side words the walks built (walk.DeltaIndex.Sides):
					// one kind after the uniform run, both after the weighted.
					b.ReportMetric(perEdge(snap.DeltaIndex().SidesBytes()), "sides-B/edge")
				}
			})
		}
	}
}

// BenchmarkCompact compacts the ingest benchmark's base with a delta of 1 Mi
// updates (about 10% of its edges appended, 1% deleted) and reports the
// compacted graph's edges per second.
func BenchmarkCompact(b *testing.B) {
	g, err := benchBase()
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(g)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range ingestRecords(g, 1<<20, 4096) {
		ups, err := DecodeBinary(r)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Apply(0, int64(i), ups); err != nil {
			b.Fatal(err)
		}
	}
	snap := l.Publish()
	var edges int64
	c0 := cpuTime()
	for b.Loop() {
		c, err := Compact(context.Background(), snap)
		if err != nil {
			b.Fatal(err)
		}
		edges += c.NumEdges()
	}
	b.ReportMetric(float64(edges)/b.Elapsed().Seconds(), "edges/s")
	// Per CPU second of the process (its goroutines and the collector):
	// on a shared machine, what the compaction takes from walks beside it.
	b.ReportMetric(float64(edges)/(cpuTime()-c0).Seconds(), "edges/cpu-s")
}

// BenchmarkOverlayMetaPath is BenchmarkOverlayWalk for MetaPath (schema
// 0,1,2,3 over four labels, on the label tables): an R-MAT scale-16
// weighted graph, a delta of 10% of its edge count in labelled inserts and
// 1% in deletes, walked as a snapshot and compacted.
func BenchmarkOverlayMetaPath(b *testing.B) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Labels: 4, Name: "overlay-metapath-bench"})
	if err != nil {
		b.Fatal(err)
	}
	snap, compacted := tenPercentDelta(b, base, func(rng *rand.Rand, src, dst int64) Update {
		return Update{Op: Insert, Src: src, Dst: dst, Weight: float32(1 + rng.IntN(4)), Label: uint8(rng.IntN(4)), Has: HasWeight | HasLabel}
	})
	for _, weighted := range []bool{false, true} {
		alg := walk.Algorithm{Kind: walk.MetaPath, Length: 80, Weighted: weighted, Schema: []uint8{0, 1, 2, 3}}
		benchDeltaCompacted(b, "", alg, base, snap, compacted, func(e *cpu.Engine) { e.PrepareLabelTables() })
	}
}

// overlayBenchBase is an overlay benchmark's graph: R-MAT, edge factor 16,
// undirected, weighted, at scale WALKSTAGE_OVERLAY_BENCH_SCALE or scale.
func overlayBenchBase(b *testing.B, scale int, name string) *graph.Graph {
	b.Helper()
	if s, err := strconv.Atoi(os.Getenv("WALKSTAGE_OVERLAY_BENCH_SCALE")); err == nil && s > 0 {
		scale = s
	}
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Name: name})
	if err != nil {
		b.Fatal(err)
	}
	return base
}

// benchDeltaCompacted runs alg from every vertex on snap (over base) and
// on compacted, on two workers each, as sub-benchmarks prefix+"delta" and
// prefix+"compacted" ("/weighted" after a weighted alg's); prepare builds
// an engine's tables first.
func benchDeltaCompacted(b *testing.B, prefix string, alg walk.Algorithm, base *graph.Graph, snap *Snapshot, compacted *graph.Graph, prepare func(*cpu.Engine)) {
	for _, c := range []struct {
		name string
		g    *graph.Graph
		ov   walk.Overlay
	}{{"delta", base, snap}, {"compacted", compacted, nil}} {
		b.Run(prefix+c.name+map[bool]string{true: "/weighted", false: ""}[alg.Weighted], func(b *testing.B) {
			e, err := cpu.New(c.g, cpu.WithWorkers(2))
			if err != nil {
				b.Fatal(err)
			}
			prepare(e)
			benchWalks(context.Background(), b, e, c.g, walk.Job{Algorithm: alg, Seed: 1, Overlay: c.ov})
		})
	}
}

// BenchmarkOverlayAlgorithms is BenchmarkOverlayWalk's delta and compacted
// runs for PPR (stop probability 0.15: walks of about 6.7 steps, 80 at
// most) and Node2Vec (p 0.5, q 2, the rejection sampler, 80 steps), which
// take other paths than DeepWalk's on a delta: PPR the overlay ring's
// per-vertex path, Node2Vec the grouped walker (walkOverlayOneByOne).
func BenchmarkOverlayAlgorithms(b *testing.B) {
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Name: "overlay-bench"})
	if err != nil {
		b.Fatal(err)
	}
	snap, compacted := tenPercentDelta(b, base, func(rng *rand.Rand, src, dst int64) Update {
		return Update{Op: Insert, Src: src, Dst: dst, Weight: float32(1 + rng.IntN(4)), Has: HasWeight}
	})
	for _, alg := range []walk.Algorithm{
		{Kind: walk.PPR, Length: 80, StopProb: 0.15},
		{Kind: walk.PPR, Length: 80, StopProb: 0.15, Weighted: true},
		{Kind: walk.Node2Vec, Length: 80, P: 0.5, Q: 2, Stepper: walk.StepperRejection},
		{Kind: walk.Node2Vec, Length: 80, P: 0.5, Q: 2, Stepper: walk.StepperRejection, Weighted: true},
	} {
		benchDeltaCompacted(b, alg.Kind.String()+"/", alg, base, snap, compacted, (*cpu.Engine).PrepareTables)
	}
}

// BenchmarkOverlayNode2VecHubs is Node2Vec (p 0.5, q 2) on a delta whose
// inserts join endpoints drawn by degree (the target of a random base edge),
// so the hubs collect most of them, as the GPU engine's overlay benchmark
// draws them: at scale 18 vertex 0 appends about 20,000 edges. Node2Vec
// asks on most steps whether the previous vertex, most often a hub, has an
// edge to the proposal (walk.DeltaIndex.HasAppended).
// WALKSTAGE_OVERLAY_BENCH_SCALE sets the scale (default 18).
func BenchmarkOverlayNode2VecHubs(b *testing.B) {
	base := overlayBenchBase(b, 18, "overlay-hubs")
	l, err := New(base)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	E := int64(base.NumEdges())
	byDegree := func() int64 { return int64(base.Targets[rng.Int64N(E)]) }
	ups := make([]Update, 0, E/10)
	for range E / 10 {
		if rng.IntN(10) == 0 {
			s := uint32(byDegree())
			adj := base.Neighbors(s)
			ups = append(ups, Update{Op: Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
			continue
		}
		ups = append(ups, Update{Op: Insert, Src: byDegree(), Dst: byDegree(), Weight: 1 + 4*rng.Float32(), Has: HasWeight})
	}
	snap, compacted := publishCompacted(b, l, ups)
	if d := snap.DeltaIndex().Vertex(0); d != nil {
		b.Logf("vertex 0: %d appended edges", len(d.Edges()))
	}
	for _, weighted := range []bool{false, true} {
		alg := walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 0.5, Q: 2, Stepper: walk.StepperRejection, Weighted: weighted}
		benchDeltaCompacted(b, "", alg, base, snap, compacted, (*cpu.Engine).PrepareTables)
	}
}

// BenchmarkOverlayTemporal is BenchmarkOverlayMetaPath for temporal walks
// (exponential bias, scale a hundredth of the time span, forward): an
// R-MAT scale-16 weighted, timed graph, a delta of 10% of its edge count in
// inserts at random times and 1% in deletes, walked as a snapshot and
// compacted; then temporal Node2Vec.
func BenchmarkOverlayTemporal(b *testing.B) {
	const span = 1_000_000
	base, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, TimeSpan: span, Name: "overlay-temporal-bench"})
	if err != nil {
		b.Fatal(err)
	}
	snap, compacted := tenPercentDelta(b, base, func(rng *rand.Rand, src, dst int64) Update {
		return Update{Op: Insert, Src: src, Dst: dst, Weight: float32(1 + rng.IntN(4)), Time: rng.Int64N(span), Has: HasWeight | HasTime}
	})
	for _, bias := range []walk.TimeBias{walk.TimeUniform, walk.TimeExponential} {
		for _, weighted := range []bool{false, true} {
			alg := walk.Algorithm{Kind: walk.Temporal, Length: 80, Weighted: weighted, Time: walk.TimeParams{Bias: bias}}
			if bias == walk.TimeExponential {
				alg.Time.Scale = span / 100
			}
			benchOverlayTemporal(b, alg, base, snap, compacted)
		}
	}
	// Temporal Node2Vec, unweighted, p 0.5 and q 2 as the bench command's.
	for _, bias := range []walk.TimeBias{walk.TimeUniform, walk.TimeExponential} {
		alg := walk.Algorithm{Kind: walk.Temporal, Length: 80, Time: walk.TimeParams{Bias: bias}, P: 0.5, Q: 2}
		if bias == walk.TimeExponential {
			alg.Time.Scale = span / 100
		}
		benchOverlayTemporal(b, alg, base, snap, compacted)
	}
}

// benchOverlayTemporal runs alg's walks, one from every vertex, on the
// snapshot and on the compacted graph.
func benchOverlayTemporal(b *testing.B, alg walk.Algorithm, base *graph.Graph, snap *Snapshot, compacted *graph.Graph) {
	for _, c := range []struct {
		name string
		g    *graph.Graph
		ov   walk.Overlay
	}{{"delta", base, snap}, {"compacted", compacted, nil}} {
		b.Run(c.name+"/"+alg.Time.Bias.String()+map[bool]string{true: "/weighted", false: ""}[alg.Weighted]+map[bool]string{true: "/n2v", false: ""}[alg.P != 0], func(b *testing.B) {
			e, err := cpu.New(c.g, cpu.WithWorkers(2))
			if err != nil {
				b.Fatal(err)
			}
			starts := make([]uint32, c.g.NumVertices())
			for i := range starts {
				starts[i] = uint32(i)
			}
			run := func() int64 {
				var steps int64
				err := e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 1, Starts: starts, Overlay: c.ov}}, func(ch walk.Chunk) error {
					steps += ch.Steps()
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				return steps
			}
			run() // the engine's tables, built on the first run
			var steps int64
			c0 := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				steps += run()
			}
			b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
			b.ReportMetric(2*float64(steps)/(cpuTime()-c0).Seconds(), "steps/cpu-s-x2")
		})
	}
}

// tenPercentDelta applies to base a delta of 10% of its edge count in
// inserts (ins makes each from its endpoints) and 1% in deletes, the
// endpoints skewed toward low ids, where R-MAT puts its hubs, and returns
// the snapshot and its compaction.
func tenPercentDelta(b *testing.B, base *graph.Graph, ins func(rng *rand.Rand, src, dst int64) Update) (*Snapshot, *graph.Graph) {
	b.Helper()
	l, err := New(base)
	if err != nil {
		b.Fatal(err)
	}
	ups, _ := skewedDelta(base, rand.New(rand.NewPCG(3, 3)), ins)
	return publishCompacted(b, l, ups)
}

// publishCompacted applies ups to l as one record, publishes the snapshot
// and compacts it.
func publishCompacted(b *testing.B, l *Live, ups []Update) (*Snapshot, *graph.Graph) {
	b.Helper()
	if err := l.Apply(0, 0, ups); err != nil {
		b.Fatal(err)
	}
	// Published as while walks go on: the publication makes the
	// snapshot's index, which then holds the deltas' records (Publish).
	l.walkedAt.Store(time.Now().UnixNano())
	snap := l.Publish()
	compacted, err := Compact(context.Background(), snap)
	if err != nil {
		b.Fatal(err)
	}
	return snap, compacted
}

// skewedDelta draws from rng a delta for base of 10% of its edge count in
// inserts (ins makes each from its endpoints, drawing anything else from
// rng) and 1% in deletes of its edges, the endpoints skewed toward low ids,
// where R-MAT puts its hubs; skewed draws further endpoints the same way.
func skewedDelta(base *graph.Graph, rng *rand.Rand, ins func(rng *rand.Rand, src, dst int64) Update) (ups []Update, skewed func() int64) {
	v := int64(base.NumVertices())
	skewed = func() int64 { return int64(float64(v) * rng.Float64() * rng.Float64()) }
	for range base.NumEdges() / 10 {
		src := skewed()
		ups = append(ups, ins(rng, src, skewed()))
	}
	for range base.NumEdges() / 100 {
		s := uint32(skewed())
		if adj := base.Neighbors(s); len(adj) > 0 {
			ups = append(ups, Update{Op: Delete, Src: int64(s), Dst: int64(adj[rng.IntN(len(adj))])})
		}
	}
	return ups, skewed
}

// weightedInsert inserts src -> dst with a weight of 1 to 4 drawn from rng.
func weightedInsert(rng *rand.Rand, src, dst int64) Update {
	return Update{Op: Insert, Src: src, Dst: dst, Weight: float32(1 + rng.IntN(4)), Has: HasWeight}
}
