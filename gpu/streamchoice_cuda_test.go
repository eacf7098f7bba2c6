//go:build cuda

package gpu

import (
	"fmt"
	"testing"

	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// TestStreamAutoHoldsBothPlansAndWalksTheSame: under StreamAuto with half
// the device for the graph the engine holds a stream plan and a placement
// plan, sharing the offsets; whichever plan a batch walks under (the
// cost model's choice, or each forced), every walk equals the CPU
// engine's: uniform and weighted DeepWalk, PPR, Node2Vec and MetaPath,
// and the jobs the stream engine cannot walk (a forced reservoir
// sampler; MetaPath on the directed graph, whose segment ends the stream
// budget does not hold) walk under the placement plan instead of being
// refused.
func TestStreamAutoHoldsBothPlansAndWalksTheSame(t *testing.T) {
	for gname, g := range streamGraphs(t) {
		ref, err := cpu.New(g)
		if err != nil {
			t.Fatal(err)
		}
		all := newEngine(t, g)
		starts, hubStarts := allStarts(g, 2), make([]uint32, 3000)
		for i := range hubStarts {
			hubStarts[i] = uint32(i % 7)
		}
		w := g.Weighted()
		jobs := []walk.Job{
			{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, Seed: 42, Starts: starts},
			{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: w}, Seed: 1<<40 + 7, Starts: hubStarts},
			{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 40, P: 1, Q: 2, Weighted: w}, Seed: 3, Starts: starts[:5000]},
		}
		if w {
			jobs = append(jobs,
				walk.Job{Tag: 4, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}, Seed: 5, Starts: starts},
				walk.Job{Tag: 5, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 30, Weighted: true, Stepper: walk.StepperZPRS}, Seed: 6, Starts: starts[:3000]})
		}
		meta := metaPathJobs(g, starts, hubStarts)
		// The reservoir sampler is compared with the all-device engine (the
		// placement plan's equality test does the same); the rest with the
		// CPU engine and the all-device engine.
		want, dev := collect(t, ref, jobs[:min(len(jobs), 4)]), collect(t, all, jobs)
		wantMeta := collect(t, ref, meta)
		for _, run := range []struct{ batch, how int }{{0, streamChoose}, {2500, streamChoose}, {0, streamPlaced}, {2500, streamCopy}, {0, streamInPlace}} {
			t.Run(fmt.Sprintf("%s/batch=%d/how=%d", gname, run.batch, run.how), func(t *testing.T) {
				opts := streamTestOptions(run.batch, run.how)
				opts[0] = WithStream(StreamAuto)
				e := newEngine(t, g, opts...)
				sp, pp := e.StreamPlan(), e.Placement()
				if sp == nil || pp == nil || sp.Streamed() == 0 || pp.DeviceShare() >= 1 {
					t.Fatalf("auto at half the device: stream plan %v, placement %v", sp, pp)
				}
				got := collect(t, e, jobs)
				ss := e.StreamStats()
				for tag := range dev {
					ref := want[tag]
					if ref == nil {
						ref = dev[tag]
					}
					for id := range ref {
						if !equal(got[tag][id], ref[id]) {
							t.Fatalf("job %d walk %d differs:\nauto %v\nwant %v", tag, id, got[tag][id], ref[id])
						}
						if want[tag] != nil && !equal(dev[tag][id], ref[id]) {
							t.Fatalf("job %d walk %d: the all-device engine differs from the cpu", tag, id)
						}
					}
				}
				total := ss.Batches + ss.InPlaceBatches + ss.PlacedBatches
				switch {
				case total == 0 || ss.LastChoice == "":
					t.Fatalf("stream stats %+v", ss)
				case run.how == streamPlaced && (ss.Batches > 0 || ss.InPlaceBatches > 0):
					t.Fatalf("placement forced, yet streamed: %+v", ss)
				case run.how == streamCopy && (ss.Batches == 0 || ss.InPlaceBatches > 0):
					t.Fatalf("copying forced: %+v", ss)
				case run.how != streamPlaced && w && ss.PlacedBatches == 0:
					// The ZPRS job walks under the placement plan whatever
					// is forced.
					t.Fatalf("the reservoir job did not walk under the placement plan: %+v", ss)
				}
				t.Logf("%+v", ss)
				gotMeta := collect(t, e, meta)
				checkSameWalks(t, wantMeta, map[string]map[int][][]uint32{"auto": gotMeta})
				t.Logf("metapath: %+v", e.StreamStats())
			})
		}
	}
}
