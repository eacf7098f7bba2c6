package sink

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
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
	Sample           *walk.SampleParams
	Instances        int64
	SampleEdgeWeight bool
}

var (
	// ErrReorderWindow is returned by Write when walks arrive so far out of
	// walk id order that the memory limit is reached while the oldest row
	// group still misses walks (see WithMemoryLimit).
	ErrReorderWindow = errors.New("walks arrived too far out of order for the sink's memory limit")
	// ErrBadChunk is wrapped when a chunk breaks the walk.Chunk contract or
	// the batch's bounds (walk ids, vertex ids, walk lengths).
	ErrBadChunk = errors.New("invalid walk chunk")
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
	layout Layout
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
	// local is the directory of a file:// bucket opened by OpenBucket,
	// written directly (see local.go), staging its staging directory and
	// tag the batch's prefix of staging file names; all empty for other
	// buckets.
	local, staging, tag string

	partOpts []parquet.WriterOption // the part writers' options; fragments match them, so copies are verbatim
	schema   []format.SchemaElement // the footer schema of parts, reused by fragments
	frags    sync.Pool              // *[]byte fragment buffers, returned once appended to a part
	kv       [][2]string

	ctx    context.Context // the pipeline's; cancelled on failure
	cancel context.CancelFunc
	work   chan *group
	wg     sync.WaitGroup // encoders and the uploader
	done   chan struct{}  // closed when the uploader returns

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
	written     []string     // parts completed in this attempt, for Abort's cleanup
	abortErr    error        // failure to abort an S3 multipart upload
	files       map[int]File // completed parts by index
	queued      int          // row groups handed to part goroutines, not yet written
	partsOpened int          // owned by uploadLoop
	manifest    *Manifest
	committed   bool
	visits      *visitState  // output visits (BatchMeta.Queries > 0), else nil
	samples     *sampleState // graph samples (BatchMeta.Sample set), else nil
	algo        AlgorithmMeta

	walksWritten atomic.Int64
	bytesWritten atomic.Int64
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
	steps      int64
	err        error
}

// segment is walks [lo, hi) of a chunk.
type segment struct {
	c      *walk.Chunk
	lo, hi int
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
	algoMeta := DescribeAlgorithm(meta.Algorithm, g)
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
	layout, err := BatchLayout(prefix, meta.Graph, algoMeta.Name, meta.BatchID)
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
		open: map[int64]*group{}, files: map[int]File{}, wake: make(chan struct{}), done: make(chan struct{})}
	if meta.Queries > 0 {
		w.visits = &visitState{}
	}
	if meta.Sample != nil {
		w.samples = &sampleState{}
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
		parquet.Compression(cfg.compression.codec()),
		parquet.MaxRowsPerRowGroup(w.rows),
		parquet.DataPageVersion(1),
		// Row groups are spliced through this buffer: at parquet-go's
		// default (4 KiB) writing a part took one system call per 4 KiB.
		parquet.WriteBufferSize(1 << 20),
		parquet.CreatedBy("walkstage", meta.WalkstageVersion, ""),
	}
	w.cfg.walkEncoding = cfg.walkEncoding.resolve(cfg.compression)
	if w.schema, err = fileSchema(w.cfg.walkEncoding, w.partOpts); err != nil {
		return nil, fmt.Errorf("sink: batch %s: %w", meta.BatchID, err)
	}
	if root, ok := localRoot(b); ok {
		if _, ok := localPath(root, layout.SuccessKey()); ok {
			w.local, w.staging, w.tag = root, localStaging(root, prefix), batchTag(layout.Dir)
		}
	}
	if err := w.removeLeftovers(ctx); err != nil {
		return nil, err
	}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
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
func (w *BatchWriter) Layout() Layout { return w.layout }

// WalksWritten is the number of walks in parts uploaded so far.
func (w *BatchWriter) WalksWritten() int64 { return w.walksWritten.Load() }

