package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/sink/pages"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// Row is one walk as stored in Parquet: the schema readers see is
//
//	walk_id INT64, start INT64, length INT32,
//	walk LIST<INT64> (standard three-level list: walk.list.element)
//
// with start and walk in external vertex ids and length the number of steps
// taken (len(walk)-1). Encodings (not part of the schema): walk_id and
// start DELTA_BINARY_PACKED, length PLAIN, the walk values as WithWalkEncoding
// says; data pages v1, no dictionaries. Row reads any of them back; the
// writer encodes row groups itself (pages.go).
type Row struct {
	WalkID int64   `parquet:"walk_id,delta"`
	Start  int64   `parquet:"start"`
	Length int32   `parquet:"length"`
	Walk   []int64 `parquet:"walk,list" parquet-element:",delta"`
}

// StringRow is one walk of a graph with string ids as stored in Parquet:
//
//	walk_id INT64, start STRING, length INT32,
//	walk LIST<STRING> (walk.list.element)
//
// with start and walk the vertices' string ids (BYTE_ARRAY, logical type
// STRING, dictionary-encoded: each row group's dictionary holds the
// vertices it visits). StringRow reads them back.
type StringRow struct {
	WalkID int64    `parquet:"walk_id,delta"`
	Start  string   `parquet:"start,dict"`
	Length int32    `parquet:"length"`
	Walk   []string `parquet:"walk,list" parquet-element:",dict"`
}

// Keys of the Parquet file key-value metadata.
const (
	MetaBatchID          = "walkstage.batch_id"
	MetaGraph            = "walkstage.graph"
	MetaGraphVersion     = "walkstage.graph_version"
	MetaAlgorithm        = "walkstage.algorithm" // JSON, as in the manifest
	MetaSeed             = "walkstage.seed"
	MetaEngine           = "walkstage.engine"
	MetaWalkstageVersion = "walkstage.version"
	MetaPart             = "walkstage.part"
)

// BatchMeta describes a batch. Walk ids of the batch are 0..Walks-1, each
// written exactly once.
type BatchMeta struct {
	BatchID string
	// Graph and GraphVersion default to the graph's Name and Version.
	Graph, GraphVersion string
	Algorithm           walk.Algorithm
	Seed                uint64
	Engine              string
	WalkstageVersion    string
	Walks               int64
	// Fingerprint identifies the request (a digest of everything that
	// determines the walks, computed by the caller). It is recorded in the
	// manifest; a batch id whose manifest holds another fingerprint is not
	// overwritten (ErrBatchConflict), and Lookup finds a batch already
	// written for the same one. Empty means unknown: the batch is then
	// written with last-writer-wins semantics, as before fingerprints.
	Fingerprint string
	// Queries > 0 makes the batch an output "visits" batch of that many
	// query rows, written by WriteVisits (sink/visits.go); Walks is then 0.
	Queries int64
	// Sample makes the batch a graph sampling batch (sink/samples.go) of
	// Instances instances, written by WriteSamples, its rows carrying the
	// edge weight when SampleEdgeWeight; Algorithm, Walks and Queries are
	// then zero.
	Sample           *graphsample.SampleParams
	Instances        int64
	SampleEdgeWeight bool
	// Times adds the times column, LIST<INT64> parallel to walk: a
	// temporal request with with_times. Every chunk must carry its walks'
	// times (walk.Chunk.Times).
	Times bool
	// EdgeOffsets is the watermark of the live graph snapshot walked
	// (livegraph.Snapshot.Watermark), recorded in the manifest. The
	// graph given to NewBatchWriter must then name the snapshot's
	// vertices, added ones included (livegraph.Snapshot.Naming).
	EdgeOffsets map[int32]int64
}

var (
	// ErrReorderWindow is returned by Write when walks arrive so far out of
	// walk id order that the memory limit is reached while the oldest row
	// group still misses walks (see WithMemoryLimit).
	ErrReorderWindow = errors.New("walks arrived too far out of order for the sink's memory limit")
	// ErrBadChunk is wrapped when a chunk breaks the walk.Chunk contract or
	// the batch's bounds (walk ids, vertex ids, walk lengths). It is the
	// page encoder's pages.ErrBadChunk, which reports the vertex ids and
	// the walks missing from or repeated in a row group.
	ErrBadChunk = pages.ErrBadChunk
	// ErrAborted is the cause recorded when Abort is called.
	ErrAborted = errors.New("batch write aborted")
)

