package stage

import (
	"fmt"
	"testing"
	"time"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/walk"
)

// streamingEngine is the CPU engine reporting a stream run's figures
// after each run, as the GPU engine under a stream plan does.
type streamingEngine struct {
	walk.Engine
	last gpu.StreamStats
}

func (e *streamingEngine) StreamStats() gpu.StreamStats { return e.last }

// TestStreamMetricsAddEachRun: what a streaming engine reports for a run
// is added to the stream metrics once per run.
func TestStreamMetricsAddEachRun(t *testing.T) {
	b := fileBucket(t)
	src, evs := newMemSource(), &memEvents{}
	var eng *streamingEngine
	s := runMem(t, b, src, evs, func(o *Options) {
		eng = &streamingEngine{Engine: o.Engine, last: gpu.StreamStats{Batches: 1, InPlaceBatches: 2, PlacedBatches: 4, Visits: 7, Walkers: 40,
			Copies: 5, BytesCopied: 1000, BytesRead: 300}}
		o.Engine = eng
	})
	const batches = 3
	for i := range batches {
		src.send(t, fmt.Sprintf("s%d", i), fmt.Sprintf(`{"version":1,"batch_id":"s%d","algorithm":"deepwalk","seeds":[1,2,3],"length":6}`, i))
		waitFor(t, fmt.Sprintf("event %d", i+1), 10*time.Second, func() bool { return len(evs.all()) == i+1 })
	}
	runs := metricValue(s.m.engineRuns)
	if runs < 1 {
		t.Fatalf("%v engine runs", runs)
	}
	for _, c := range []struct {
		name      string
		got, each float64
	}{
		{"bytes copied", metricValue(s.m.streamBytes.WithLabelValues("copied")), 1000},
		{"bytes read", metricValue(s.m.streamBytes.WithLabelValues("read")), 300},
		{"visits", metricValue(s.m.streamVisits), 7},
		{"walkers", metricValue(s.m.streamWalkers), 40},
		{"batches copied", metricValue(s.m.streamBatches.WithLabelValues("copied")), 1},
		{"batches in place", metricValue(s.m.streamBatches.WithLabelValues("in_place")), 2},
		{"batches under the placement plan", metricValue(s.m.streamBatches.WithLabelValues("placement")), 4},
	} {
		if c.got != c.each*runs {
			t.Errorf("%s: %v after %v runs, want %v", c.name, c.got, runs, c.each*runs)
		}
	}
}