// PeakHeldBytes is the most memory the writer has accounted for at once
// (see WithMemoryLimit).
func (w *BatchWriter) PeakHeldBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

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
// queued (the writer owns its slices from then on), blocking while the
// memory limit is reached. Write may be called from several goroutines.
func (w *BatchWriter) Write(ctx context.Context, c walk.Chunk) error {
	if err := w.checkChunk(&c); err != nil {
		return w.fail(err)
	}
	if c.Len() == 0 {
		return nil
	}
	need := chunkBytes(&c, 0, c.Len())
	if err := w.reserve(ctx, need); err != nil {
		return err
	}
	var ready []*group
	if err := w.stage(&c, need, &ready); err != nil {
		return err
	}
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

// stage files the chunk's walks under their row groups and collects the
// row groups it completes.
func (w *BatchWriter) stage(c *walk.Chunk, need int64, ready *[]*group) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.used -= need
		return errors.New("sink: write after commit or abort")
	}
	w.received += int64(c.Len())
	for lo := 0; lo < c.Len(); {
		gi := int64(c.WalkIDs[lo] / uint64(w.rows))
		end := uint64(gi+1) * uint64(w.rows)
		hi := lo + 1
		for hi < c.Len() && c.WalkIDs[hi] < end {
			hi++
		}
		gr := w.groupLocked(gi)
		if gr.dispatched || gr.got+(hi-lo) > gr.rows {
			return w.failLocked(fmt.Errorf("%w: row group %d (walks %d..%d) receives more than %d walks: a walk was written twice",
				ErrBadChunk, gi, gr.base, gr.base+uint64(gr.rows)-1, gr.rows))
		}
		gr.segs = append(gr.segs, segment{c, lo, hi})
		gr.got += hi - lo
		gr.staged += chunkBytes(c, lo, hi)
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
	return int64(hi-lo)*12 + int64(c.Offsets[hi]-c.Offsets[lo])*4
}

// checkChunk validates the structure of a chunk and its walk ids; vertex
// ids are checked while encoding.
func (w *BatchWriter) checkChunk(c *walk.Chunk) error {
	n := c.Len()
	if len(c.Offsets) != n+1 || c.Offsets[0] != 0 || int(c.Offsets[n]) != len(c.Vertices) {
		return fmt.Errorf("%w: %d walks, %d offsets, %d vertices", ErrBadChunk, n, len(c.Offsets), len(c.Vertices))
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
	e, err := newFragmentEncoder(w)
	if err != nil {
		w.fail(fmt.Errorf("sink: %w", err))
		return
	}
	for {
		select {
		case gr := <-w.work:
			e.out = w.getFrag()
			frag, steps, err := e.encode(gr)
			e.out = nil
			w.mu.Lock()
			staged := gr.staged
			gr.segs, gr.frag, gr.steps, gr.err = nil, frag, steps, err
			w.used += int64(len(frag))
			w.peak = max(w.peak, w.used)
			w.used -= staged
			w.encoding--
			w.signal()
			w.mu.Unlock()
			close(gr.ready)
			if err != nil {
				w.fail(err)
			}
		case <-w.ctx.Done():
			return
		}
	}
}

// part is the object being uploaded.
type part struct {
	index  int
	key    string
	in     chan *group // row groups to append, closed after the last
	ow     objectWriter
	s3     s3Target
	cancel context.CancelCauseFunc
	out    *countingWriter
	pw     rowGroupWriter
	file   File
}

// getFrag returns an empty fragment buffer, reused if one is free: fresh
// memory costs page faults that the 16-core profile showed.
func (w *BatchWriter) getFrag() []byte {
	if b, ok := w.frags.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func (w *BatchWriter) putFrag(b []byte) {
	if cap(b) > 0 {
		w.frags.Put(&b)
	}
}

// castagnoli is the CRC32C table; hash/crc32 uses the CPU's CRC32
// instruction for it, many GB/s, where SHA-256 cost the single upload
// goroutine more than writing the bytes.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PartCRC32C computes a part's checksum in the manifest's form.
func PartCRC32C(data []byte) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(data, castagnoli)))
}

