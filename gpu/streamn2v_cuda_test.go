//go:build cuda

package gpu

import (
	"fmt"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// node2vecJobs are the Node2Vec jobs the streaming tests walk: p and q
// from moderate (p = 1, q = 2: about half the non-return proposals need
// the class test) to extreme (q = 100: most steps reject 64 proposals and
// go to the host's scan; p = 0.25: the return class dominates), uniform
// and, where the graph has weights, weighted (alias proposals), from every
// vertex and from the hubs.
func node2vecJobs(g *graph.Graph, starts, hubStarts []uint32) []walk.Job {
	w := g.Weighted()
	return []walk.Job{
		{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 1, Q: 2}, Seed: 42, Starts: starts},
		{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 0.25, Q: 4, Weighted: w}, Seed: 1<<40 + 7, Starts: hubStarts},
		{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 40, P: 1, Q: 100, Weighted: w}, Seed: 9, Starts: starts[:3000]},
		{Tag: 4, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 60, P: 2, Q: 0.5, Weighted: w}, Seed: 5, Starts: starts},
	}
}

// TestStreamNode2VecWalksMatchCPU: under a stream plan that keeps half the
// streamed bytes on the device in partitions of 8 KiB (tens streamed),
// Node2Vec with several p and q, uniform and weighted, gives the CPU
// engine's walks and the all-device engine's, walk by walk, whether the
// partitions are copied in (one batch and many) or read in place; walkers
// park for class tests in other partitions, and q = 100 sends steps to the
// host's scan.
func TestStreamNode2VecWalksMatchCPU(t *testing.T) {
	for gname, g := range streamGraphs(t) {
		jobs, want, dev := streamReference(t, g, node2vecJobs)
		for _, run := range streamRuns {
			t.Run(fmt.Sprintf("%s/batch=%d/how=%d", gname, run.batch, run.how), func(t *testing.T) {
				e := newEngine(t, g, streamTestOptions(run.batch, run.how)...)
				plan := e.StreamPlan()
				if plan == nil || plan.Streamed() < 5 {
					t.Fatalf("plan %v", plan)
				}
				got := collect(t, e, jobs)
				checkSameWalks(t, want, map[string]map[int][][]uint32{"stream": got, "all-device": dev})
				st, ss := e.LastRunStats(), e.StreamStats()
				switch {
				case ss.Steps != st.Steps:
					t.Fatalf("stream stats %+v, run stats %+v", ss, st)
				case ss.Scans == 0:
					t.Fatalf("q = 100 sent no step to the host's scan: %+v", ss)
				case run.how == streamCopy && (ss.Copies < int64(plan.Streamed()) || ss.InPlaceBatches > 0):
					t.Fatalf("stream stats %+v, %d streamed partitions", ss, plan.Streamed())
				case run.how == streamCopyTail && ss.Tails == 0:
					t.Fatalf("no batch finished in place: stream stats %+v", ss)
				}
				t.Logf("%+v, %.0f bytes copied a step, %.2f visits a batch a step", ss, float64(ss.BytesCopied)/float64(ss.Steps),
					float64(ss.Visits)/float64(max(ss.Batches, 1))/80)
			})
		}
	}
}

// TestStreamFromDiskNode2VecWalksMatch: the Node2Vec jobs with the
// partitions read from the graph file through four ring buffers, and the
// host's scans reading the two adjacencies from the file, give the pinned
// path's walks, the all-device engine's and the CPU's, in one batch (and
// in batches of 2,500 on the directed graph: reads of tiny partitions make
// the many-batch runs the slowest of the stream tests, and the pinned
// test covers the batches).
func TestStreamFromDiskNode2VecWalksMatch(t *testing.T) {
	for gname, g := range savedStreamGraphs(t) {
		jobs, want, dev := streamReference(t, g, node2vecJobs)
		batches := []int{0}
		if gname == "directed" {
			batches = append(batches, 2500)
		}
		for _, batch := range batches {
			t.Run(fmt.Sprintf("%s/batch=%d", gname, batch), func(t *testing.T) {
				pinned, e := diskEngines(t, g, streamTestOptions(batch, streamCopy))
				pin := collect(t, pinned, jobs)
				got := collect(t, e, jobs)
				checkSameWalks(t, want, map[string]map[int][][]uint32{"disk": got, "pinned": pin, "all-device": dev})
				ss := e.StreamStats()
				if ss.Reads == 0 || ss.Scans == 0 {
					t.Fatalf("stream stats %+v", ss)
				}
				t.Logf("%+v", ss)
			})
		}
	}
}
