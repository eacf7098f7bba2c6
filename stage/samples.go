package stage

// Graph sampling batches (the C-SAW algorithms, output "samples"): sampled
// on the engine's device when it takes the parameters (graphsample.SampleRangeOn:
// the GPU engine's neighbour, layer, forest-fire, snowball and frontier
// sampling), else on the CPU, and written by the batch's writer: a
// micro-batch's small requests of the same parameters in merged calls
// (sampleMerged, graphsample.Merge), the others one batch per call; the manifest and event name the engine that sampled
// (batchMeta, graphsample.SampleEngine).

import (
	"context"
	"fmt"
	"time"

	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/internal/turns"
	"github.com/walkstage/walkstage/message"
)

// sampleBatches samples a micro-batch's sampling batches on v: those of
// one wave each (a request's instances fit the first wave's bound) that
// share their parameters but for the seed (and edge_weight) in merged
// calls (sampleMerged), the others alone (sample). A GNN trainer's
// requests of a thousand seeds each paid a whole device call each.
func (s *Stage) sampleBatches(ctx context.Context, bs []*batch, v *served, turn *turns.Held) {
	groups := map[string][]*batch{}
	var order []string
	for _, b := range bs {
		sp := b.req.Sample
		p := sp.Params
		n := p.NumInstances(len(b.req.Starts))
		if len(b.req.Starts)%p.SeedsPerInstance() != 0 || n == 0 || message.SampleWave(p, message.SampleWaveEdges, n, 0, 0) < n {
			s.sample(ctx, b, v, turn)
			continue
		}
		p.Seed = 0
		key := fmt.Sprintf("%+v edge_weight=%v", p, sp.EdgeWeight)
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], b)
	}
	for _, key := range order {
		if g := groups[key]; len(g) == 1 {
			s.sample(ctx, g[0], v, turn)
		} else {
			s.sampleMerged(ctx, g, v, turn)
		}
	}
}

// sampleMerged samples batches of one wave each and the same parameters
// but for the seed (sampleBatches) in as few calls as the wave bound
// (message.SampleWave over the merged instances) allows, whole requests a
// call: graphsample.Merge keys each request's instances as its own call
// does, so each request's rows are those it gets alone, written by its own
// writer in one call as alone. A call's error fails the batches it held;
// the others go on.
func (s *Stage) sampleMerged(ctx context.Context, bs []*batch, v *served, turn *turns.Held) {
	sp := bs[0].req.Sample
	p := sp.Params
	left := 0
	for _, b := range bs {
		left += p.NumInstances(len(b.req.Starts))
	}
	cols, _ := s.sampleCols.Get().(*graphsample.Columns)
	if cols == nil {
		cols = &graphsample.Columns{}
	}
	defer s.sampleCols.Put(cols)
	cols.WithEdges = sp.EdgeWeight
	var view graphsample.Columns
	var lastInstances int
	var lastEdges int64
	parts := make([]graphsample.MergePart, 0, len(bs))
	for i := 0; i < len(bs); {
		wave := message.SampleWave(p, message.SampleWaveEdges, left, lastInstances, lastEdges)
		parts = parts[:0]
		n, j := 0, i
		for ; j < len(bs); j++ {
			b := bs[j]
			k := p.NumInstances(len(b.req.Starts))
			if j > i && n+k > wave {
				break
			}
			parts = append(parts, graphsample.MergePart{Seed: b.req.Sample.Params.Seed, Starts: b.req.Starts, Count: k})
			n += k
		}
		call := bs[i:j]
		i, left = j, left-n
		m, starts := graphsample.Merge(p, parts)
		turn.Lock() // each call a turn, as each wave of a request alone
		t0 := time.Now()
		ws, err := graphsample.SampleColumnsOn(ctx, v.e, v.g, m, starts, 0, n, 0, cols)
		d := time.Since(t0)
		s.turns.Done()
		s.m.engineRuns.Inc()
		s.m.engineSeconds.Add(d.Seconds())
		s.m.sampleCalls.WithLabelValues("merged").Inc()
		s.m.sampleMerged.Add(float64(len(call)))
		if err != nil {
			for _, b := range call {
				b.vErr = fmt.Errorf("sample (merged with %d requests): %w", len(call)-1, err)
				close(b.written)
			}
			continue
		}
		lastInstances, lastEdges = n, ws.Edges
		first := 0
		for _, b := range call {
			k := p.NumInstances(len(b.req.Starts))
			s.writeSampled(ctx, b, v, cols, first, k, &view)
			b.walked = d
			close(b.written)
			first += k
		}
		s.log.Debug("graph sampled, requests merged", "requests", len(call), "algorithm", p.Kind.String(), "instances", n,
			"edges", ws.Edges, "engine", graphsample.SampleEngine(v.e, m), "duration_seconds", d.Seconds())
	}
}

// writeSampled writes instances first .. first+count-1 of a merged call's
// cols, all of b's, through b's writer (view: their columns, offsets from
// 0, kept for the next request) and records b's figures or its wErr.
func (s *Stage) writeSampled(ctx context.Context, b *batch, v *served, cols *graphsample.Columns, first, count int, view *graphsample.Columns) {
	o0, o1 := cols.Offsets[first], cols.Offsets[first+count]
	view.WithEdges = cols.WithEdges
	view.Offsets = view.Offsets[:0]
	for _, o := range cols.Offsets[first : first+count+1] {
		view.Offsets = append(view.Offsets, o-o0)
	}
	view.Hop, view.Src, view.Dst = cols.Hop[o0:o1], cols.Src[o0:o1], cols.Dst[o0:o1]
	view.Edge = nil
	if cols.WithEdges {
		view.Edge = cols.Edge[o0:o1]
	}
	if err := b.w.WriteSampleColumns(ctx, 0, b.sampleSeeds(v, 0, count), view); err != nil {
		b.wErr = fmt.Errorf("write: %w", err)
		return
	}
	b.gotW, b.steps = int64(b.walks), o1-o0
}

// sampleSeeds are the seeds of b's instances lo .. lo+n-1 as written: a
// graph with string ids takes them as dense ids
// (sink.BatchWriter.WriteSamples writes their strings).
func (b *batch) sampleSeeds(v *served, lo, n int) []int64 {
	p := b.req.Sample.Params
	per := p.SeedsPerInstance()
	seeds := make([]int64, n)
	for k := range seeds {
		if i := (lo + k) / p.InstancesPerSeed * per; v.g.HasStringIDs() {
			seeds[k] = int64(b.req.Starts[i])
		} else {
			seeds[k] = b.req.Seeds[i]
		}
	}
	return seeds
}

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
	var calls int
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
		calls++
		s.turns.Done()
		if err != nil {
			b.vErr = fmt.Errorf("sample: %w", err)
			return
		}
		st.Instances += ws.Instances
		st.Edges += ws.Edges
		waveEdges = ws.Edges
		if err := b.w.WriteSampleColumns(ctx, int64(lo), b.sampleSeeds(v, lo, hi-lo), cols); err != nil {
			b.wErr = fmt.Errorf("write: %w", err)
			return
		}
	}
	b.walked = d
	s.m.engineRuns.Inc()
	s.m.engineSeconds.Add(d.Seconds())
	s.m.sampleCalls.WithLabelValues("alone").Add(float64(calls))
	b.gotW, b.steps = int64(b.walks), st.Edges
	s.log.Debug("graph sampled", "batch_id", b.req.BatchID, "algorithm", p.Kind.String(), "instances", st.Instances,
		"edges", st.Edges, "engine", graphsample.SampleEngine(v.e, p), "duration_seconds", d.Seconds())
}