type countingWriter struct {
	w     io.Writer
	h     hash.Hash
	n     int64
	total *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	c.total.Add(int64(n))
	return n, err
}

// uploadLoop assigns encoded row groups to parts in row group order and
// hands them to one goroutine per part, so that up to WithParallelParts
// objects upload at once (an object store serves several objects faster
// than one, and completing a multipart upload is a round trip of its own).
// A part ends after the row group that brings its encoded row groups to
// the file size: fragment sizes are deterministic, so the split is too.
func (w *BatchWriter) uploadLoop() {
	defer w.wg.Done()
	defer close(w.done)
	var parts sync.WaitGroup
	defer parts.Wait()
	slots := make(chan struct{}, w.cfg.parallelParts)
	var p *part
	var size int64
	defer func() {
		if p != nil {
			close(p.in)
		}
	}()
	for gi := int64(0); gi < w.groups; gi++ {
		w.mu.Lock()
		gr := w.groupLocked(gi)
		w.next = gi
		w.signal()
		w.mu.Unlock()
		select {
		case <-gr.ready:
		case <-w.ctx.Done():
			return
		}
		if gr.err != nil {
			return
		}
		if p == nil {
			select {
			case slots <- struct{}{}:
			case <-w.ctx.Done():
				return
			}
			var err error
			if p, err = w.openPart(w.partsOpened); err != nil {
				<-slots
				w.fail(err)
				return
			}
			w.partsOpened++
			size = 0
			parts.Add(1)
			go func(p *part) {
				defer parts.Done()
				defer func() { <-slots }()
				w.partLoop(p)
			}(p)
		}
		// Forget the group and move on in one step, so a Write checking
		// whether waiting can help never sees a gap; its bytes stay
		// counted until the part goroutine has written them.
		w.mu.Lock()
		delete(w.open, gi)
		w.next = gi + 1
		w.queued++
		w.signal()
		w.mu.Unlock()
		size += int64(len(gr.frag)) // before the handover: the part goroutine drops frag
		select {
		case p.in <- gr:
		case <-w.ctx.Done():
			return
		}
		if size >= w.cfg.fileBytes || gi == w.groups-1 {
			close(p.in)
			p = nil
		}
	}
	w.mu.Lock()
	w.next = w.groups
	w.mu.Unlock()
}

// partLoop writes one part's row groups, then completes the object; on
// failure or cancellation it abandons the upload.
func (w *BatchWriter) partLoop(p *part) {
	for {
		select {
		case gr, ok := <-p.in:
			if !ok {
				if w.ctx.Err() != nil {
					w.abortPart(p)
					return
				}
				if err := w.closePart(p); err != nil {
					w.fail(err)
				}
				return
			}
			err := w.appendGroup(p, gr)
			w.mu.Lock()
			w.used -= int64(len(gr.frag))
			w.queued--
			w.signal()
			w.mu.Unlock()
			w.putFrag(gr.frag)
			gr.frag = nil
			if err != nil {
				w.fail(err)
				w.abortPart(p)
				return
			}
		case <-w.ctx.Done():
			w.abortPart(p)
			return
		}
	}
}

func (w *BatchWriter) openPart(i int) (*part, error) {
	key := w.layout.AttemptPartKey(i, w.attempt)
	ctx, cancel := context.WithCancelCause(w.ctx)
	p := &part{index: i, key: key, cancel: cancel, file: File{Key: key, FirstWalkID: -1}, in: make(chan *group, 64)}
	ow, err := w.newObject(ctx, key, false, &blob.WriterOptions{
		ContentType:    "application/vnd.apache.parquet",
		BufferSize:     w.cfg.uploadBuffer,
		MaxConcurrency: w.cfg.uploadParallel,
		BeforeWrite:    p.s3.beforeWrite,
	})
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("sink: create %s: %w", key, err)
	}
	ow = &stallGuard{objectWriter: ow, ctx: ctx, d: w.cfg.stallTimeout, cancel: cancel}
	out := &countingWriter{w: ow, h: crc32.New(castagnoli), total: &w.bytesWritten}
	opts := append(w.partOpts[:len(w.partOpts):len(w.partOpts)], parquet.KeyValueMetadata(MetaPart, strconv.Itoa(i)))
	for _, kv := range w.kv {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	p.ow, p.out, p.pw = ow, out, newPartWriter(w.cfg.walkEncoding, out, opts...)
	return p, nil
}