// BatchWriter writes one batch. Write hands it chunks as the engine emits
// them; encoding runs on WithEncoders goroutines and one goroutine uploads
// parts in order. Commit completes the batch; Abort (or any error) cancels
// it. A BatchWriter is used by one batch only.
//
// Reproducibility: row i of the batch is walk i. Row groups cover fixed walk
// id ranges [k*R, (k+1)*R); a row group is encoded once all its walks have
// arrived, rows in walk id order, and row groups are appended to parts in
// order, a part being rolled after the row group that reaches the file
// size. Nothing depends on chunk arrival order or timing, so the same walks
// give byte-identical parts, and manifests that differ only in the part
// names' attempt ids. The cost is a reorder window:
// walks ahead of the oldest incomplete row group wait in memory (see
// WithMemoryLimit).
type BatchWriter struct {
	bucket *blob.Bucket
	layout output.Layout
	meta   BatchMeta
	g      *graph.Graph
	cfg    config
	rows   int64 // walks per row group
	groups int64 // row groups in the batch

	// attempt names this writer's parts (see Layout.AttemptPartKey);
	// started is when it began, the cutoff for deleting other attempts'
	// parts after a manifest replace.
	attempt string
	started time.Time
	// local is the directory of a file:// bucket opened by
	// store.OpenBucket, written directly (see store.LocalFile), staging its staging directory and
	// tag the batch's prefix of staging file names; all empty for other
	// buckets.
	local, staging, tag string

	partOpts []parquet.WriterOption // the part writers' options; fragments match them, so copies are verbatim
	buf      *Buffers               // encoders, fragments (returned once appended to a part) and write buffers
	kv       [][2]string

	ctx    context.Context // the pipeline's; cancelled on failure
	cancel context.CancelFunc
	work   chan *group
	wg     sync.WaitGroup // encoders, the uploader and the removal of leftovers
	swept  chan struct{}  // closed once earlier attempts' leftovers are removed
	// sweepOnCleanup: earlier attempts' leftovers are removed when this
	// attempt ends without a manifest, not at open (S3 and other stores).
	sweepOnCleanup bool
	done           chan struct{} // closed when the uploader returns

	mu          sync.Mutex
	err         error
	open        map[int64]*group
	used        int64 // bytes held, see WithMemoryLimit
	peak        int64 // the most used has been
	wake        chan struct{}
	next        int64 // the row group the uploader waits for
	encoding    int   // row groups being encoded
	received    int64
	closed      bool
	written     []string            // parts completed in this attempt, for Abort's cleanup
	abortErr    error               // failure to abort an S3 multipart upload
	files       map[int]output.File // completed parts by index
	queued      int                 // row groups handed to part goroutines, not yet written
	partsOpened int                 // owned by uploadLoop
	manifest    *output.Manifest
	committed   bool
	tidied      chan struct{} // closed when the removal after Commit ends (WithTidyAfterCommit)
	visits      *visitState   // output visits (BatchMeta.Queries > 0), else nil
	samples     *sampleState  // graph samples (BatchMeta.Sample set), else nil
	algo        output.AlgorithmMeta

	walksWritten atomic.Int64
	bytesWritten atomic.Int64
	copiedLent   atomic.Int64 // vertices of lent chunks copied (detach)
	sumsCombined atomic.Int64 // part bytes whose CRC32C the encoders computed (pages.SectionSum)
}

// group is one row group being collected, encoded and uploaded.
type group struct {
	index   int64
	base    uint64
	rows    int
	got     int
	segs    []segment
	staged  int64
	started bool // created by the uploader waiting for it, or by Write

	dispatched bool
	ready      chan struct{} // closed when encoded (or failed)
	frag       []byte
	sums       []pages.SectionSum // frag's column chunks' CRC32Cs
	steps      int64
	err        error
}

// segment is walks [lo, hi) of a chunk.
type segment struct {
	c      *heldChunk
	lo, hi int
}

