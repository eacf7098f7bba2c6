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
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/sink/pages"
)

// OutputSamples is the manifest's "output" of a samples batch.
const OutputSamples = "samples"

// sampleRowGroupRows is the number of edges per row group: 0.75 MiB of
// staged columns (12 bytes an edge, 20 with edge weights), one page a
// column.
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
// encoding only for FLOAT and DOUBLE: BenchmarkWriteSamples (2 cores,
// parquet-go's pages) wrote 3.68 bytes an edge, against 3.50 split, 4.21
// with src delta encoded too (its runs' jumps set each miniblock's width)
// and 4.16 PLAIN everywhere. The pages are written by sink/pages'
// SampleEncoder (3.64 bytes an edge there), the part by parquet-go's
// writer of this type, which copies them verbatim.
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
// count alone (sampleRowGroupRows edges): each call's columns are copied
// into row groups of the writer's own (dense ids, checked against the
// graph), several row groups at once, and each full row group is encoded
// on its own goroutine by sink/pages' SampleEncoder into a standalone
// Parquet fragment. One goroutine (appendSamples) takes the fragments in
// order, while the caller of WriteSamples copies the next rows, and hands
// them to the part they fall in: a part ends with the fragment that brings
// its fragments' bytes to the file size. Each part is written by a
// goroutine of its own through parquet-go's verbatim row group copy, up to
// WithParallelParts at once: one goroutine writing every part into the
// store was the serial bound (0.22 of 1.6 core-s of the writer in a
// profile of a 64.5 M-edge sample on the 2-core VM). Fragment sizes depend
// on their rows alone, so the parts are the same bytes whatever the number
// of encoders or the calls' sizes.
type sampleState struct {
	cur       *sampleGroup // the row group being filled, if any
	instances int64        // handed to WriteSamples
	// queue takes row groups being encoded to the appender, in order; it
	// holds one per encoder, and a caller waits for room: about twice the
	// encoders' count of groups are in use at once (WriteSamples copies a
	// window of groups at a time). nil until the first group.
	queue    chan *sampleGroup
	appended chan struct{} // closed when the appender has stopped
	// freed are appended groups, whose buffers the next groups reuse.
	freed chan *sampleGroup
	cfg   pages.SampleConfig
	// The appender's own until it has stopped (appended is closed).
	appendErr error
	written   int64       // edges handed to parts
	part      chan sample // to the part being filled; nil between parts
	size      int64       // its fragments' bytes
	parts     int
	// partsDone counts the parts' goroutines, each holding one of slots
	// (WithParallelParts).
	partsDone sync.WaitGroup
	slots     chan struct{}
	// times are SampleWriteTimes' (nanoseconds).
	encodeWait, partWait, partWrite, finishDrain, finishParts atomic.Int64
}

// SampleWriteTimes say where a samples batch's writing waited, for debug
// logs: which of the encoders, the parts' goroutines (one at a time per
// part) and Commit's end bounds a sample written to Parquet.
type SampleWriteTimes struct {
	// EncodeWait is the appender waiting for the next row group's encoding
	// (row groups are handed to parts in order).
	EncodeWait time.Duration
	// PartWait is the appender waiting for a part's goroutine to take a
	// fragment (its lag full) or for a part's slot (WithParallelParts).
	PartWait time.Duration
	// PartWrite is the parts' goroutines copying fragments into their
	// objects, summed over parts.
	PartWrite time.Duration
	// FinishDrain is Commit encoding the last rows and handing every
	// fragment to its part; FinishParts the parts' goroutines finishing
	// their objects after that.
	FinishDrain, FinishParts time.Duration
}

// SampleWriteTimes returns where the batch's sample writing has waited so
// far (zero for a batch of walks). Safe for concurrent use.
func (w *BatchWriter) SampleWriteTimes() SampleWriteTimes {
	s := w.samples
	if s == nil {
		return SampleWriteTimes{}
	}
	return SampleWriteTimes{EncodeWait: time.Duration(s.encodeWait.Load()), PartWait: time.Duration(s.partWait.Load()),
		PartWrite: time.Duration(s.partWrite.Load()), FinishDrain: time.Duration(s.finishDrain.Load()),
		FinishParts: time.Duration(s.finishParts.Load())}
}

