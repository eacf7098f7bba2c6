package stage

// Graph sampling batches (the C-SAW algorithms, output "samples"): sampled
// on the CPU (walk.Sample), one batch per call, and written by the batch's
// writer.

import (
	"context"
	"fmt"
	"time"

	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/walk"
)

// sampleWriteInstances is how many instances' edges are handed to the
// writer at a time.
const sampleWriteInstances = 4096

// sample runs one sampling batch against v's graph and writes its rows.
// The seeds are those bound to v's graph (rebind); seeds that no longer
// form whole frontier sets reject the batch. Like countVisits, an error of
// the sampling is the batch's vErr, a write error its wErr, and b.written
// is closed on return.
func (s *Stage) sample(ctx context.Context, b *batch, v *served) {
	defer close(b.written)
	sp := b.req.Sample
	p := sp.Params
	per := p.SeedsPerInstance()
	if len(b.req.Starts)%per != 0 {
		b.vErr = &source.RejectError{Reason: source.ReasonInvalidParameters, BatchID: b.req.BatchID,
			Msg: fmt.Sprintf("graph version %s: %d known seeds are not whole sets of frontier_size %d", v.g.Version, len(b.req.Starts), per)}
		return
	}
	s.engineMu.Lock()
	t0 := time.Now()
	edges, st, err := walk.Sample(ctx, v.g, p, b.req.Starts, 0)
	d := time.Since(t0)
	s.engineMu.Unlock()
	b.walked = d
	s.m.engineRuns.Inc()
	s.m.engineSeconds.Add(d.Seconds())
	if err != nil {
		b.vErr = fmt.Errorf("sample: %w", err)
		return
	}
	b.gotW, b.steps = int64(b.walks), st.Edges
	s.log.Debug("graph sampled", "batch_id", b.req.BatchID, "algorithm", p.Kind.String(), "instances", st.Instances,
		"edges", st.Edges, "duration", d)
	seeds := make([]int64, len(edges))
	for i := range seeds {
		seeds[i] = b.req.Seeds[i/p.InstancesPerSeed*per]
	}
	for lo := 0; lo < len(edges); lo += sampleWriteInstances {
		hi := min(lo+sampleWriteInstances, len(edges))
		if err := b.w.WriteSamples(ctx, int64(lo), seeds[lo:hi], edges[lo:hi]); err != nil {
			b.wErr = fmt.Errorf("write: %w", err)
			return
		}
		for k := lo; k < hi; k++ {
			edges[k] = nil // let the written instances go
		}
	}
}
