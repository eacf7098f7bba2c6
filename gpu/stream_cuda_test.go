//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/directio"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// streamGraphs are the graphs the streaming tests walk: the engine tests'
// directed graph (a hub above the warp threshold, dead ends, weighted, 5
// labels), an undirected weighted R-MAT graph of 4 labels and an
// unweighted one of 3 (4-byte targets streamed instead of alias entries).
func streamGraphs(t *testing.T) map[string]*graph.Graph {
	t.Helper()
	out := map[string]*graph.Graph{"directed": testGraph(t)}
	for name, w := range map[string]bool{"rmat-weighted": true, "rmat-unweighted": false} {
		labels := 3
		if w {
			labels = 4
		}
		g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 5,
			Undirected: true, Weighted: w, Labels: labels, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		out[name] = g
	}
	return out
}

// streamRuns are the batches the stream equality tests walk: one batch
// and batches of 2,500 with the partitions copied in, one batch read in
// place, batches of 2,500 as the cost model chooses, and batches of 2,500
// whose walkers finish in place after the first copying visit.
var streamRuns = []struct{ batch, how int }{{0, streamCopy}, {2500, streamCopy}, {0, streamInPlace}, {2500, streamChoose}, {2500, streamCopyTail}}

// streamTestOptions are a stream test's engine options: half the device,
// partitions of 8 KiB (tens of them streamed), chunks of 1,000 walks,
// batches of batch walks (0: one) walked as how says.
func streamTestOptions(batch, how int) []Option {
	return []Option{WithStream(StreamOn), WithDeviceFraction(0.5), WithStreamPartitionBytes(8 << 10),
		WithMaxBatchWalks(batch), WithChunkWalks(1000), withStreamBatch(how)}
}

// diskEngines opens a streaming engine over g with opts (pinned host) and
// one with the same options reading the partitions from g's file through
// four ring buffers (half its host budget), and checks that they plan the
// same partitions.
func diskEngines(t *testing.T, g *graph.Graph, opts []Option) (pinned, disk *Engine) {
	t.Helper()
	pinned = newEngine(t, g, opts...)
	pp := pinned.StreamPlan()
	if pp == nil || pp.Disk != nil {
		t.Fatalf("pinned plan %v", pp)
	}
	ring := 4 * directio.Span(pp.BufferEdges*pp.EntryBytes)
	disk, err := openEngine(g, append(slices.Clone(opts), withStreamDisk(), WithHostMemoryLimit(2*ring))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = disk.Close() })
	if dp := disk.StreamPlan(); dp == nil || dp.Disk == nil || !slices.Equal(dp.Parts, pp.Parts) {
		t.Fatalf("disk plan %v, pinned %v", dp, pp)
	}
	return pinned, disk
}

// streamReference gives a stream test on g its jobs (made by jobsFor
// from streamSetup's starts) and the walks the CPU engine (want) and the
// all-device GPU engine (dev) give for them.
func streamReference(t *testing.T, g *graph.Graph, jobsFor func(g *graph.Graph, starts, hubStarts []uint32) []walk.Job) (jobs []walk.Job, want, dev map[int][][]uint32) {
	t.Helper()
	ref, all, starts, hubStarts := streamSetup(t, g)
	jobs = jobsFor(g, starts, hubStarts)
	return jobs, collect(t, ref, jobs), collect(t, all, jobs)
}

// streamSetup gives a stream test on g its reference engines (the CPU
// engine and the all-device GPU engine) and its starts: every vertex
// twice, and 3,000 walks from the seven lowest ids (the R-MAT hubs).
func streamSetup(t *testing.T, g *graph.Graph) (ref *cpu.Engine, all *Engine, starts, hubStarts []uint32) {
	t.Helper()
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	hubStarts = make([]uint32, 3000)
	for i := range hubStarts {
		hubStarts[i] = uint32(i % 7)
	}
	return ref, newEngine(t, g), allStarts(g, 2), hubStarts
}