// heldChunk is a chunk the writer holds. refs counts its segments not yet
// encoded, plus one for the Write filing them: at zero no encoder reads it
// any more and it goes to the release callback (WithChunkRelease).
type heldChunk struct {
	walk.Chunk
	refs atomic.Int32
}

// detach copies walks [lo, hi) of a lent chunk into a chunk of the
// writer's own, held by the one segment that will hold it.
func (w *BatchWriter) detach(c *walk.Chunk, lo, hi int) *heldChunk {
	v0, v1 := c.Offsets[lo], c.Offsets[hi]
	w.copiedLent.Add(int64(v1 - v0))
	d := &heldChunk{Chunk: walk.Chunk{Tag: c.Tag, WalkIDs: slices.Clone(c.WalkIDs[lo:hi]),
		Offsets: make([]uint32, hi-lo+1), Vertices: slices.Clone(c.Vertices[v0:v1])}}
	if c.Starts != nil {
		d.Starts = slices.Clone(c.Starts[lo:hi])
	}
	if c.Times != nil {
		d.Times = slices.Clone(c.Times[v0:v1])
	}
	for k, o := range c.Offsets[lo : hi+1] {
		d.Offsets[k] = o - v0
	}
	d.refs.Store(1)
	return d
}

// unref drops one reference to c, releasing it with the last.
func (w *BatchWriter) unref(c *heldChunk) {
	if c.refs.Add(-1) == 0 && w.cfg.release != nil {
		w.cfg.release(c.Chunk)
	}
}

