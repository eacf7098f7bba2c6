package sink

// Output "samples": one row per sampled edge of a graph sampling batch
// (graphsample.Sample), written by a BatchWriter opened with BatchMeta.Sample set.
// It shares the batch's layout, per-attempt part names, create-if-absent
// manifest and fingerprint rules with walk output (Commit, Abort); only
// the rows differ, as for sink/visits.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/sink/output"
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
// vertices as external ids; rows ordered by instance, then hop. The
// instance, seed and hop columns ascend or repeat and are delta encoded;
// src is PLAIN, whose runs (the edges of one source) zstd matches, and dst
// DELTA_BINARY_PACKED. These were BYTE_STREAM_SPLIT, whose zeros and
// repeated high bytes zstd compresses as runs, but DuckDB reads that
// encoding only for FLOAT and DOUBLE: BenchmarkWriteSamples (2 cores)
// writes 3.68 bytes an edge, against 3.50 split, 4.21 with src delta
// encoded too (its runs' jumps set each miniblock's width) and 4.16
// PLAIN everywhere.
type SampleRow struct {
	InstanceID int64 `parquet:"instance_id,delta"`
	Seed       int64 `parquet:"seed,delta"`
	Hop        int32 `parquet:"hop,delta"`
	Src        int64 `parquet:"src"`
	Dst        int64 `parquet:"dst,delta"`
}

// WeightedSampleRow is SampleRow with the edge's weight, for batches with
// BatchMeta.SampleEdgeWeight (BYTE_STREAM_SPLIT, which every reader takes
// for FLOAT).
type WeightedSampleRow struct {
	InstanceID int64   `parquet:"instance_id,delta"`
	Seed       int64   `parquet:"seed,delta"`
	Hop        int32   `parquet:"hop,delta"`
	Src        int64   `parquet:"src"`
	Dst        int64   `parquet:"dst,delta"`
	EdgeWeight float32 `parquet:"edge_weight,split"`
}

// StringSampleRow is SampleRow for a graph with string ids: seed, src and
// dst are string ids (dictionary-encoded).
type StringSampleRow struct {
	InstanceID int64  `parquet:"instance_id,delta"`
	Seed       string `parquet:"seed,dict"`
	Hop        int32  `parquet:"hop,delta"`
	Src        string `parquet:"src,dict"`
	Dst        string `parquet:"dst,dict"`
}

// WeightedStringSampleRow is StringSampleRow with the edge's weight.
type WeightedStringSampleRow struct {
	InstanceID int64   `parquet:"instance_id,delta"`
	Seed       string  `parquet:"seed,dict"`
	Hop        int32   `parquet:"hop,delta"`
	Src        string  `parquet:"src,dict"`
	Dst        string  `parquet:"dst,dict"`
	EdgeWeight float32 `parquet:"edge_weight,split"`
}

// rowGroupWriter is a part writer of string rows, which take fragments'
// row groups as the integer ones do.
type rowGroupWriter interface {
	WriteRowGroup(parquet.RowGroup) (int64, error)
	Close() error
}

// DescribeSample renders p for metadata, in the form of AlgorithmMeta.
func DescribeSample(p graphsample.SampleParams) output.AlgorithmMeta {
	m := output.AlgorithmMeta{Name: p.Kind.String(), Length: p.Hops(), Weighted: p.Weighted(), Sampler: "reservoir-keys",
		Fanouts: p.Fanouts, LayerSizes: p.LayerSizes, Replace: p.Replace, BurnProbability: p.BurnProb, Depth: p.Depth,
		MaxVertices: p.MaxVertices, FrontierSize: p.FrontierSize, Samples: p.Samples, InstancesPerSeed: p.InstancesPerSeed}
	if p.Kind == graphsample.Snowball {
		m.Sampler = "all"
	}
	return m
}

