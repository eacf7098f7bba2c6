//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/internal/directio"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// savedStreamGraphs are streamGraphs written to files and loaded back
// (mapped), so the engine has a file to stream from.
func savedStreamGraphs(t *testing.T) map[string]*graph.Graph {
	t.Helper()
	out := map[string]*graph.Graph{}
	dir := t.TempDir()
	for name, g := range streamGraphs(t) {
		path := filepath.Join(dir, name+".wsg")
		if err := graph.Save(path, g); err != nil {
			t.Fatal(err)
		}
		l, err := graph.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		out[name] = l
	}
	return out
}

// TestStreamFromDiskWalksMatch: with the partitions read from the graph
// file (uniform walks: its targets section; alias walks: the entries file)
// through a ring of four pinned buffers, fewer than the streamed
// partitions so they are read again and again, uniform and weighted
// DeepWalk and PPR give the walks of the pinned-host streaming engine
// with the same plan, of the all-device engine and of the CPU engine,
// walk by walk, in one batch and in many, with two jobs of different
// seeds; under a host budget whose pinned result share holds the rows of
// a quarter of the walks, the batch is still one (or as many as the cap
// asks) and its rows come back through the result window in pieces, each
// walk once, in walk-id order within each chunk; and the engine frees
// every pinned buffer at Close.
func TestStreamFromDiskWalksMatch(t *testing.T) {
	for gname, g := range savedStreamGraphs(t) {
		ref, all, starts, hubStarts := streamSetup(t, g)
		algs := map[string]walk.Algorithm{
			"deepwalk-uniform": {Kind: walk.DeepWalk, Length: 80},
			"ppr-uniform":      {Kind: walk.PPR, Length: 80, StopProb: 0.1},
		}
		if g.Weighted() {
			algs["deepwalk-alias"] = walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}
			algs["ppr-alias"] = walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.1, Weighted: true}
		}
		for _, batch := range []int{0, 2500} {
			common := []Option{WithStream(StreamOn), WithDeviceFraction(0.5), WithStreamPartitionBytes(8 << 10),
				WithMaxBatchWalks(batch), WithChunkWalks(1000), withStreamBatch(streamCopy)}
			pinned := newEngine(t, g, common...)
			pp := pinned.StreamPlan()
			if pp == nil || pp.Disk != nil || pp.Streamed() < 5 {
				t.Fatalf("%s: pinned plan %v", gname, pp)
			}
			// Half the host budget holds four ring buffers.
			ring := 4 * directio.Span(pp.BufferEdges*pp.EntryBytes)
			e, err := openEngine(g, append(common, withStreamDisk(), WithHostMemoryLimit(2*ring))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			dp := e.StreamPlan()
			if dp == nil || dp.Disk == nil || dp.Disk.RingBuffers != 4 || !slices.Equal(dp.Parts, pp.Parts) ||
				dp.Disk.ResultBytes > 2<<20 || dp.Disk.WindowBytes != resultWindow(dp.Disk.ResultBytes) {
				t.Fatalf("%s: disk plan %v, pinned %v", gname, dp, pp)
			}
			for _, name := range []string{"deepwalk-uniform", "ppr-uniform", "deepwalk-alias", "ppr-alias"} {
				alg, ok := algs[name]
				if !ok {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/batch=%d", gname, name, batch), func(t *testing.T) {
					jobs := []walk.Job{
						{Tag: 1, Algorithm: alg, Seed: 42, Starts: starts},
						{Tag: 2, Algorithm: alg, Seed: 1<<40 + 7, Starts: hubStarts},
					}
					want := collect(t, ref, jobs)
					dev := collect(t, all, jobs)
					pin := collect(t, pinned, jobs)
					got := collect(t, e, jobs)
					for tag := range want {
						for id := range want[tag] {
							switch {
							case !equal(got[tag][id], pin[tag][id]):
								t.Fatalf("job %d walk %d differs:\ndisk   %v\npinned %v", tag, id, got[tag][id], pin[tag][id])
							case !equal(got[tag][id], dev[tag][id]):
								t.Fatalf("job %d walk %d: disk differs from the all-device engine", tag, id)
							case !equal(got[tag][id], want[tag][id]):
								t.Fatalf("job %d walk %d: disk differs from the cpu", tag, id)
							}
						}
					}
					ss := e.StreamStats()
					if ss.Reads == 0 || ss.BytesRead <= 0 || ss.Copies == 0 || ss.InPlaceBatches > 0 || ss.Copies-ss.RingHits > ss.Reads {
						t.Fatalf("stream stats %+v, %d streamed partitions", ss, dp.Streamed())
					}
					// The host budget's pinned result share (1 MiB: the
					// least) would hold the rows of 2,800 walks; the rows
					// come back through its 256 KiB window in pieces
					// instead, so the 11,192 walks are one batch.
					// A piece holds at most half the window, so one
					// batch of more words than the window comes back in
					// at least words / half pieces (a batch within the
					// window comes back whole: PPR's short walks in
					// batches of 2,500).
					var words int64
					for tag := range got {
						for _, w := range got[tag] {
							words += int64(len(w))
						}
					}
					win := dp.Disk.WindowBytes / 4
					if batch == 0 && words > win && ss.ResultPieces < (words+win/2-1)/(win/2) {
						t.Fatalf("%d window pieces for %d words through a window of %d: %+v", ss.ResultPieces, words, win, ss)
					}
					if batch == 0 && alg.Kind == walk.DeepWalk && (words <= win || ss.ResultPieces < 2) {
						t.Fatalf("%d words, %d window pieces: the window is not exercised (window %d words)", words, ss.ResultPieces, win)
					}
					if wantBatches := (len(starts) + len(hubStarts) + max(batch, 1) - 1) / max(batch, 1); batch == 0 && ss.Batches != 1 ||
						batch > 0 && ss.Batches != int64(wantBatches) {
						t.Fatalf("%d batches with at most %d walks each: %+v", ss.Batches, batch, ss)
					}
					// With four buffers for many streamed partitions most
					// copies need a read.
					if alg.Kind == walk.DeepWalk && ss.Reads < int64(dp.Streamed()) {
						t.Fatalf("%d reads for %d streamed partitions: %+v", ss.Reads, dp.Streamed(), ss)
					}
					t.Logf("%+v, %.0f bytes read a step", ss, float64(ss.BytesRead)/float64(ss.Steps))
				})
			}
			_ = e.Close()
			if e.liveDev != 0 || e.liveHost != 0 {
				t.Fatalf("%s: after Close %d device and %d pinned allocations live", gname, e.liveDev, e.liveHost)
			}
		}
	}
}

