package stage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/ooc"
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

// TestOutOfCoreMetrics: a stage whose CPU engine walks the graph out of
// core (a budget far below the graph, partitions of 8 KiB) serves
// DeepWalk and Node2Vec requests, and the out-of-core metrics count what
// its runs read.
func TestOutOfCoreMetrics(t *testing.T) {
	path, g := testGraph(t, 8)
	eng, err := ooc.New(context.Background(), g, path, ooc.WithMemoryLimit(1<<20), ooc.WithPartitionBytes(8<<10),
		ooc.WithSlots(3), ooc.WithWorkers(1), ooc.WithLogger(testLog(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	parts := len(eng.Plan().Partitions)
	if parts < 4 {
		t.Fatalf("%d partitions, want several", parts)
	}
	b := fileBucket(t)
	src, evs := newMemSource(), &memEvents{}
	s := runMem(t, b, src, evs, func(o *Options) { o.Graph, o.Engine = g, eng })
	reqs := []string{
		`{"version":1,"batch_id":"o0","algorithm":"deepwalk","seeds":[1,2,3,40,41],"length":20}`,
		`{"version":1,"batch_id":"o1","algorithm":"node2vec","p":1,"q":2,"seeds":[1,2,3,40,41],"length":20}`,
	}
	for i, r := range reqs {
		src.send(t, fmt.Sprintf("o%d", i), r)
		waitFor(t, fmt.Sprintf("event %d", i+1), 10*time.Second, func() bool { return len(evs.all()) == i+1 })
		if ev := evs.all()[i]; ev.Status != message.StatusSucceeded {
			t.Fatalf("request %d: %s (%s)", i, ev.Status, ev.Error)
		}
	}
	// Two runs of walks of 20 steps over partitions held three at a time:
	// several visits and loads each.
	if loads, visits := metricValue(s.m.oocLoads), metricValue(s.m.oocVisits); loads < 4 || visits < 4 {
		t.Fatalf("%v loads and %v visits of %d partitions over two runs", loads, visits, parts)
	}
	if by := metricValue(s.m.oocBytes); by <= 0 {
		t.Fatalf("%v bytes read", by)
	}
	if w, sl := metricValue(s.m.oocWalkers), metricValue(s.m.oocSlots); w != 5 || sl != 3 {
		t.Fatalf("last run: %v walkers, %v slots; want 5 and 3", w, sl)
	}
}