// TestStreamWalksMatchCPU: under a stream plan that keeps half the
// streamed bytes on the device in partitions of 8 KiB (tens of them,
// most streamed, each copied many times; a uniform walk of a weighted
// graph copies bare targets, an alias walk 12-byte entries), uniform and weighted DeepWalk
// and PPR give the CPU engine's walks and the all-device engine's, walk by
// walk, in one batch and in many (a batch leaves partitions in the
// buffers for the next), with two jobs of different seeds.
func TestStreamWalksMatchCPU(t *testing.T) {
	for gname, g := range streamGraphs(t) {
		ref, all, starts, hubStarts := streamSetup(t, g)
		cases := []struct {
			name string
			alg  walk.Algorithm
		}{
			{"deepwalk-uniform", walk.Algorithm{Kind: walk.DeepWalk, Length: 80}},
			{"ppr-uniform", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.1}},
		}
		if g.Weighted() {
			cases = append(cases,
				struct {
					name string
					alg  walk.Algorithm
				}{"deepwalk-alias", walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}},
				struct {
					name string
					alg  walk.Algorithm
				}{"ppr-alias", walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.1, Weighted: true}})
		}
		for _, run := range streamRuns {
			batch := run.batch
			e := newEngine(t, g, streamTestOptions(batch, run.how)...)
			plan := e.StreamPlan()
			if plan == nil || e.Placement() != nil {
				t.Fatalf("%s: engine did not stream (plan %v, placement %v)", gname, plan, e.Placement())
			}
			if plan.Streamed() < 5 {
				t.Fatalf("%s: only %d streamed partitions: %s", gname, plan.Streamed(), plan)
			}
			for _, c := range cases {
				t.Run(fmt.Sprintf("%s/%s/batch=%d/how=%d", gname, c.name, batch, run.how), func(t *testing.T) {
					jobs := []walk.Job{
						{Tag: 1, Algorithm: c.alg, Seed: 42, Starts: starts},
						{Tag: 2, Algorithm: c.alg, Seed: 1<<40 + 7, Starts: hubStarts},
					}
					want := collect(t, ref, jobs)
					dev := collect(t, all, jobs)
					got := collect(t, e, jobs)
					for tag := range want {
						for id := range want[tag] {
							if !equal(got[tag][id], want[tag][id]) {
								t.Fatalf("job %d walk %d differs:\nstream %v\ncpu    %v", tag, id, got[tag][id], want[tag][id])
							}
							if !equal(dev[tag][id], want[tag][id]) {
								t.Fatalf("job %d walk %d: all-device engine differs from the cpu", tag, id)
							}
						}
					}
					st, ss := e.LastRunStats(), e.StreamStats()
					if st.Walks != int64(len(starts)+len(hubStarts)) {
						t.Fatalf("stats %+v", st)
					}
					// Every streamed partition was copied in (two may have
					// stayed in the buffers from the last run); DeepWalk's
					// long walks come back to each many times.
					least := int64(plan.Streamed() - 2)
					if c.alg.Kind == walk.DeepWalk {
						least = 2 * int64(plan.Streamed())
					}
					switch {
					case ss.Steps != st.Steps:
						t.Fatalf("stream stats %+v, run stats %+v", ss, st)
					case run.how == streamCopy && (ss.Copies < least || ss.Visits < ss.Copies/2 || ss.BytesCopied <= 0 || ss.InPlaceBatches > 0):
						t.Fatalf("stream stats %+v, %d streamed partitions", ss, plan.Streamed())
					case run.how == streamInPlace && (ss.Copies > 0 || ss.Batches > 0 || ss.InPlaceBatches == 0):
						t.Fatalf("in place: stream stats %+v", ss)
					case run.how == streamChoose && ss.Batches+ss.InPlaceBatches == 0:
						t.Fatalf("chosen: stream stats %+v", ss)
					case run.how == streamCopyTail && (ss.Tails == 0 || ss.Tails > ss.Batches || ss.Copies == 0 || ss.InPlaceBatches > 0):
						t.Fatalf("copied, then in place: stream stats %+v", ss)
					case run.how == streamCopy && ss.Tails > 0:
						t.Fatalf("forced copies finished in place: stream stats %+v", ss)
					}
					t.Logf("%+v, %.0f bytes copied a step", ss, float64(ss.BytesCopied)/float64(ss.Steps))
				})
			}
		}
	}
}