// sample is an encoded row group on its way to its part: edges base ..
// base+rows-1 of the batch.
type sample struct {
	frag       []byte
	rg         parquet.RowGroup // frag opened (openSampleFragment)
	sums       []pages.SectionSum
	base, rows int64
}

// sampleGroup is one row group of edges, being filled or encoded.
type sampleGroup struct {
	rows pages.SampleRows
	frag []byte
	rg   parquet.RowGroup
	sums []pages.SectionSum
	err  error
	done chan struct{}
}

// newSampleState prepares w to write samples: the part schema the
// fragments carry.
func (w *BatchWriter) newSampleState() (*sampleState, error) {
	schema, err := sampleSchemas[sampleVariant(w.g.HasStringIDs(), w.meta.SampleEdgeWeight)]()
	if err != nil {
		return nil, fmt.Errorf("sink: sample schema: %w", err)
	}
	return &sampleState{freed: make(chan *sampleGroup, 2*w.cfg.encoders+4), slots: make(chan struct{}, w.cfg.parallelParts),
		cfg: pages.SampleConfig{Graph: w.g, Compression: w.cfg.compression, ZstdLevel: w.cfg.zstdLevel,
			Weights: w.meta.SampleEdgeWeight, Schema: schema}}, nil
}

// sampleVariant numbers the four sample schemas: string ids or integers,
// with edge weights or without.
func sampleVariant(strs, weights bool) int { return 2*btoi(strs) + btoi(weights) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// newSamplePartWriter returns parquet-go's writer of a samples part of
// the variant (sampleVariant), into which fragments are copied.
func newSamplePartWriter(variant int, out io.Writer, opts ...parquet.WriterOption) pages.RowGroupWriter {
	switch variant {
	case 1:
		return parquet.NewGenericWriter[WeightedSampleRow](out, opts...)
	case 2:
		return parquet.NewGenericWriter[StringSampleRow](out, opts...)
	case 3:
		return parquet.NewGenericWriter[WeightedStringSampleRow](out, opts...)
	}
	return parquet.NewGenericWriter[SampleRow](out, opts...)
}

// sampleSchemas are the footer schemas of the part writers, by variant,
// computed once.
var sampleSchemas = func() (s [4]func() ([]format.SchemaElement, error)) {
	for v := range s {
		s[v] = sync.OnceValues(func() ([]format.SchemaElement, error) {
			var buf bytes.Buffer
			if err := newSamplePartWriter(v, &buf).Close(); err != nil {
				return nil, err
			}
			f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				return nil, err
			}
			return f.Metadata().Schema, nil
		})
	}
	return s
}()

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
	if err := ctx.Err(); err != nil {
		return w.fail(err)
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
	// the row groups in use stay about twice the encoders however large
	// the call: submitting a window's groups waits for earlier groups,
	// whose buffers the next window reuses.
	window := int64(w.cfg.encoders+1) * sampleRowGroupRows
	off := c.Offsets
	for k0 := 0; k0 < n; {
		// The window's instances: at least one, then as many as fit.
		k1 := k0 + 1
		if lim := off[k0] + window; off[k1] <= lim {
			k1 = k0 + sort.Search(n-k0, func(j int) bool { return off[k0+j+1] > lim })
		}
		full, err := w.stageSamples(first, seeds, c, k0, k1)
		if err != nil {
			return w.fail(err)
		}
		for _, g := range full {
			if err := w.submitSampleGroup(ctx, g); err != nil {
				return w.fail(err)
			}
		}
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

// newSampleGroup is an empty row group: one the writer appended before,
// else a new one.
func (w *BatchWriter) newSampleGroup() *sampleGroup {
	select {
	case g := <-w.samples.freed:
		g.rows.Reset()
		g.err, g.done = nil, nil
		return g
	default:
	}
	g := &sampleGroup{rows: pages.SampleRows{Hop: make([]int32, 0, sampleRowGroupRows),
		Src: make([]uint32, 0, sampleRowGroupRows), Dst: make([]uint32, 0, sampleRowGroupRows)}}
	if w.meta.SampleEdgeWeight {
		g.rows.Edge = make([]uint64, 0, sampleRowGroupRows)
	}
	return g
}

// sampleRowsSerial is the most edges a window copies on the caller's
// goroutine; larger windows are copied a row group a goroutine (a serial
// loop was a quarter of a 59 M-edge sample's writing on the 16-core host).
const sampleRowsSerial = 1 << 14

// stageSamples copies the edges of c's instances k0 .. k1-1 (instance
// first+k for k) after the rows already staged, into row groups of the
// writer's own, and returns those it filled; the last one, not full, stays
// for the next call.
func (w *BatchWriter) stageSamples(first int64, seeds []int64, c *graphsample.Columns, k0, k1 int) ([]*sampleGroup, error) {
	s := w.samples
	off := c.Offsets
	type piece struct {
		g      *sampleGroup
		x0, x1 int64
	}
	var pieces []piece
	var full []*sampleGroup
	g, have := s.cur, int64(0)
	if g != nil {
		have = int64(g.rows.Rows())
	}
	for x, end := off[k0], off[k1]; x < end; {
		if g == nil {
			g, have = w.newSampleGroup(), 0
		}
		m := min(end-x, sampleRowGroupRows-have)
		pieces = append(pieces, piece{g, x, x + m})
		x, have = x+m, have+m
		if have == sampleRowGroupRows {
			full = append(full, g)
			g = nil
		}
	}
	s.cur = g
	if err := w.checkSeeds(seeds[k0:k1]); err != nil {
		return nil, err
	}
	if len(pieces) <= 1 || off[k1]-off[k0] <= sampleRowsSerial {
		for _, pc := range pieces {
			if err := w.copySamples(&pc.g.rows, first, seeds, c, k0, k1, pc.x0, pc.x1); err != nil {
				return nil, err
			}
		}
		return full, nil
	}
	// The first failing piece's error is returned, so the error does not
	// depend on timing.
	errs := make([]error, len(pieces))
	var wg sync.WaitGroup
	for i, pc := range pieces {
		wg.Go(func() { errs[i] = w.copySamples(&pc.g.rows, first, seeds, c, k0, k1, pc.x0, pc.x1) })
	}
	wg.Wait()
	return full, firstError(errs)
}

// checkSeeds checks the seeds of a graph with string ids, dense ids that
// the encoder looks up.
func (w *BatchWriter) checkSeeds(seeds []int64) error {
	if !w.g.HasStringIDs() {
		return nil
	}
	nv := int64(w.g.NumVertices())
	for _, sd := range seeds {
		if sd < 0 || sd >= nv {
			return fmt.Errorf("sink: batch %s: %w: seed %d beyond the graph", w.meta.BatchID, ErrBadChunk, sd)
		}
	}
	return nil
}

// copySamples appends rows x0 .. x1-1 of c, edges of instances among k0 ..
// k1-1, to r, and checks their vertices (and edges, for weights) against
// the graph. The rows start an instance unless r is empty.
func (w *BatchWriter) copySamples(r *pages.SampleRows, first int64, seeds []int64, c *graphsample.Columns, k0, k1 int, x0, x1 int64) error {
	off := c.Offsets
	base := int64(r.Rows()) - x0
	k := k0 + sort.Search(k1-k0, func(j int) bool { return off[k0+j+1] > x0 })
	for ; k < k1 && off[k] < x1; k++ {
		if at := max(off[k], x0); at < off[k+1] {
			r.Starts = append(r.Starts, int32(at+base))
			r.IDs = append(r.IDs, first+int64(k))
			r.Seeds = append(r.Seeds, seeds[k])
		}
	}
	r.Hop = append(r.Hop, c.Hop[x0:x1]...)
	r.Src = append(r.Src, c.Src[x0:x1]...)
	r.Dst = append(r.Dst, c.Dst[x0:x1]...)
	hi := max(pages.MaxUint32(c.Src[x0:x1]), pages.MaxUint32(c.Dst[x0:x1]))
	if hi >= uint32(w.g.NumVertices()) {
		for x := x0; x < x1; x++ {
			if src, dst := c.Src[x], c.Dst[x]; max(src, dst) == hi {
				return fmt.Errorf("sink: batch %s: %w: edge %d->%d beyond the graph", w.meta.BatchID, ErrBadChunk, src, dst)
			}
		}
	}
	if w.meta.SampleEdgeWeight {
		r.Edge = append(r.Edge, c.Edge[x0:x1]...)
		ne := uint64(len(w.g.Targets))
		var top uint64
		for _, e := range c.Edge[x0:x1] {
			top = max(top, e)
		}
		if top >= ne {
			for x := x0; x < x1; x++ {
				if c.Edge[x] >= ne {
					return fmt.Errorf("sink: batch %s: %w: edge %d->%d (edge %d) beyond the graph", w.meta.BatchID, ErrBadChunk, c.Src[x], c.Dst[x], c.Edge[x])
				}
			}
		}
	}
	return nil
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

// flushSamples hands the staged rows to an encoder as one row group.
func (w *BatchWriter) flushSamples(ctx context.Context) error {
	s := w.samples
	g := s.cur
	s.cur = nil
	if g == nil || g.rows.Rows() == 0 {
		return nil
	}
	return w.submitSampleGroup(ctx, g)
}

// submitSampleGroup starts encoding g as the next row group and queues it
// for the appender, waiting while the queue is full.
func (w *BatchWriter) submitSampleGroup(ctx context.Context, g *sampleGroup) error {
	s := w.samples
	if s.queue == nil {
		s.queue, s.appended = make(chan *sampleGroup, w.cfg.encoders), make(chan struct{})
		w.wg.Add(1)
		go w.appendSamples()
	}
	g.done = make(chan struct{})
	go w.encodeSampleGroup(g)
	select {
	case s.queue <- g:
		return nil
	case <-s.appended:
		// Stopped by a failure, the appender's or another.
		if err := w.failed(); err != nil {
			return err
		}
		return errors.New("sink: samples appender stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appendSamples hands the queued row groups' fragments to their parts, in
// order, until the queue is closed (finishSamples) or the writer stops.
func (w *BatchWriter) appendSamples() {
	defer w.wg.Done()
	s := w.samples
	defer close(s.appended)
	defer func() {
		if s.part != nil {
			close(s.part)
			s.part = nil
		}
	}()
	for {
		select {
		case g, ok := <-s.queue:
			if !ok {
				return
			}
			if err := w.handSampleGroup(g); err != nil {
				s.appendErr = err
				w.fail(err)
				return
			}
		case <-w.ctx.Done():
			return
		}
	}
}

// encodeSampleGroup encodes g's rows as a fragment.
func (w *BatchWriter) encodeSampleGroup(g *sampleGroup) {
	defer close(g.done)
	e, err := w.buf.sampleEncoder(w.samples.cfg)
	if err != nil {
		g.err = err
		return
	}
	defer w.buf.putSampleEncoder(e)
	done := w.buf.turn()
	g.frag, g.err = e.Encode(w.buf.frag(), &g.rows)
	done()
	g.sums = append(g.sums[:0], e.Sums()...)
	if g.err == nil {
		// Opened here, on one of many encoders, rather than by the part's
		// goroutine, which copies a part's fragments one after another:
		// decoding each fragment's footer was a third of that goroutine's
		// CPU (CPU profile of the neighbour [25, 10] command on the H200
		// host), and that goroutine bounds the command while its lag is full.
		g.rg, g.err = openSampleFragment(g.frag)
	}
}

// openSampleFragment opens an encoded fragment's one row group.
func openSampleFragment(frag []byte) (parquet.RowGroup, error) {
	pf, err := parquet.OpenFile(fragment(frag), int64(len(frag)))
	if err != nil {
		return nil, fmt.Errorf("reopen encoded sampled edges: %w", err)
	}
	rgs := pf.RowGroups()
	if len(rgs) != 1 {
		return nil, fmt.Errorf("encoded sampled edges hold %d row groups", len(rgs))
	}
	return rgs[0], nil
}

// handSampleGroup waits for g's fragment and hands it to its part,
// starting the part's goroutine for its first one.
func (w *BatchWriter) handSampleGroup(g *sampleGroup) error {
	s := w.samples
	t := time.Now()
	select {
	case <-g.done:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	s.encodeWait.Add(int64(time.Since(t)))
	rows := int64(g.rows.Rows())
	if g.err != nil {
		return fmt.Errorf("sink: encode sampled edges %d..%d: %w", s.written, s.written+rows-1, g.err)
	}
	f := sample{frag: g.frag, rg: g.rg, sums: g.sums, base: s.written, rows: rows}
	s.written += rows
	g.frag, g.rg, g.sums = nil, nil, nil
	select {
	case s.freed <- g:
	default: // left to the collector
	}
	t = time.Now()
	defer func() { s.partWait.Add(int64(time.Since(t))) }()
	if s.part == nil {
		select {
		case s.slots <- struct{}{}:
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
		// As the walks' parts (openPart): a part's goroutine may lag 64
		// fragments (about 15 MiB) behind, the next part starting meanwhile.
		// (256 changed nothing on the H200 host: the appender waited for
		// the parts 0.5-0.8 ms in a 59 M-edge neighbour sample.)
		s.part, s.size = make(chan sample, 64), 0
		w.wg.Add(1)
		s.partsDone.Add(1)
		go w.writeSamplePart(s.parts, s.part)
		s.parts++
	}
	select {
	case s.part <- f:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	if s.size += int64(len(f.frag)); s.size >= w.cfg.fileBytes {
		close(s.part)
		s.part = nil
	}
	return nil
}

// writeSamplePart writes part index from the fragments in, then completes
// its object; on failure or cancellation it abandons the upload.
// Fragments the object holds (store.HeldWriter) are reused only once it is
// complete.
func (w *BatchWriter) writeSamplePart(index int, in <-chan sample) {
	defer w.wg.Done()
	defer w.samples.partsDone.Done()
	defer func() { <-w.samples.slots }()
	p, err := w.newPart(index)
	if err != nil {
		w.fail(err)
		return
	}
	pw := newSamplePartWriter(sampleVariant(w.g.HasStringIDs(), w.meta.SampleEdgeWeight), p.out, w.samplePartOptions(index)...)
	var kept [][]byte
	for {
		select {
		case f, ok := <-in:
			if !ok {
				if w.ctx.Err() != nil {
					w.abortPart(p)
					return
				}
				if err := w.sealPart(p, pw.Close); err != nil {
					w.fail(err)
					return
				}
				for _, f := range kept {
					w.buf.putFrag(f)
				}
				w.walksWritten.Add(p.file.Rows)
				return
			}
			t := time.Now()
			err := w.appendSample(p, pw, f)
			w.samples.partWrite.Add(int64(time.Since(t)))
			if err != nil {
				w.fail(err)
				w.abortPart(p)
				return
			}
			if p.out.held {
				kept = append(kept, f.frag)
				p.out.held = false
			} else {
				w.buf.putFrag(f.frag)
			}
		case <-w.ctx.Done():
			w.abortPart(p)
			return
		}
	}
}

// appendSample copies f's row group into part p (writer pw).
func (w *BatchWriter) appendSample(p *part, pw pages.RowGroupWriter, f sample) error {
	p.out.known, p.out.knownOf = f.sums, &f.frag[0]
	_, err := pw.WriteRowGroup(f.rg)
	p.out.known, p.out.knownOf = nil, nil
	if err != nil {
		return fmt.Errorf("sink: write %s: %w", p.key, err)
	}
	if p.file.FirstWalkID < 0 {
		p.file.FirstWalkID = f.base
	}
	p.file.LastWalkID = f.base + f.rows - 1
	p.file.Rows += f.rows
	p.file.RowGroups++
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

// finishSamples writes what is buffered and closes the last part before
// Commit lists the parts.
func (w *BatchWriter) finishSamples(ctx context.Context) error {
	s := w.samples
	if s.instances != w.meta.Instances {
		return fmt.Errorf("sink: batch %s: %w: %d of %d instances written", w.meta.BatchID, ErrBadChunk, s.instances, w.meta.Instances)
	}
	t := time.Now()
	if err := w.flushSamples(ctx); err != nil {
		return err
	}
	if s.queue != nil {
		close(s.queue)
		select {
		case <-s.appended:
		case <-ctx.Done():
			return ctx.Err()
		}
		if s.appendErr != nil {
			return s.appendErr
		}
	}
	s.finishDrain.Store(int64(time.Since(t)))
	t = time.Now()
	// The parts' goroutines complete their objects or, once the writer
	// has failed, abandon them.
	s.partsDone.Wait()
	s.finishParts.Store(int64(time.Since(t)))
	return w.failed()
}

// describeSamples completes a samples batch's manifest.
func (w *BatchWriter) describeSamples(m *output.Manifest) {
	s := w.samples
	m.Output, m.Instances, m.Edges, m.Walks = OutputSamples, s.instances, s.written, 0
}

// abortSamples drops the rows being staged. The parts' goroutines
// abandon their objects when the writer stops (cleanup stops it first);
// encoders still running write only their own group's fragment.
func (w *BatchWriter) abortSamples() {
	if s := w.samples; s != nil {
		s.cur = nil
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