// NewBatchWriter starts writing a batch under prefix. It deletes nothing a
// manifest lists: its parts have names of their own (see
// Layout.AttemptPartKey), and only Commit's manifest makes them the batch.
// It removes what killed writers of the batch left behind, when older than
// WithStaleAfter: local temporary files and open S3 multipart uploads.
func NewBatchWriter(ctx context.Context, b *blob.Bucket, prefix string, meta BatchMeta, g *graph.Graph, opts ...Option) (*BatchWriter, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if g == nil {
		return nil, errors.New("sink: nil graph")
	}
	if meta.Graph == "" {
		meta.Graph = g.Name
	}
	if meta.GraphVersion == "" {
		meta.GraphVersion = g.Version
	}
	algoMeta := output.DescribeAlgorithm(meta.Algorithm, g)
	if meta.Sample != nil {
		if err := validateSampleMeta(meta, g); err != nil {
			return nil, fmt.Errorf("sink: batch %s: %w", meta.BatchID, err)
		}
		algoMeta = DescribeSample(*meta.Sample)
	} else if err := meta.Algorithm.Validate(g); err != nil {
		return nil, fmt.Errorf("sink: batch %s: %w", meta.BatchID, err)
	}
	if meta.Walks < 0 || meta.Queries < 0 || meta.Queries > 0 && meta.Walks != 0 || meta.Sample == nil && meta.Instances != 0 {
		return nil, fmt.Errorf("sink: batch %s: %d walks, %d queries", meta.BatchID, meta.Walks, meta.Queries)
	}
	kind := output.KindWalks
	switch {
	case meta.Sample != nil:
		kind = output.KindSamples
	case meta.Queries > 0:
		kind = output.KindVisits
	}
	layout, err := output.BatchLayout(prefix, kind, meta.Graph, algoMeta.Name, meta.BatchID)
	if err != nil {
		return nil, fmt.Errorf("sink: batch %s: %w", meta.BatchID, err)
	}
	algoJSON, err := json.Marshal(algoMeta)
	if err != nil {
		return nil, err
	}
	algo := string(algoJSON)
	w := &BatchWriter{bucket: b, layout: layout, meta: meta, g: g, cfg: cfg, attempt: newAttemptID(), started: time.Now(),
		rows: int64(cfg.rowsPerGroup(meta.Algorithm.Length)),
		open: map[int64]*group{}, files: map[int]output.File{}, wake: make(chan struct{}), done: make(chan struct{}), buf: cfg.buffers}
	if w.buf == nil {
		w.buf = NewBuffers(0)
	}
	if meta.Queries > 0 {
		w.visits = &visitState{}
	}
	if meta.Sample != nil {
		if w.samples, err = w.newSampleState(); err != nil {
			return nil, err
		}
	}
	w.algo = algoMeta
	w.groups = (meta.Walks + w.rows - 1) / w.rows
	// A row group is encoded once all its walks are held, so the limit must
	// fit one full row group and the start of the next, or even walks in
	// perfect order would fail with ErrReorderWindow.
	if group := w.rows * (int64(meta.Algorithm.Length+1)*4 + 12); cfg.memoryLimit < 2*group {
		return nil, fmt.Errorf("sink: memory limit %d bytes is below two row groups of %d walks of up to %d steps (%d bytes): raise the limit or lower the row group size",
			cfg.memoryLimit, w.rows, meta.Algorithm.Length, 2*group)
	}
	w.kv = [][2]string{
		{MetaBatchID, meta.BatchID}, {MetaGraph, meta.Graph}, {MetaGraphVersion, meta.GraphVersion},
		{MetaAlgorithm, algo}, {MetaSeed, strconv.FormatUint(meta.Seed, 10)}, {MetaEngine, meta.Engine},
		{MetaWalkstageVersion, meta.WalkstageVersion},
	}
	w.partOpts = []parquet.WriterOption{
		parquet.Compression(partCodec(cfg.compression)),
		parquet.MaxRowsPerRowGroup(w.rows),
		parquet.DataPageVersion(1),
		// No buffer of parquet-go's own: each part's comes from w.buf
		// (openPart).
		parquet.WriteBufferSize(-1),
		parquet.CreatedBy("walkstage", meta.WalkstageVersion, ""),
	}
	w.cfg.walkEncoding = resolveWalkEncoding(cfg.walkEncoding)
	if g.HasStringIDs() {
		// The walk encodings are integer encodings: a graph with string
		// ids writes its walks as dictionary-encoded strings (StringRow).
		w.cfg.walkEncoding = pages.StringDictionary
	}
	if _, err = pages.FileSchemaFor(w.cfg.walkEncoding, meta.Times); err != nil {
		return nil, fmt.Errorf("sink: batch %s: %w", meta.BatchID, err)
	}
	if root, ok := store.LocalRoot(b); ok {
		if _, ok := store.LocalPath(root, layout.SuccessKey()); ok {
			w.local, w.staging, w.tag = root, store.LocalStaging(root, prefix), store.StagingTag(layout.Dir)
		}
	}
	w.swept = make(chan struct{})
	if w.local == "" {
		// A store's leftovers are multipart uploads of killed attempts.
		// A commit that stands aborts every upload under the batch
		// (abortOtherUploads), so sweeping here too would only cost each
		// batch a listing request; an attempt that ends without a manifest
		// sweeps instead (cleanup), which keeps the rule that the next
		// attempt at a batch removes what a killed one left.
		w.sweepOnCleanup = true
		close(w.swept)
	} else if !cfg.sweepWhileWriting {
		err := w.removeLeftovers(ctx)
		close(w.swept)
		if err != nil {
			return nil, err
		}
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if cfg.sweepWhileWriting && !w.sweepOnCleanup {
		// Not w.ctx: Abort and a failed Commit wait for the removal (its
		// calls are bounded by the call timeout) rather than cut it short,
		// as they would have waited in NewBatchWriter.
		sweepCtx := context.WithoutCancel(ctx)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer close(w.swept)
			if err := w.removeLeftovers(sweepCtx); err != nil {
				w.fail(err)
			}
		}()
	}
	w.work = make(chan *group, cfg.encoders)
	for range cfg.encoders {
		w.wg.Add(1)
		go w.encodeLoop()
	}
	w.wg.Add(1)
	go w.uploadLoop()
	return w, nil
}

// Layout is where the batch is written.
func (w *BatchWriter) Layout() output.Layout { return w.layout }

// WalksWritten is the number of walks in row groups written into parts so
// far; the upload of the part holding the last of them may still be
// completing.
func (w *BatchWriter) WalksWritten() int64 { return w.walksWritten.Load() }

// PeakHeldBytes is the most memory the writer has accounted for at once
// (see WithMemoryLimit).
func (w *BatchWriter) PeakHeldBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

// CopiedLentVertices is how many walk vertices of lent chunks
// (walk.Chunk.Lent) the writer copied so far, to keep walks that wait for
// walks beyond the chunk's lent run (walk.Chunk.LentRunEnd).
func (w *BatchWriter) CopiedLentVertices() int64 { return w.copiedLent.Load() }