// sampleState is a samples batch being written. Row groups are cut by
// count alone (sampleRowGroupRows edges), encoded each on its own goroutine
// into a standalone Parquet fragment, and appended to the part in order by
// the caller of WriteSamples, through parquet-go's verbatim row group copy:
// one goroutine encoding wrote 4.5 M edges/s on the H100 host, a twelfth of
// what the GPU samples. A fragment's bytes depend on its rows alone, so the
// parts are the same bytes whatever the number of encoders.
type sampleState struct {
	buf       []WeightedSampleRow
	instances int64 // handed to WriteSamples
	written   int64 // edges appended to parts
	pending   []*sampleGroup
	// free holds the row buffers of appended groups, for the next ones:
	// about twice the encoders' count of 2.5 MiB buffers are in use at
	// once (WriteSamples maps a window of groups at a time).
	free [][]WeightedSampleRow
	// Fragment writers and conversion buffers, reused: zeroing a new
	// writer's column buffers for every group took 9% of the CPU of
	// BenchmarkWriteSamples (2 cores).
	fragWriters, fragWeighted, fragRows sync.Pool
	p                                   *part
	pw                                  *parquet.GenericWriter[SampleRow]
	pww                                 *parquet.GenericWriter[WeightedSampleRow]
	// A graph with string ids: rows hold dense ids (seeds too), written as
	// string rows by spw.
	spw   rowGroupWriter
	parts int
}

// sampleGroup is one row group of edges being encoded.
type sampleGroup struct {
	rows []WeightedSampleRow
	frag []byte
	err  error
	done chan struct{}
}

// WriteSamples appends the edges of instances first, first+1, ...: edges[k]
// are instance first+k's, seeds[k] its seed (external id; for a graph with
// string ids its dense id, written as its string id). Instances must
// come in order, each once. Rows are grouped into row groups and parts by
// count and size alone, so the same samples give the same bytes however
// they were handed over (WriteSampleColumns alike). Not safe for
// concurrent use.
func (w *BatchWriter) WriteSamples(ctx context.Context, first int64, seeds []int64, edges [][]graphsample.SampledEdge) error {
	c := graphsample.Columns{WithEdges: true}
	c.SetEdges(edges, w.cfg.encoders)
	return w.WriteSampleColumns(ctx, first, seeds, &c)
}

// WriteSampleColumns is WriteSamples for edges held in columns (how the
// engines hand a wave over): instance first+k's edges are rows
// c.Offsets[k] .. c.Offsets[k+1]-1. c needs edge indices (c.WithEdges)
// when the batch writes edge weights. c is read during the call only.
func (w *BatchWriter) WriteSampleColumns(ctx context.Context, first int64, seeds []int64, c *graphsample.Columns) error {
	s := w.samples
	if s == nil {
		return errors.New("sink: WriteSamples on a batch without BatchMeta.Sample")
	}
	n := c.Instances()
	if len(seeds) != n {
		return fmt.Errorf("sink: %d seeds for %d instances", len(seeds), n)
	}
	if err := w.failed(); err != nil {
		return err
	}
	if first != s.instances || s.instances+int64(n) > w.meta.Instances {
		return w.fail(fmt.Errorf("sink: batch %s: %w: instances %d..%d after %d of %d", w.meta.BatchID, ErrBadChunk,
			first, first+int64(n)-1, s.instances, w.meta.Instances))
	}
	if err := checkColumns(c); err != nil {
		return w.fail(fmt.Errorf("sink: batch %s: %w: %v", w.meta.BatchID, ErrBadChunk, err))
	}
	if w.meta.SampleEdgeWeight && !c.WithEdges && c.Len() > 0 {
		return w.fail(fmt.Errorf("sink: batch %s: %w: edge weights asked, and the sampled edges carry no edge indices", w.meta.BatchID, ErrBadChunk))
	}
	// The instances go in windows of about one row group per encoder, so
	// the buffers in use stay about twice the encoders however large the
	// call: submitting a window's groups waits for earlier groups, whose
	// buffers the next window reuses.
	window := int64(w.cfg.encoders+1) * sampleRowGroupRows
	off := c.Offsets
	for k0 := 0; k0 < n; {
		// The window's instances: at least one, then as many as fit.
		k1 := k0 + 1
		if lim := off[k0] + window; off[k1] <= lim {
			k1 = k0 + sort.Search(n-k0, func(j int) bool { return off[k0+j+1] > lim })
		}
		bufs, err := w.sampleRows(first, seeds, c, k0, k1)
		if err != nil {
			return w.fail(err)
		}
		// Every buffer but the last is a whole row group; the last one,
		// never full, is the next window's start.
		for _, b := range bufs[:len(bufs)-1] {
			if err := w.submitSampleGroup(ctx, b); err != nil {
				return w.fail(err)
			}
		}
		s.buf = bufs[len(bufs)-1]
		k0 = k1
	}
	s.instances += int64(n)
	return nil
}