// TestStreamFromDiskMetaPathWalksMatch: MetaPath on label tables with the
// partitions read from the label entries file (built at the first MetaPath
// batch) through a ring of four pinned buffers, beside DeepWalk jobs that
// read the targets section or the entries file, gives the walks of the
// pinned-host streaming engine with the same plan, of the all-device
// engine and of the CPU engine, walk by walk, in one batch and in many;
// and the engine frees every pinned buffer at Close. (The directed test
// graph's budget cannot hold its segment ends: MetaPath is refused.)
func TestStreamFromDiskMetaPathWalksMatch(t *testing.T) {
	for gname, g := range savedStreamGraphs(t) {
		jobs, want, dev := streamReference(t, g, metaPathJobs)
		for _, batch := range []int{0, 2500} {
			t.Run(fmt.Sprintf("%s/batch=%d", gname, batch), func(t *testing.T) {
				pinned, e := diskEngines(t, g, streamTestOptions(batch, streamCopy))
				dp := e.StreamPlan()
				if gname == "directed" {
					refusesMetaPathForTheEnds(t, e, jobs)
					return
				}
				if dp.Labels != g.NumLabels {
					t.Fatalf("disk plan %v", dp)
				}
				pin := collect(t, pinned, jobs)
				got := collect(t, e, jobs)
				checkSameWalks(t, want, map[string]map[int][][]uint32{"disk": got, "pinned": pin, "all-device": dev})
				ss := e.StreamStats()
				if ss.Reads < int64(dp.Streamed()) || ss.Copies < int64(dp.Streamed()) || (dp.ResidentEdges() > 0 && ss.ResidentSwaps < 2) {
					t.Fatalf("stream stats %+v, %d streamed partitions", ss, dp.Streamed())
				}
				t.Logf("%+v", ss)
				_ = e.Close()
				if e.liveDev != 0 || e.liveHost != 0 {
					t.Fatalf("after Close %d device and %d pinned allocations live", e.liveDev, e.liveHost)
				}
			})
		}
	}
}

// TestStreamFromDiskRefusesWhatItCannotWalk: Node2Vec on a forced reservoir sampler and MetaPath off
// label tables are refused with ErrInvalidAlgorithm naming the disk plan and the host
// budget (the placement plan is no way out: it needs the graph in host
// memory), and the engine walks on; a graph built in memory cannot stream
// from disk and says so.
func TestStreamFromDiskRefusesWhatItCannotWalk(t *testing.T) {
	g := savedStreamGraphs(t)["rmat-weighted"]
	e := newEngine(t, g, WithStream(StreamOn), WithDeviceFraction(0.5), WithStreamPartitionBytes(8<<10), withStreamDisk(),
		WithHostMemoryLimit(64<<20))
	for _, a := range []walk.Algorithm{
		{Kind: walk.Node2Vec, Length: 10, P: 1, Q: 2, Stepper: walk.StepperZPRS},
		{Kind: walk.MetaPath, Length: 10, Schema: []uint8{0, 1}, Stepper: walk.StepperDPRS},
		{Kind: walk.DeepWalk, Length: 10, Weighted: true, Stepper: walk.StepperZPRS},
	} {
		err := e.Run(context.Background(), []walk.Job{{Tag: 1, Algorithm: a, Seed: 1, Starts: []uint32{0, 1}}},
			func(walk.Chunk) error { return nil })
		if !errors.Is(err, walk.ErrInvalidAlgorithm) || !strings.Contains(err.Error(), "read from its file") {
			t.Fatalf("%v: %v", a.Kind, err)
		}
	}
	collect(t, e, []walk.Job{{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10}, Seed: 1, Starts: []uint32{0, 1}}})
	if _, err := openEngine(streamGraphs(t)["rmat-weighted"], WithStream(StreamOn), WithDeviceFraction(0.5), withStreamDisk()); err == nil ||
		!strings.Contains(err.Error(), "not loaded from a file") {
		t.Fatalf("in-memory graph from disk: %v", err)
	}
}
