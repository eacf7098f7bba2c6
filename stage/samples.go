package stage

// Graph sampling batches (the C-SAW algorithms, output "samples"): sampled
// on the engine's device when it takes the parameters (graphsample.SampleRangeOn:
// the GPU engine's neighbour, layer, forest-fire, snowball and frontier
// sampling), else on the CPU, one batch per call, and written by the
// batch's writer; the manifest and event name the engine that sampled
// (batchMeta, graphsample.SampleEngine).

import (
	"context"
	"fmt"
	"time"

	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/internal/turns"
	"github.com/walkstage/walkstage/message"
)

// sample runs one sampling batch against v's graph and writes its rows,
// in waves of instances of about message.SampleWaveEdges edges.
// The seeds are those bound to v's graph (rebind); seeds that no longer
// form whole frontier sets reject the batch. Like countVisits, an error of
// the sampling is the batch's vErr, a write error its wErr, and b.written
// is closed on return.
func (s *Stage) sample(ctx context.Context, b *batch, v *served, turn *turns.Held) {
	defer close(b.written)
	sp := b.req.Sample
	p := sp.Params
	per := p.SeedsPerInstance()
	if len(b.req.Starts)%per != 0 {
		b.vErr = &message.RejectError{Reason: message.ReasonInvalidParameters, BatchID: b.req.BatchID,
			Msg: fmt.Sprintf("graph version %s: %d known seeds are not whole sets of frontier_size %d", v.g.Version, len(b.req.Starts), per)}
		return
	}
	n := p.NumInstances(len(b.req.Starts))
	var st graphsample.SampleStats
	var d time.Duration
	var wave int
	var waveEdges int64
	// One set of columns for every wave of the batch (the writer is done
	// with a wave when WriteSampleColumns returns), kept for the next
	// batch.
	cols, _ := s.sampleCols.Get().(*graphsample.Columns)
	if cols == nil {
		cols = &graphsample.Columns{}
	}
	defer s.sampleCols.Put(cols)
	cols.WithEdges = sp.EdgeWeight
	for lo := 0; lo < n; lo += wave {
		wave = message.SampleWave(p, message.SampleWaveEdges, n-lo, wave, waveEdges)
		hi := lo + wave
		turn.Lock() // each wave a turn: queued micro-batches walk between waves
		t0 := time.Now()
		ws, err := graphsample.SampleColumnsOn(ctx, v.e, v.g, p, b.req.Starts, lo, hi-lo, 0, cols)
		d += time.Since(t0)
		s.turns.Done()
		if err != nil {
			b.vErr = fmt.Errorf("sample: %w", err)
			return
		}
		st.Instances += ws.Instances
		st.Edges += ws.Edges
		waveEdges = ws.Edges
		// A graph with string ids takes its seeds as dense ids
		// (sink.BatchWriter.WriteSamples writes their strings).
		seeds := make([]int64, hi-lo)
		for k := range seeds {
			if i := (lo + k) / p.InstancesPerSeed * per; v.g.HasStringIDs() {
				seeds[k] = int64(b.req.Starts[i])
			} else {
				seeds[k] = b.req.Seeds[i]
			}
		}
		if err := b.w.WriteSampleColumns(ctx, int64(lo), seeds, cols); err != nil {
			b.wErr = fmt.Errorf("write: %w", err)
			return
		}
	}
	b.walked = d
	s.m.engineRuns.Inc()
	s.m.engineSeconds.Add(d.Seconds())
	b.gotW, b.steps = int64(b.walks), st.Edges
	s.log.Debug("graph sampled", "batch_id", b.req.BatchID, "algorithm", p.Kind.String(), "instances", st.Instances,
		"edges", st.Edges, "engine", graphsample.SampleEngine(v.e, p), "duration_seconds", d.Seconds())
}