// BytesWritten is the number of Parquet bytes handed to the bucket so far.
func (w *BatchWriter) BytesWritten() int64 { return w.bytesWritten.Load() }

// fail records the first error and stops the pipeline.
func (w *BatchWriter) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		w.cancel()
		close(w.wake)
		w.wake = make(chan struct{})
	}
	return w.err
}

func (w *BatchWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// signal wakes Writes waiting for memory; call with mu held.
func (w *BatchWriter) signal() {
	close(w.wake)
	w.wake = make(chan struct{})
}

// groupLocked returns row group i, creating it; call with mu held.
func (w *BatchWriter) groupLocked(i int64) *group {
	gr := w.open[i]
	if gr == nil {
		gr = &group{index: i, base: uint64(i * w.rows), rows: int(min(w.rows, w.meta.Walks-i*w.rows)), ready: make(chan struct{})}
		w.open[i] = gr
	}
	return gr
}

// Write adds a chunk of the batch's walks. It returns once the chunk is
// queued (the writer owns its slices from then on, until it releases them:
// WithChunkRelease), blocking while the memory limit is reached. Write may
// be called from several goroutines.
func (w *BatchWriter) Write(ctx context.Context, c walk.Chunk) error {
	// A chunk not filed goes back at once (WithChunkRelease).
	releaseNow := func() {
		if w.cfg.release != nil {
			w.cfg.release(c)
		}
	}
	if err := w.checkChunk(&c); err != nil {
		releaseNow()
		return w.fail(err)
	}
	if c.Len() == 0 {
		releaseNow()
		return nil
	}
	need := chunkBytes(&c, 0, c.Len())
	if err := w.reserve(ctx, need); err != nil {
		releaseNow()
		return err
	}
	var copies map[int]*heldChunk
	if c.Lent {
		copies = w.detachWaiting(&c)
	}
	h := &heldChunk{Chunk: c}
	h.refs.Store(1)
	var ready []*group
	if err := w.stage(h, need, &ready, copies); err != nil {
		// Walks filed before the failure are held by their groups, which
		// stop gives back; this drops Write's own reference.
		w.unref(h)
		return err
	}
	// Write's own reference: the encoders hold the chunk from here on.
	defer w.unref(h)
	// Hand complete row groups to the encoders outside the lock: encoders
	// take the lock to report, so a send under it could deadlock.
	for _, gr := range ready {
		select {
		case w.work <- gr:
		case <-w.ctx.Done():
			return w.failed()
		case <-ctx.Done():
			return w.fail(ctx.Err())
		}
	}
	return nil
}

// groupSpan is the row group of chunk c's walk lo and the end of the run
// of c's walks in it.
func (w *BatchWriter) groupSpan(c *walk.Chunk, lo int) (gi int64, hi int) {
	gi = int64(c.WalkIDs[lo] / uint64(w.rows))
	end := uint64(gi+1) * uint64(w.rows)
	hi = lo + 1
	for hi < c.Len() && c.WalkIDs[hi] < end {
		hi++
	}
	return gi, hi
}

// waitsOnEngine reports whether n walks of lent chunk c, filed under row
// group gi of rows walks that already holds got, would wait for walks the
// engine emits only once it has lent buffers back: the group stays
// incomplete and ends beyond the chunk's lent run (walk.Chunk.LentRunEnd).
// Such walks must be copied (detach); others may stay in the engine's
// buffer until their group is encoded.
func (w *BatchWriter) waitsOnEngine(c *walk.Chunk, gi int64, got, n, rows int) bool {
	return got+n < rows && uint64(gi*w.rows)+uint64(rows) > c.LentRunEnd
}

// detachWaiting copies the walks of lent chunk c that will wait on the
// engine (waitsOnEngine) in row groups this chunk does not complete
// (detach), keyed by their first index in c. The copies are made outside the lock: made under it, from
// the engine's pinned buffers, they held up every encoder reporting a row
// group (a trace of the scale-22 one-shot: 1.5 s of encoders' waiting on
// the lock in 0.52 s). A group found waiting may be completed by another
// Write meanwhile, which leaves a copy unneeded, not wrong; a group found
// complete stays so (any other walk of it would be a duplicate), and stage
// copies under the lock whatever it was not given.
func (w *BatchWriter) detachWaiting(c *walk.Chunk) map[int]*heldChunk {
	type span struct{ lo, hi int }
	var waiting []span
	w.mu.Lock()
	for lo := 0; lo < c.Len(); {
		gi, hi := w.groupSpan(c, lo)
		got, rows := 0, int(min(w.rows, w.meta.Walks-gi*w.rows))
		if gr := w.open[gi]; gr != nil {
			got = gr.got
		}
		if w.waitsOnEngine(c, gi, got, hi-lo, rows) {
			waiting = append(waiting, span{lo, hi})
		}
		lo = hi
	}
	w.mu.Unlock()
	if len(waiting) == 0 {
		return nil
	}
	copies := make(map[int]*heldChunk, len(waiting))
	for _, sp := range waiting {
		copies[sp.lo] = w.detach(c, sp.lo, sp.hi)
	}
	return copies
}

// stage files the chunk's walks under their row groups and collects the
// row groups it completes; copies are detached walks of a lent chunk
// (detachWaiting).
func (w *BatchWriter) stage(c *heldChunk, need int64, ready *[]*group, copies map[int]*heldChunk) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.used -= need
		return errors.New("sink: write after commit or abort")
	}
	w.received += int64(c.Len())
	for lo := 0; lo < c.Len(); {
		gi, hi := w.groupSpan(&c.Chunk, lo)
		gr := w.groupLocked(gi)
		if gr.dispatched || gr.got+(hi-lo) > gr.rows {
			return w.failLocked(fmt.Errorf("%w: row group %d (walks %d..%d) receives more than %d walks: a walk was written twice",
				ErrBadChunk, gi, gr.base, gr.base+uint64(gr.rows)-1, gr.rows))
		}
		seg := segment{c, lo, hi}
		switch d := copies[lo]; {
		case d != nil && d.Len() == hi-lo:
			seg = segment{d, 0, hi - lo}
		case c.Lent && w.waitsOnEngine(&c.Chunk, gi, gr.got, hi-lo, gr.rows):
			// The group waits for later chunks, which the engine makes
			// only once it has this one's buffer back: keep a copy.
			seg = segment{w.detach(&c.Chunk, lo, hi), 0, hi - lo}
		default:
			c.refs.Add(1)
		}
		gr.segs = append(gr.segs, seg)
		gr.got += hi - lo
		gr.staged += chunkBytes(&c.Chunk, lo, hi)
		if gr.got == gr.rows {
			gr.dispatched = true
			w.encoding++
			*ready = append(*ready, gr)
		}
		lo = hi
	}
	return nil
}