// metaPathJobs are the MetaPath jobs the streaming tests walk: several
// schemas (one label, a cycle that repeats a label, all labels), a
// weighted walk where the graph has weights, hub starts, and a DeepWalk
// job in the same run, so the resident partitions change layout twice a
// run and a buffer loaded in one layout is never read in the other.
func metaPathJobs(g *graph.Graph, starts, hubStarts []uint32) []walk.Job {
	all := make([]uint8, g.NumLabels)
	for i := range all {
		all[i] = uint8(g.NumLabels - 1 - i)
	}
	jobs := []walk.Job{
		{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 80, Schema: []uint8{1}}, Seed: 42, Starts: starts},
		{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 80, Schema: []uint8{2, 0, 0, 1}}, Seed: 1<<40 + 7, Starts: hubStarts},
		{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 60, Schema: all, Weighted: g.Weighted()}, Seed: 9, Starts: starts},
		{Tag: 4, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40, Weighted: g.Weighted()}, Seed: 5, Starts: starts[:2000]},
	}
	return jobs
}

// checkSameWalks fails unless every engine's walks equal want's, walk by
// walk.
func checkSameWalks(t *testing.T, want map[int][][]uint32, got map[string]map[int][][]uint32) {
	t.Helper()
	for tag := range want {
		for id := range want[tag] {
			for name, g := range got {
				if !equal(g[tag][id], want[tag][id]) {
					t.Fatalf("job %d walk %d: %s differs from the cpu:\n%s %v\ncpu %v", tag, id, name, name, g[tag][id], want[tag][id])
				}
			}
		}
	}
}

// refusesMetaPathForTheEnds checks that e, whose device budget cannot hold
// the label segment ends of its graph (the directed test graph: about one
// edge a vertex, so the ends of its five labels outweigh its edges),
// refuses MetaPath naming them and walks the DeepWalk job (jobs[3]) on.
func refusesMetaPathForTheEnds(t *testing.T, e *Engine, jobs []walk.Job) {
	t.Helper()
	plan := e.StreamPlan()
	if plan.Labels != 0 || plan.LabelsLeftOut == 0 {
		t.Fatalf("directed graph at half its streamed bytes: plan %v carries labels", plan)
	}
	err := e.Run(context.Background(), jobs[:1], func(walk.Chunk) error { return nil })
	if !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), "label segment ends") {
		t.Fatalf("metapath without room for the segment ends: %v", err)
	}
	collect(t, e, jobs[3:])
}

// TestStreamMetaPathWalksMatchCPU: under a stream plan that keeps half the
// streamed bytes on the device in partitions of 8 KiB (tens streamed),
// MetaPath on label tables, uniform and weighted, with several schemas,
// gives the CPU engine's walks and the all-device engine's, walk by walk,
// whether the partitions are copied in (one batch and many) or read in
// place, with a DeepWalk job in the same run (the resident partitions swap
// layout); and every streamed partition is copied in, in the label layout.
// The directed test graph's budget cannot hold its segment ends: MetaPath
// is refused there, naming them.
func TestStreamMetaPathWalksMatchCPU(t *testing.T) {
	for gname, g := range streamGraphs(t) {
		jobs, want, dev := streamReference(t, g, metaPathJobs)
		for _, run := range streamRuns {
			t.Run(fmt.Sprintf("%s/batch=%d/how=%d", gname, run.batch, run.how), func(t *testing.T) {
				e := newEngine(t, g, streamTestOptions(run.batch, run.how)...)
				plan := e.StreamPlan()
				if plan == nil || plan.Streamed() < 5 {
					t.Fatalf("plan %v", plan)
				}
				if gname == "directed" {
					refusesMetaPathForTheEnds(t, e, jobs)
					return
				}
				if plan.Labels != g.NumLabels || plan.LabelBytes == 0 {
					t.Fatalf("plan %v", plan)
				}
				got := collect(t, e, jobs)
				checkSameWalks(t, want, map[string]map[int][][]uint32{"stream": got, "all-device": dev})
				ss := e.StreamStats()
				if run.how == streamCopy && (ss.Copies < int64(plan.Streamed()) || ss.InPlaceBatches > 0) {
					t.Fatalf("stream stats %+v, %d streamed partitions", ss, plan.Streamed())
				}
				if run.how == streamCopyTail && ss.Tails == 0 {
					t.Fatalf("no batch finished in place: stream stats %+v", ss)
				}
				if plan.ResidentEdges() > 0 && ss.ResidentSwaps < 2 {
					t.Fatalf("the resident partitions changed layout %d times in a run of metapath and deepwalk: %+v", ss.ResidentSwaps, ss)
				}
				// A second run starts from the layout the first left.
				again := collect(t, e, jobs[:1])
				checkSameWalks(t, map[int][][]uint32{1: want[1]}, map[string]map[int][][]uint32{"stream, second run": again})
				t.Logf("%+v", ss)
			})
		}
	}
}

