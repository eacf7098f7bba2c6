//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/hybrid"
)

// hybridLayouts are the GPU engines the hybrid tests pair with the CPU
// engine: the graph all on the device, a placement plan reading three
// quarters of the edges in place, and a stream plan of 8 KiB partitions.
func hybridLayouts() map[string][]Option {
	return map[string][]Option{
		"all-device": {WithChunkWalks(1000)},
		"placed":     {WithDeviceFraction(0.25), WithChunkWalks(1000)},
		"streamed":   {WithStream(StreamOn), WithDeviceFraction(0.5), WithStreamPartitionBytes(8 << 10), WithChunkWalks(1000)},
	}
}

// TestHybridMatchesCPU: the CPU engine and the GPU engine walking each job
// together (walk/hybrid) give the CPU engine's walks, walk by walk, for
// every layout of the graph on the device, in three runs (the first split
// half and half, the later ones by the rates measured), MetaPath on label
// tables included (split under streaming too), Node2Vec (split under
// streaming too, since the streaming engine walks it); a reservoir
// stepper, whose walks the engines draw differently, goes to one engine
// whole.
func TestHybridMatchesCPU(t *testing.T) {
	for gname, g := range streamGraphs(t) {
		ref, err := cpu.New(g)
		if err != nil {
			t.Fatal(err)
		}
		starts := allStarts(g, 3)
		hubStarts := make([]uint32, 3000)
		for i := range hubStarts {
			hubStarts[i] = uint32(i % 7)
		}
		jobs := []walk.Job{
			{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: g.Weighted()}, Seed: 42, Starts: starts},
			{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, Seed: 1<<40 + 7, Starts: hubStarts},
			{Tag: 3, Algorithm: walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.1, Weighted: g.Weighted()}, Seed: 5, Starts: starts},
			{Tag: 4, Algorithm: walk.Algorithm{Kind: walk.Node2Vec, Length: 20, P: 2, Q: 0.5}, Seed: 6, Starts: starts[:5000]},
			{Tag: 5, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: g.Weighted(), Stepper: walk.StepperZPRS}, Seed: 7, Starts: hubStarts},
			{Tag: 6, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 40, Schema: []uint8{1, 0, 2}, Weighted: g.Weighted()}, Seed: 8, Starts: starts[:6000]},
		}
		want := collect(t, ref, jobs)
		for lname, opts := range hybridLayouts() {
			ge := newEngine(t, g, opts...)
			ce, err := cpu.New(g, cpu.WithWorkers(4))
			if err != nil {
				t.Fatal(err)
			}
			h, err := hybrid.New(g, ce, ge)
			if err != nil {
				t.Fatal(err)
			}
			for run := range 3 {
				t.Run(fmt.Sprintf("%s/%s/run%d", gname, lname, run), func(t *testing.T) {
					got := collect(t, h, jobs)
					var walks int64
					for tag := range want {
						if tag == 5 && (!hybrid.SameWalks(jobs[4].Algorithm, g) && walk.CheckAlgorithm(ge, jobs[4].Algorithm) == nil) {
							// The GPU walked the reservoir job: its own walks.
							walks += int64(len(want[tag]))
							continue
						}
						for id := range want[tag] {
							if !equal(got[tag][id], want[tag][id]) {
								t.Fatalf("job %d walk %d differs:\nhybrid %v\ncpu    %v", tag, id, got[tag][id], want[tag][id])
							}
						}
						walks += int64(len(want[tag]))
					}
					sh := h.LastShare()
					if sh.CPUWalks+sh.GPUWalks != walks {
						t.Fatalf("share %+v, want %d walks", sh, walks)
					}
					t.Logf("share %+v: cpu %.1f%% of the steps", sh, 100*sh.CPUStepShare())
				})
			}
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRunAgainAfterCancel: a GPU engine whose Run is cancelled half way
// (the hybrid engine cancels the GPU's range once the CPU has emitted its
// walks) walks the next Run as if nothing had happened, in every layout.
func TestRunAgainAfterCancel(t *testing.T) {
	g := streamGraphs(t)["rmat-weighted"]
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	jobs := []walk.Job{{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}, Seed: 11, Starts: allStarts(g, 4)}}
	want := collect(t, ref, jobs)
	for lname, opts := range hybridLayouts() {
		t.Run(lname, func(t *testing.T) {
			e := newEngine(t, g, append(opts, WithMaxBatchWalks(2000))...)
			ctx, cancel := context.WithCancel(context.Background())
			chunks := 0
			err := e.Run(ctx, jobs, func(walk.Chunk) error {
				if chunks++; chunks == 2 {
					cancel()
				}
				return nil
			})
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled run: %v", err)
			}
			got := collect(t, e, jobs)
			for id := range want[1] {
				if !equal(got[1][id], want[1][id]) {
					t.Fatalf("after a cancelled run, walk %d differs", id)
				}
			}
		})
	}
}