// checkColumns checks that c's columns are as long as its offsets say.
func checkColumns(c *graphsample.Columns) error {
	if len(c.Offsets) == 0 {
		return errors.New("no offsets")
	}
	if c.Offsets[0] != 0 {
		return fmt.Errorf("offsets start at %d", c.Offsets[0])
	}
	n := c.Len()
	if int64(len(c.Hop)) != n || int64(len(c.Src)) != n || int64(len(c.Dst)) != n || (c.WithEdges && int64(len(c.Edge)) != n) {
		return fmt.Errorf("columns of %d, %d, %d, %d rows for %d edges", len(c.Hop), len(c.Src), len(c.Dst), len(c.Edge), n)
	}
	return nil
}

// sampleBuffer is a row group's buffer: one of the writer's, given back by
// appended groups, else a new one.
func (w *BatchWriter) sampleBuffer() []WeightedSampleRow {
	s := w.samples
	if n := len(s.free); n > 0 {
		b := s.free[n-1][:0]
		s.free = s.free[:n-1]
		return b
	}
	return make([]WeightedSampleRow, 0, sampleRowGroupRows)
}

// sampleRowsSerial is the most edges a WriteSamples call maps on its own
// goroutine; larger calls are mapped by w's encoders, by ranges of
// instances (a serial loop was a quarter of a 59 M-edge sample's writing
// on the 16-core host).
const sampleRowsSerial = 1 << 14

// sampleRows checks the edges of c's instances k0 .. k1-1 (instance first+k
// for k) and maps them to rows of external ids, in order, after the rows
// already buffered: into row-group buffers, all full but the last (which
// may be empty). The buffers are the writer's own, reused from group to
// group: mapping into a new array of the call's size, every row a first
// touch of fresh memory, took 30% of a 1 M-seed sample's CPU time on the
// 16-core host.
func (w *BatchWriter) sampleRows(first int64, seeds []int64, c *graphsample.Columns, k0, k1 int) ([][]WeightedSampleRow, error) {
	s := w.samples
	off := c.Offsets
	// Row r of the window (column row off[k0]+r) is row base+r of the
	// buffers.
	base := len(s.buf)
	rows := int(off[k1] - off[k0])
	end := base + rows
	bufs := [][]WeightedSampleRow{s.buf}
	if s.buf == nil {
		bufs[0] = w.sampleBuffer()
	}
	s.buf = nil
	for len(bufs)*sampleRowGroupRows < end {
		bufs = append(bufs, w.sampleBuffer())
	}
	for j := range bufs {
		bufs[j] = bufs[j][:min(sampleRowGroupRows, end-j*sampleRowGroupRows)]
	}
	if end > 0 && end%sampleRowGroupRows == 0 {
		bufs = append(bufs, w.sampleBuffer()) // the next call's start
	}
	g := w.g
	nv := uint32(g.NumVertices())
	strs := g.HasStringIDs()
	if strs {
		for _, sd := range seeds[k0:k1] {
			if sd < 0 || sd >= int64(nv) {
				return nil, fmt.Errorf("sink: batch %s: %w: seed %d beyond the graph", w.meta.BatchID, ErrBadChunk, sd)
			}
		}
	}
	weights := g.Weights
	if !c.WithEdges {
		weights = nil // checked by the caller: no edge_weight column
	}
	ne := uint64(len(g.Targets))
	fill := func(a, b int) error {
		for k := a; k < b; k++ {
			id, seed := first+int64(k), seeds[k]
			r := base + int(off[k]-off[k0])
			for x := off[k]; x < off[k+1]; x++ {
				src, dst := c.Src[x], c.Dst[x]
				if src >= nv || dst >= nv || (c.WithEdges && c.Edge[x] >= ne) {
					return fmt.Errorf("sink: batch %s: %w: edge %d->%d beyond the graph", w.meta.BatchID, ErrBadChunk, src, dst)
				}
				row := WeightedSampleRow{InstanceID: id, Seed: seed, Hop: c.Hop[x]}
				if strs {
					row.Src, row.Dst = int64(src), int64(dst) // their strings at encodeSampleGroup
				} else {
					row.Src, row.Dst = g.ExternalID(src), g.ExternalID(dst)
				}
				if weights != nil {
					row.EdgeWeight = weights[c.Edge[x]]
				}
				bufs[r/sampleRowGroupRows][r%sampleRowGroupRows] = row
				r++
			}
		}
		return nil
	}
	parts := min(w.cfg.encoders, rows/sampleRowsSerial, k1-k0)
	if parts <= 1 {
		return bufs, fill(k0, k1)
	}
	// Ranges of instances with about as many edges each; the first failing
	// range's error is returned, so the error does not depend on timing.
	errs := make([]error, parts)
	var wg sync.WaitGroup
	a := k0
	for i := range parts {
		b := k1
		if i < parts-1 {
			target := off[k0] + int64(rows)*int64(i+1)/int64(parts)
			b = a + sort.Search(k1-a, func(j int) bool { return off[a+j] >= target })
		}
		wg.Add(1)
		go func(i, a, b int) {
			defer wg.Done()
			errs[i] = fill(a, b)
		}(i, a, b)
		a = b
	}
	wg.Wait()
	return bufs, firstError(errs)
}