func (w *BatchWriter) appendGroup(p *part, gr *group) error {
	f, err := parquet.OpenFile(bytes.NewReader(gr.frag), int64(len(gr.frag)))
	if err != nil {
		return fmt.Errorf("sink: reopen encoded row group %d: %w", gr.index, err)
	}
	rgs := f.RowGroups()
	if len(rgs) != 1 {
		return fmt.Errorf("sink: encoded row group %d holds %d row groups", gr.index, len(rgs))
	}
	if _, err := p.pw.WriteRowGroup(rgs[0]); err != nil {
		return fmt.Errorf("sink: write %s: %w", p.key, err)
	}
	if p.file.FirstWalkID < 0 {
		p.file.FirstWalkID = int64(gr.base)
	}
	p.file.LastWalkID = int64(gr.base) + int64(gr.rows) - 1
	p.file.Rows += int64(gr.rows)
	p.file.Steps += gr.steps
	p.file.RowGroups++
	w.walksWritten.Add(int64(gr.rows))
	return nil
}

func (w *BatchWriter) closePart(p *part) error {
	defer p.cancel(nil)
	if err := p.pw.Close(); err != nil {
		w.abortPart(p)
		return fmt.Errorf("sink: finish %s: %w", p.key, err)
	}
	if err := p.ow.Close(); err != nil {
		w.abortPart(p)
		return fmt.Errorf("sink: upload %s: %w", p.key, err)
	}
	p.file.Bytes = p.out.n
	p.file.CRC32C = base64.StdEncoding.EncodeToString(p.out.h.Sum(nil))
	w.mu.Lock()
	w.files[p.index] = p.file
	w.written = append(w.written, p.key)
	w.mu.Unlock()
	return nil
}

// abortPart abandons a part's upload: a local temporary file is removed,
// cancelling the writer's context makes gocloud discard a bucket upload,
// and open S3 multipart uploads are aborted explicitly.
func (w *BatchWriter) abortPart(p *part) {
	p.cancel(nil)
	p.ow.Abort()
	if err := p.s3.abortUploads(context.WithoutCancel(w.ctx), w.bucket, w.cfg.callTimeout); err != nil {
		w.mu.Lock()
		w.abortErr = err
		w.mu.Unlock()
	}
}