func (w *BatchWriter) failLocked(err error) error {
	if w.err == nil {
		w.err = err
		w.cancel()
		w.signal()
	}
	return w.err
}

// reserve waits until need bytes fit under the memory limit.
func (w *BatchWriter) reserve(ctx context.Context, need int64) error {
	for {
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return err
		}
		if w.used == 0 || w.used+need <= w.cfg.memoryLimit {
			w.used += need
			w.peak = max(w.peak, w.used)
			w.mu.Unlock()
			return nil
		}
		// Waiting helps only if memory will be released without more input:
		// the uploader's next row group is complete, or encoders are
		// shrinking staged walks into compressed pages.
		nextReady := w.next < w.groups && w.open[w.next] != nil && w.open[w.next].dispatched
		if !nextReady && w.encoding == 0 && w.queued == 0 {
			held := w.used
			w.mu.Unlock()
			return w.fail(fmt.Errorf("sink: batch %s: %w: %d bytes held waiting for walks of row group %d (walk ids from %d); raise the limit (now %d bytes) or emit walks in id order",
				w.meta.BatchID, ErrReorderWindow, held, w.next, w.next*w.rows, w.cfg.memoryLimit))
		}
		wake := w.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// chunkBytes is the memory held by walks [lo, hi) of c.
func chunkBytes(c *walk.Chunk, lo, hi int) int64 {
	per := int64(12) // walk id, offset
	if c.Starts != nil {
		per += 4
	}
	perVertex := int64(4)
	if c.Times != nil {
		perVertex += 8
	}
	return int64(hi-lo)*per + int64(c.Offsets[hi]-c.Offsets[lo])*perVertex
}

// checkChunk validates the structure of a chunk and its walk ids; vertex
// ids are checked while encoding.
func (w *BatchWriter) checkChunk(c *walk.Chunk) error {
	n := c.Len()
	if len(c.Offsets) != n+1 || c.Offsets[0] != 0 || int(c.Offsets[n]) != len(c.Vertices) {
		return fmt.Errorf("%w: %d walks, %d offsets, %d vertices", ErrBadChunk, n, len(c.Offsets), len(c.Vertices))
	}
	if c.Starts != nil && len(c.Starts) != n {
		return fmt.Errorf("%w: %d walks, %d starts", ErrBadChunk, n, len(c.Starts))
	}
	if w.meta.Times && len(c.Times) != len(c.Vertices) {
		return fmt.Errorf("%w: %d times for %d vertices, and the batch writes times", ErrBadChunk, len(c.Times), len(c.Vertices))
	}
	maxLen := uint32(w.meta.Algorithm.Length) + 1
	for k := range n {
		if l := c.Offsets[k+1] - c.Offsets[k]; l == 0 || l > maxLen || c.Offsets[k+1] < c.Offsets[k] {
			return fmt.Errorf("%w: walk %d has %d vertices, want 1..%d", ErrBadChunk, c.WalkIDs[k], int32(l), maxLen)
		}
		if c.WalkIDs[k] >= uint64(w.meta.Walks) {
			return fmt.Errorf("%w: walk id %d beyond the batch's %d walks", ErrBadChunk, c.WalkIDs[k], w.meta.Walks)
		}
		if k > 0 && c.WalkIDs[k] <= c.WalkIDs[k-1] {
			return fmt.Errorf("%w: walk ids not ascending (%d after %d)", ErrBadChunk, c.WalkIDs[k], c.WalkIDs[k-1])
		}
	}
	return nil
}

// encodeLoop encodes complete row groups into standalone one-row-group
// Parquet files ("fragments") that the uploader splices into parts.
func (w *BatchWriter) encodeLoop() {
	defer w.wg.Done()
	e, err := w.buf.encoder(w.encoderConfig())
	if err != nil {
		w.fail(fmt.Errorf("sink: %w", err))
		return
	}
	defer w.buf.putEncoder(e)
	var rg pages.RowGroup
	for {
		select {
		case gr := <-w.work:
			rg = pages.RowGroup{Index: gr.index, Base: gr.base, Rows: gr.rows, Staged: gr.staged, Segments: rg.Segments[:0]}
			for _, sg := range gr.segs {
				rg.Segments = append(rg.Segments, pages.Segment{Chunk: &sg.c.Chunk, Lo: sg.lo, Hi: sg.hi})
			}
			done := w.buf.turn()
			frag, steps, err := e.Encode(w.buf.frag(), &rg)
			done()
			clear(rg.Segments) // the chunks go back to their owner below
			sums := slices.Clone(e.Sums())
			for _, sg := range gr.segs {
				w.unref(sg.c)
			}
			w.mu.Lock()
			staged := gr.staged
			gr.segs, gr.frag, gr.sums, gr.steps, gr.err = nil, frag, sums, steps, err
			w.used += int64(len(frag))
			w.peak = max(w.peak, w.used)
			w.used -= staged
			w.encoding--
			w.signal()
			w.mu.Unlock()
			// The error is the writer's before the uploader wakes: woken
			// first, it stopped, and a Commit in between found no error
			// and committed a batch without this row group.
			if err != nil {
				w.fail(err)
			}
			close(gr.ready)
		case <-w.ctx.Done():
			return
		}
	}
}

// encoderConfig is how w's row groups are encoded.
func (w *BatchWriter) encoderConfig() pages.Config {
	return pages.Config{Graph: w.g, Compression: w.cfg.compression, ZstdLevel: w.cfg.zstdLevel,
		WalkEncoding: w.cfg.walkEncoding, GeneralPages: w.cfg.generalPages, Times: w.meta.Times}
}

// castagnoli is the CRC32C table; hash/crc32 uses the CPU's CRC32
// instruction for it, many GB/s, where SHA-256 cost the single upload
// goroutine more than writing the bytes.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)