// firstError is the first non-nil error of errs, or nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// flushSamples hands the buffered rows to an encoder as one row group.
func (w *BatchWriter) flushSamples(ctx context.Context) error {
	s := w.samples
	if len(s.buf) == 0 {
		return nil
	}
	rows := s.buf
	s.buf = nil
	if n := len(s.free); n > 0 {
		s.buf, s.free = s.free[n-1][:0], s.free[:n-1]
	}
	return w.submitSampleGroup(ctx, rows)
}

// submitSampleGroup starts encoding rows (a buffer of the writer's, reused
// once the group is appended) as the next row group and appends the oldest
// encoded groups to the part while more than one per encoder are queued.
func (w *BatchWriter) submitSampleGroup(ctx context.Context, rows []WeightedSampleRow) error {
	s := w.samples
	g := &sampleGroup{rows: rows, done: make(chan struct{})}
	s.pending = append(s.pending, g)
	go w.encodeSampleGroup(g)
	for len(s.pending) > w.cfg.encoders+1 {
		if err := w.appendSampleGroup(ctx); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// encodeSampleGroup writes g's rows as a standalone Parquet file of one row
// group, configured as the parts are so that their writer copies it.
func (w *BatchWriter) encodeSampleGroup(g *sampleGroup) {
	defer close(g.done)
	s := w.samples
	var buf bytes.Buffer
	buf.Grow(len(g.rows) * 16)
	if w.g.HasStringIDs() {
		g.err = w.encodeStringSamples(&buf, g.rows)
	} else if w.meta.SampleEdgeWeight {
		pw, _ := s.fragWeighted.Get().(*parquet.GenericWriter[WeightedSampleRow])
		if pw == nil {
			pw = parquet.NewGenericWriter[WeightedSampleRow](&buf, w.samplePartOptions(0)...)
		} else {
			pw.Reset(&buf)
		}
		if _, g.err = pw.Write(g.rows); g.err == nil {
			g.err = pw.Close()
		}
		s.fragWeighted.Put(pw)
	} else {
		rows, _ := s.fragRows.Get().(*[]SampleRow)
		if rows == nil {
			rows = new([]SampleRow)
		}
		*rows = (*rows)[:0]
		for _, r := range g.rows {
			*rows = append(*rows, SampleRow{InstanceID: r.InstanceID, Seed: r.Seed, Hop: r.Hop, Src: r.Src, Dst: r.Dst})
		}
		pw, _ := s.fragWriters.Get().(*parquet.GenericWriter[SampleRow])
		if pw == nil {
			pw = parquet.NewGenericWriter[SampleRow](&buf, w.samplePartOptions(0)...)
		} else {
			pw.Reset(&buf)
		}
		if _, g.err = pw.Write(*rows); g.err == nil {
			g.err = pw.Close()
		}
		s.fragWriters.Put(pw)
		s.fragRows.Put(rows)
	}
	g.frag = buf.Bytes()
}

// encodeStringSamples writes rows (dense ids) as a fragment of string
// rows. Not pooled as the integer rows are: string ids are the rarer case.
func (w *BatchWriter) encodeStringSamples(buf *bytes.Buffer, rows []WeightedSampleRow) error {
	g := w.g
	str := func(v int64) string { return g.ExternalString(uint32(v)) }
	if w.meta.SampleEdgeWeight {
		out := make([]WeightedStringSampleRow, len(rows))
		for i, r := range rows {
			out[i] = WeightedStringSampleRow{InstanceID: r.InstanceID, Seed: str(r.Seed), Hop: r.Hop, Src: str(r.Src), Dst: str(r.Dst), EdgeWeight: r.EdgeWeight}
		}
		pw := parquet.NewGenericWriter[WeightedStringSampleRow](buf, w.samplePartOptions(0)...)
		if _, err := pw.Write(out); err != nil {
			return err
		}
		return pw.Close()
	}
	out := make([]StringSampleRow, len(rows))
	for i, r := range rows {
		out[i] = StringSampleRow{InstanceID: r.InstanceID, Seed: str(r.Seed), Hop: r.Hop, Src: str(r.Src), Dst: str(r.Dst)}
	}
	pw := parquet.NewGenericWriter[StringSampleRow](buf, w.samplePartOptions(0)...)
	if _, err := pw.Write(out); err != nil {
		return err
	}
	return pw.Close()
}

// appendSampleGroup waits for the oldest pending group's fragment and
// copies it into the part, opening a part when none is open and closing it
// once it reaches the file size.
func (w *BatchWriter) appendSampleGroup(ctx context.Context) error {
	s := w.samples
	g := s.pending[0]
	select {
	case <-g.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.pending[0] = nil
	s.pending = s.pending[1:]
	if g.err != nil {
		return fmt.Errorf("sink: encode sampled edges %d..%d: %w", s.written, s.written+int64(len(g.rows))-1, g.err)
	}
	if s.p == nil {
		if err := w.openSamplePart(); err != nil {
			return err
		}
	}
	p := s.p
	f, err := parquet.OpenFile(fragment(g.frag), int64(len(g.frag)))
	if err != nil {
		return fmt.Errorf("sink: reopen encoded sampled edges: %w", err)
	}
	rgs := f.RowGroups()
	if len(rgs) != 1 {
		return fmt.Errorf("sink: encoded sampled edges hold %d row groups", len(rgs))
	}
	switch {
	case s.spw != nil:
		_, err = s.spw.WriteRowGroup(rgs[0])
	case s.pww != nil:
		_, err = s.pww.WriteRowGroup(rgs[0])
	default:
		_, err = s.pw.WriteRowGroup(rgs[0])
	}
	if err != nil {
		return fmt.Errorf("sink: write %s: %w", p.key, err)
	}
	p.addRows(&s.written, len(g.rows))
	s.free = append(s.free, g.rows)
	if p.out.n >= w.cfg.fileBytes {
		return w.closeSamplePart()
	}
	return nil
}

// samplePartOptions configure the writers of part i and of the fragments
// copied into it (which need the codec, page version and row group size
// only; their metadata is not copied). The part writer's buffer stays at
// parquet-go's default: a part is closed by the bytes that have passed it,
// and the copied column chunks bypass it (countingWriter.ReadFrom).
func (w *BatchWriter) samplePartOptions(i int) []parquet.WriterOption {
	return w.rowPartOptions(i, OutputSamples, sampleRowGroupRows)
}

func (w *BatchWriter) openSamplePart() error {
	s := w.samples
	p, err := w.newPart(s.parts)
	if err != nil {
		return err
	}
	opts := w.samplePartOptions(s.parts)
	s.p = p
	switch {
	case w.g.HasStringIDs() && w.meta.SampleEdgeWeight:
		s.spw = parquet.NewGenericWriter[WeightedStringSampleRow](p.out, opts...)
	case w.g.HasStringIDs():
		s.spw = parquet.NewGenericWriter[StringSampleRow](p.out, opts...)
	case w.meta.SampleEdgeWeight:
		s.pww = parquet.NewGenericWriter[WeightedSampleRow](p.out, opts...)
	default:
		s.pw = parquet.NewGenericWriter[SampleRow](p.out, opts...)
	}
	s.parts++
	return nil
}

func (w *BatchWriter) closeSamplePart() error {
	s := w.samples
	p := s.p
	closeEncoder := func() error { return s.pw.Close() }
	switch {
	case s.spw != nil:
		closeEncoder = s.spw.Close
	case s.pww != nil:
		closeEncoder = s.pww.Close
	}
	err := w.sealPart(p, closeEncoder)
	s.p, s.pw, s.pww, s.spw = nil, nil, nil, nil
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
	for len(s.pending) > 0 {
		if err := w.appendSampleGroup(ctx); err != nil {
			return err
		}
	}
	if s.p != nil {
		return w.closeSamplePart()
	}
	return nil
}

// describeSamples completes a samples batch's manifest.
func (w *BatchWriter) describeSamples(m *output.Manifest) {
	s := w.samples
	m.Output, m.Instances, m.Edges, m.Walks = OutputSamples, s.instances, s.written, 0
}

// abortSamples abandons the part being written.
func (w *BatchWriter) abortSamples() {
	if s := w.samples; s != nil {
		// Encoders still running write only their own group's fragment.
		s.pending = nil
		if s.p != nil {
			w.abortPart(s.p)
			s.p, s.pw, s.pww, s.spw = nil, nil, nil, nil
		}
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