// Commit waits for every walk to be uploaded and writes `_SUCCESS` last,
// with a create-if-absent put, so that of several writers of one batch id
// (replicas given the same request, a redelivery racing the original)
// exactly one manifest wins and it lists exactly one attempt's parts:
//
//   - no manifest yet: ours is written; other attempts' parts left in the
//     batch directory are then deleted (best effort), so directory readers
//     such as DuckDB's read_parquet('.../part-*') see only listed parts.
//   - a complete manifest with our fingerprint: our parts are deleted and
//     that manifest is returned as if ours.
//   - a complete manifest with another fingerprint: our parts are deleted
//     and the error wraps ErrBatchConflict; nothing else is touched.
//   - a manifest without a fingerprint (written before fingerprints, or by
//     a writer given none), an incomplete one (a listed part missing or of
//     the wrong size) or an unreadable one: replaced by ours, then the
//     parts older than this writer that ours does not list are deleted.
//     Concurrent writers of such a batch are last-writer-wins, as before.
//
// Every walk id of the batch must have been written. On error the batch is
// aborted: this attempt's parts are deleted, nothing else.
func (w *BatchWriter) Commit(ctx context.Context) (*Manifest, error) {
	w.mu.Lock()
	if w.committed {
		m := w.manifest
		w.mu.Unlock()
		return m, nil
	}
	if w.closed {
		w.mu.Unlock()
		return nil, errors.New("sink: commit after abort")
	}
	w.closed = true
	received := w.received
	w.mu.Unlock()
	if w.visits != nil {
		if err := w.finishVisits(ctx); err != nil {
			w.fail(err)
			return nil, w.finishAbort(ctx)
		}
	}
	if w.samples != nil {
		if err := w.finishSamples(ctx); err != nil {
			w.fail(err)
			return nil, w.finishAbort(ctx)
		}
	}
	if received != w.meta.Walks {
		w.fail(fmt.Errorf("sink: batch %s: %w: %d of %d walks written", w.meta.BatchID, ErrBadChunk, received, w.meta.Walks))
		return nil, w.finishAbort(ctx)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		w.fail(ctx.Err())
		return nil, w.finishAbort(ctx)
	}
	if err := w.failed(); err != nil {
		return nil, w.finishAbort(ctx)
	}
	w.stop()
	files := make([]File, len(w.files))
	for i := range files {
		f, ok := w.files[i]
		if !ok {
			w.fail(fmt.Errorf("sink: batch %s: part %d missing after upload", w.meta.BatchID, i))
			return nil, w.finishAbort(ctx)
		}
		files[i] = f
	}
	m := &Manifest{Version: ManifestVersion, BatchID: w.meta.BatchID, Graph: w.meta.Graph, GraphVersion: w.meta.GraphVersion,
		Algorithm: w.algo, Seed: w.meta.Seed, Fingerprint: w.meta.Fingerprint,
		Engine: w.meta.Engine, WalkstageVersion: w.meta.WalkstageVersion, Compression: string(w.cfg.compression),
		Walks: w.meta.Walks, Files: files}
	if w.visits != nil {
		w.describeVisits(m)
	}
	if w.samples != nil {
		w.describeSamples(m)
	}
	for _, f := range m.Files {
		m.Steps += f.Steps
		m.Bytes += f.Bytes
	}
	final, err := w.publish(ctx, m)
	if err != nil {
		// Our parts are nobody's: no manifest of ours lists them.
		w.fail(err)
		return nil, w.finishAbort(context.WithoutCancel(ctx))
	}
	w.mu.Lock()
	w.committed, w.manifest = true, final
	w.mu.Unlock()
	return final, nil
}

// stop ends the pipeline's goroutines and waits for them.
func (w *BatchWriter) stop() {
	w.cancel()
	w.wg.Wait()
}

// Abort cancels the batch: the part being uploaded is abandoned (an S3
// multipart upload is aborted, a local temporary file removed), parts this
// writer completed are deleted, and no `_SUCCESS` is written. Nothing
// another writer wrote is touched: an earlier complete output of the batch
// stays as it was. It is safe to call after Commit failed, and a no-op
// after Commit succeeded.
func (w *BatchWriter) Abort(ctx context.Context) error {
	w.mu.Lock()
	if w.committed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.fail(ErrAborted)
	_, err := w.cleanup(ctx)
	return err
}

// finishAbort cleans up after a failed Commit and returns the failure.
func (w *BatchWriter) finishAbort(ctx context.Context) error {
	cause, err := w.cleanup(ctx)
	if err != nil {
		return fmt.Errorf("%w (and %v)", cause, err)
	}
	return cause
}

// cleanup stops the pipeline and deletes the parts this attempt completed;
// it returns the recorded failure and any cleanup error.
func (w *BatchWriter) cleanup(ctx context.Context) (cause, err error) {
	w.stop()
	w.abortVisits()
	w.abortSamples()
	w.mu.Lock()
	keys := w.written
	w.written = nil
	cause = w.err
	if w.abortErr != nil {
		err, w.abortErr = fmt.Errorf("sink: batch %s: %w", w.meta.BatchID, w.abortErr), nil
	}
	w.mu.Unlock()
	if err != nil {
		return cause, err
	}
	for _, k := range keys {
		if err := w.deleteKey(ctx, k); err != nil {
			return cause, fmt.Errorf("sink: batch %s: delete %s: %w", w.meta.BatchID, k, err)
		}
	}
	return cause, nil
}