// TestStreamRefusesWhatItCannotWalk: Node2Vec on a forced reservoir sampler, MetaPath off label tables
// (a forced reservoir sampler) and the reservoir samplers are refused with
// ErrInvalidAlgorithm, and the engine walks on.
func TestStreamRefusesWhatItCannotWalk(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g, WithStream(StreamOn), WithDeviceFraction(0.5), WithStreamPartitionBytes(8<<10))
	for _, a := range []walk.Algorithm{
		{Kind: walk.Node2Vec, Length: 10, P: 1, Q: 2, Stepper: walk.StepperZPRS},
		{Kind: walk.MetaPath, Length: 10, Schema: []uint8{0, 1}, Stepper: walk.StepperZPRS},
		{Kind: walk.DeepWalk, Length: 10, Weighted: true, Stepper: walk.StepperZPRS},
	} {
		err := e.Run(context.Background(), []walk.Job{{Tag: 1, Algorithm: a, Seed: 1, Starts: []uint32{0, 1}}},
			func(walk.Chunk) error { return nil })
		if !errors.Is(err, walk.ErrInvalidAlgorithm) {
			t.Fatalf("%v: %v", a.Kind, err)
		}
	}
	collect(t, e, []walk.Job{{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10}, Seed: 1, Starts: []uint32{0, 1}}})
}

// TestStreamChosenWhenTheGraphDoesNotFit: under a memory limit below the
// graph the engine streams with StreamAuto (in many small batches: the
// limit leaves the slots little), a placement plan beside it in the other
// half, and places by default (StreamOff); walks are the CPU's either way.
func TestStreamChosenWhenTheGraphDoesNotFit(t *testing.T) {
	g := streamGraphs(t)["rmat-weighted"]
	// A quarter of the limit goes to the batch slots: the stream plan gets
	// two thirds of its streamed bytes.
	limit := StreamBytesNeeded(g) * 9 / 10
	s := newEngine(t, g, WithMemoryLimit(limit), WithStream(StreamAuto))
	if s.StreamPlan() == nil || s.StreamPlan().Streamed() == 0 {
		t.Fatalf("auto under a %d-byte limit: plan %v", limit, s.StreamPlan())
	}
	if s.Placement() == nil {
		t.Fatalf("auto under a %d-byte limit: no placement plan beside the stream plan", limit)
	}
	p := newEngine(t, g, WithMemoryLimit(limit))
	if p.StreamPlan() != nil || p.Placement() == nil {
		t.Fatal("default (stream off): no placement plan")
	}
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []walk.Job{{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 40, Weighted: true}, Seed: 9, Starts: allStarts(g, 1)}}
	want := collect(t, ref, jobs)
	for name, e := range map[string]*Engine{"stream": s, "placed": p} {
		got := collect(t, e, jobs)
		for id := range want[1] {
			if !equal(got[1][id], want[1][id]) {
				t.Fatalf("%s: walk %d differs", name, id)
			}
		}
	}
}
