package sink

// Output "samples": one row per sampled edge of a graph sampling batch
// (walk.Sample), written by a BatchWriter opened with BatchMeta.Sample set.
// It shares the batch's layout, per-attempt part names, create-if-absent
// manifest and fingerprint rules with walk output (Commit, Abort); only
// the rows differ, as for sink/visits.go.

import (
	"context"
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// OutputSamples is the manifest's "output" of a samples batch.
const OutputSamples = "samples"

// sampleRowGroupRows is the number of edges per row group: about 2.3 MiB
// of rows before compression.
const sampleRowGroupRows = 1 << 16

// SampleRow is one sampled edge as stored in Parquet:
//
//	instance_id INT64, seed INT64, hop INT32, src INT64, dst INT64
//
// vertices as external ids; rows ordered by instance, then hop.
type SampleRow struct {
	InstanceID int64 `parquet:"instance_id"`
	Seed       int64 `parquet:"seed"`
	Hop        int32 `parquet:"hop"`
	Src        int64 `parquet:"src"`
	Dst        int64 `parquet:"dst"`
}

// WeightedSampleRow is SampleRow with the edge's weight, for batches with
// BatchMeta.SampleEdgeWeight.
type WeightedSampleRow struct {
	InstanceID int64   `parquet:"instance_id"`
	Seed       int64   `parquet:"seed"`
	Hop        int32   `parquet:"hop"`
	Src        int64   `parquet:"src"`
	Dst        int64   `parquet:"dst"`
	EdgeWeight float32 `parquet:"edge_weight"`
}

// DescribeSample renders p for metadata, in the form of AlgorithmMeta.
func DescribeSample(p walk.SampleParams) AlgorithmMeta {
	m := AlgorithmMeta{Name: p.Kind.String(), Length: p.Hops(), Weighted: p.Weighted(), Sampler: "reservoir-keys",
		Fanouts: p.Fanouts, LayerSizes: p.LayerSizes, Replace: p.Replace, BurnProbability: p.BurnProb, Depth: p.Depth,
		MaxVertices: p.MaxVertices, FrontierSize: p.FrontierSize, Samples: p.Samples, InstancesPerSeed: p.InstancesPerSeed}
	if p.Kind == walk.Snowball {
		m.Sampler = "all"
	}
	return m
}

// sampleState is a samples batch being written.
type sampleState struct {
	buf       []WeightedSampleRow
	instances int64 // handed to WriteSamples
	written   int64 // edges encoded into parts
	p         *part
	pw        *parquet.GenericWriter[SampleRow]
	pww       *parquet.GenericWriter[WeightedSampleRow]
	rows      []SampleRow // conversion buffer for pw
	parts     int
}

// WriteSamples appends the edges of instances first, first+1, ...: edges[k]
// are instance first+k's, seeds[k] its seed (external id). Instances must
// come in order, each once. Rows are grouped into row groups and parts by
// count and size alone, so the same samples give the same bytes however
// they were handed over. Not safe for concurrent use.
func (w *BatchWriter) WriteSamples(ctx context.Context, first int64, seeds []int64, edges [][]walk.SampledEdge) error {
	s := w.samples
	if s == nil {
		return errors.New("sink: WriteSamples on a batch without BatchMeta.Sample")
	}
	if len(seeds) != len(edges) {
		return fmt.Errorf("sink: %d seeds for %d instances", len(seeds), len(edges))
	}
	if err := w.failed(); err != nil {
		return err
	}
	if first != s.instances || s.instances+int64(len(edges)) > w.meta.Instances {
		return w.fail(fmt.Errorf("sink: batch %s: %w: instances %d..%d after %d of %d", w.meta.BatchID, ErrBadChunk,
			first, first+int64(len(edges))-1, s.instances, w.meta.Instances))
	}
	g := w.g
	nv := uint32(g.NumVertices())
	for k, es := range edges {
		id := first + int64(k)
		for _, e := range es {
			if e.Src >= nv || e.Dst >= nv || e.Edge >= uint64(len(g.Targets)) {
				return w.fail(fmt.Errorf("sink: batch %s: %w: edge %d->%d beyond the graph", w.meta.BatchID, ErrBadChunk, e.Src, e.Dst))
			}
			r := WeightedSampleRow{InstanceID: id, Seed: seeds[k], Hop: e.Hop, Src: g.ExternalID(e.Src), Dst: g.ExternalID(e.Dst)}
			if g.Weights != nil {
				r.EdgeWeight = g.Weights[e.Edge]
			}
			s.buf = append(s.buf, r)
			if len(s.buf) == sampleRowGroupRows {
				if err := w.flushSamples(ctx); err != nil {
					return w.fail(err)
				}
			}
		}
	}
	s.instances += int64(len(edges))
	return nil
}

// flushSamples writes the buffered rows as one row group, opening a part
// when none is open and closing it once it reaches the file size.
func (w *BatchWriter) flushSamples(ctx context.Context) error {
	s := w.samples
	if len(s.buf) == 0 {
		return nil
	}
	if s.p == nil {
		if err := w.openSamplePart(); err != nil {
			return err
		}
	}
	p := s.p
	var err error
	if s.pww != nil {
		if _, err = s.pww.Write(s.buf); err == nil {
			err = s.pww.Flush()
		}
	} else {
		s.rows = s.rows[:0]
		for _, r := range s.buf {
			s.rows = append(s.rows, SampleRow{InstanceID: r.InstanceID, Seed: r.Seed, Hop: r.Hop, Src: r.Src, Dst: r.Dst})
		}
		if _, err = s.pw.Write(s.rows); err == nil {
			err = s.pw.Flush()
		}
	}
	if err != nil {
		return fmt.Errorf("sink: write %s: %w", p.key, err)
	}
	p.addRows(&s.written, len(s.buf))
	s.buf = s.buf[:0]
	if p.out.n >= w.cfg.fileBytes {
		return w.closeSamplePart()
	}
	return ctx.Err()
}

func (w *BatchWriter) openSamplePart() error {
	s := w.samples
	p, err := w.newPart(s.parts)
	if err != nil {
		return err
	}
	opts := w.rowPartOptions(s.parts, OutputSamples, sampleRowGroupRows)
	s.p = p
	if w.meta.SampleEdgeWeight {
		s.pww = parquet.NewGenericWriter[WeightedSampleRow](p.out, opts...)
	} else {
		s.pw = parquet.NewGenericWriter[SampleRow](p.out, opts...)
	}
	s.parts++
	return nil
}

func (w *BatchWriter) closeSamplePart() error {
	s := w.samples
	p := s.p
	closeEncoder := func() error { return s.pw.Close() }
	if s.pww != nil {
		closeEncoder = s.pww.Close
	}
	err := w.sealPart(p, closeEncoder)
	s.p, s.pw, s.pww = nil, nil, nil
	if err != nil {
		return err
	}
	w.walksWritten.Add(p.file.Rows)
	return nil
}

// finishSamples writes what is buffered and closes the last part before
// Commit lists the parts.
func (w *BatchWriter) finishSamples(ctx context.Context) error {
	s := w.samples
	if s.instances != w.meta.Instances {
		return fmt.Errorf("sink: batch %s: %w: %d of %d instances written", w.meta.BatchID, ErrBadChunk, s.instances, w.meta.Instances)
	}
	if err := w.flushSamples(ctx); err != nil {
		return err
	}
	if s.p != nil {
		return w.closeSamplePart()
	}
	return nil
}

// describeSamples completes a samples batch's manifest.
func (w *BatchWriter) describeSamples(m *Manifest) {
	s := w.samples
	m.Output, m.Instances, m.Edges, m.Walks = OutputSamples, s.instances, s.written, 0
}

// abortSamples abandons the part being written.
func (w *BatchWriter) abortSamples() {
	if s := w.samples; s != nil && s.p != nil {
		w.abortPart(s.p)
		s.p, s.pw, s.pww = nil, nil, nil
	}
}

// validateSampleMeta checks a samples batch's BatchMeta against g.
func validateSampleMeta(meta BatchMeta, g *graph.Graph) error {
	if err := meta.Sample.Validate(g); err != nil {
		return err
	}
	if meta.Walks != 0 || meta.Queries != 0 || meta.Instances < 1 {
		return fmt.Errorf("%d instances, %d walks, %d queries", meta.Instances, meta.Walks, meta.Queries)
	}
	if meta.SampleEdgeWeight && !g.Weighted() {
		return fmt.Errorf("edge weights asked of graph %q, which has none", g.Name)
	}
	return nil
}
