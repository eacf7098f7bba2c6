package sink

import (
	"fmt"
	"runtime"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/sink/pages"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// Compression names a Parquet page codec: Zstd (the default), Snappy or
// None. The page encoder (sink/pages) defines it; the writer's options
// name it here so that callers configure the writer through one package.
type Compression = pages.Compression

// Page codecs; see pages.Compression.
const (
	Zstd   = pages.Zstd
	Snappy = pages.Snappy
	None   = pages.None
)

// ParseCompression accepts zstd, snappy or none (case-insensitive;
// "uncompressed" is none).
func ParseCompression(s string) (Compression, error) { return pages.ParseCompression(s) }

// partCodec is the part writer's codec for c.
func partCodec(c Compression) compress.Codec {
	switch c {
	case Snappy:
		return &parquet.Snappy
	case None:
		return &parquet.Uncompressed
	}
	// The fastest level: walks of random vertex ids compress about as well at
	// level 1 as at level 3, and encoding must keep up with the engine.
	return &pqzstd.Codec{Level: pqzstd.SpeedFastest}
}

// WalkEncoding names the Parquet encoding of the walk list's values (see
// pages.WalkEncoding, where the page encoder defines it).
type WalkEncoding = pages.WalkEncoding

// Walk encodings; see pages.WalkEncoding.
const (
	AutoWalkEncoding  = pages.AutoWalkEncoding
	DeltaBinaryPacked = pages.DeltaBinaryPacked
	ByteStreamSplit   = pages.ByteStreamSplit
)

// ParseWalkEncoding accepts delta_binary_packed (or delta),
// byte_stream_split (or split) and auto (or ""; the default, which is
// delta_binary_packed), case-insensitively.
func ParseWalkEncoding(s string) (WalkEncoding, error) { return pages.ParseWalkEncoding(s) }

// resolveWalkEncoding returns the encoding the writer uses for e.
func resolveWalkEncoding(e WalkEncoding) WalkEncoding {
	if e != AutoWalkEncoding {
		return e
	}
	return DeltaBinaryPacked
}

// Option configures a BatchWriter.
type Option func(*config)

type config struct {
	compression       Compression
	walkEncoding      WalkEncoding
	zstdLevel         zstd.EncoderLevel
	buffers           *Buffers
	dirCache          *output.DirCache
	sweepWhileWriting bool
	zstdLevelSet      int
	rowGroupRows      int
	fileBytes         int64
	memoryLimit       int64
	encoders          int
	uploadBuffer      int
	uploadParallel    int
	parallelParts     int
	callTimeout       time.Duration
	stallTimeout      time.Duration
	staleAfter        time.Duration
	release           func(walk.Chunk)
	tidyAsync         bool
	generalPages      bool // tests: no framedWalkPage, no framedDeltaPage
}

// withGeneralPages makes every walk page take the general path (tests
// compare framedWalkPage's and framedDeltaPage's bytes with it).
func withGeneralPages() Option { return func(o *config) { o.generalPages = true } }

// Defaults; see each option.
const (
	DefaultMaxRowGroupRows     = 64 << 10
	DefaultMaxRowGroupVertices = 81 << 14 // 16,384 walks of 80 steps
	DefaultFileBytes           = 64 << 20
	DefaultParallelParts       = 4
	DefaultMemoryLimit         = 512 << 20
	DefaultUploadBuffer        = 8 << 20
	DefaultCallTimeout         = store.DefaultCallTimeout
	DefaultUploadStallTimeout  = 60 * time.Second
	DefaultStaleAfter          = 15 * time.Minute
)

func defaultConfig() config {
	return config{
		compression:    Zstd,
		zstdLevel:      zstd.SpeedFastest,
		fileBytes:      DefaultFileBytes,
		memoryLimit:    DefaultMemoryLimit,
		encoders:       runtime.GOMAXPROCS(0),
		uploadBuffer:   DefaultUploadBuffer,
		uploadParallel: 4,
		parallelParts:  DefaultParallelParts,
		callTimeout:    DefaultCallTimeout,
		stallTimeout:   DefaultUploadStallTimeout,
		staleAfter:     DefaultStaleAfter,
	}
}

// WithCompression sets the page codec (default Zstd).
func WithCompression(c Compression) Option { return func(o *config) { o.compression = c } }

// WithWalkEncoding sets the encoding of the walk list's values (default
// AutoWalkEncoding, which is DeltaBinaryPacked; ByteStreamSplit is
// smaller under zstd, but DuckDB cannot read it). The other columns are
// fixed: walk_id and start DELTA_BINARY_PACKED, length PLAIN.
func WithWalkEncoding(e WalkEncoding) Option { return func(o *config) { o.walkEncoding = e } }

// WithZstdLevel sets the zstd level, 1 (fastest, the default) to 4 (best),
// when the compression is Zstd. It applies to the page segments the sink
// sends through the zstd encoder (levels, skewed byte streams); constant
// and near-uniform byte streams are stored as RLE and raw blocks at any
// level. On byte-stream-split walks of random 22-bit ids, level 3 gave the
// same size as level 1 (2.750 bytes per vertex for the values) for 1.1x the
// time (the 2-core development VM): what zstd gains there is entropy coding.
func WithZstdLevel(level int) Option {
	return func(o *config) { o.zstdLevel = zstd.EncoderLevelFromZstd(level); o.zstdLevelSet = level }
}

// WithRowGroupRows sets the number of walks per row group. The default holds
// at most 65,536 walks and at most 1,327,104 walk vertices (10 MiB of int64
// ids before compression, about 4 MiB compressed): 16,384 walks of 80
// steps. Row groups are the unit of parallel encoding; on a 16-core host
// this size encoded a 1M-walk batch 1.6x faster than row groups 3x larger,
// whose last groups leave most cores idle. Row group boundaries fall at
// fixed walk ids (multiples of this number), which is what makes the output
// independent of the order in which chunks arrive.
func WithRowGroupRows(n int) Option { return func(o *config) { o.rowGroupRows = n } }

// WithFileBytes sets the size at which a part is rolled (default 64 MiB):
// a part ends after the first row group that brings its encoded row groups
// to this size, so parts exceed it by at most one compressed row group and
// the file footer. A batch's tail, the row groups left once no more than
// the last full part's remain, is shared by four smaller parts written at
// once (tailShare).
func WithFileBytes(n int64) Option { return func(o *config) { o.fileBytes = n } }

// WithMemoryLimit bounds the walks held by the writer (default 512 MiB):
// chunks waiting for their row group to fill, row groups being encoded and
// encoded row groups waiting to be uploaded, counted at their in-memory
// size. Write blocks when the limit is reached and the pipeline can drain;
// when it cannot (the missing walks of the oldest row group have not
// arrived) Write fails with ErrReorderWindow. Beyond this limit each
// encoder holds one page buffer and one row group's compressed pages, and
// each part being uploaded one upload buffer per parallel upload.
func WithMemoryLimit(n int64) Option { return func(o *config) { o.memoryLimit = n } }

// WithEncoders sets the number of goroutines encoding row groups in
// parallel (default GOMAXPROCS).
func WithEncoders(n int) Option { return func(o *config) { o.encoders = n } }

// WithUploadBuffer sets the size of each upload part (S3 multipart part
// size; default 8 MiB) and how many parts upload in parallel (default 4).
func WithUploadBuffer(bytes, parallel int) Option {
	return func(o *config) { o.uploadBuffer, o.uploadParallel = bytes, parallel }
}

// WithParallelParts sets how many parts may upload at once (default 4;
// `walkstage walk` uses 8: with 64 MiB parts that doubled the parts in
// flight within the memory limit on the 16-core host).
// Each holds its own upload buffers (see WithUploadBuffer). Parts still
// hold consecutive walk ids and get the same keys and bytes as with one.
func WithParallelParts(n int) Option { return func(o *config) { o.parallelParts = n } }

// WithCallTimeout bounds each small object-store call of the writer:
// reading and writing the manifest, listing, deleting, checking a part's
// size, aborting a multipart upload (default 10 s). A store that does not
// answer in time turns into an error instead of a stall. Part uploads are
// bounded by WithUploadStallTimeout instead, as their duration grows with
// their size.
func WithCallTimeout(d time.Duration) Option { return func(o *config) { o.callTimeout = d } }

// WithUploadStallTimeout fails a part upload when the store has accepted
// none of its bytes for this long (default 60 s): every write into the
// upload and its completion must return within it. A deadline on
// progress rather than on the whole upload scales with the part's size.
func WithUploadStallTimeout(d time.Duration) Option { return func(o *config) { o.stallTimeout = d } }

// WithStaleAfter sets the age after which a multipart upload or a local
// temporary file of the batch, not written by this writer, is taken for
// the leftover of a killed process and removed when the batch is written
// again and that attempt ends without a manifest (a commit aborts every
// upload under the batch; default 15 minutes). It must exceed the longest part upload: a
// live writer's upload younger than this is never touched.
func WithStaleAfter(d time.Duration) Option { return func(o *config) { o.staleAfter = d } }

// WithTidyAfterCommit makes Commit return as soon as the batch's manifest
// is durable: what it then removes (parts of earlier attempts that the
// manifest does not list, multipart uploads still open under the batch)
// is removed on a goroutine, and Tidied says when that is done. The output
// is complete either way; the stage publishes its event meanwhile and
// waits for Tidied before it commits the request's offset, so a crash
// leaves no more behind than one between the manifest and the removal
// did. Without it, Commit does the removal itself.
func WithTidyAfterCommit() Option { return func(o *config) { o.tidyAsync = true } }

// WithChunkRelease hands each chunk that Write accepted to f once the
// writer reads none of its slices any more: after the last row group
// holding its walks is encoded (an empty chunk at once). The caller may
// then reuse the chunk's memory, e.g. give it back to the engine that
// emitted it (gpu.Engine.Release), instead of each chunk costing fresh
// memory. f runs on the writer's goroutines, several at a time, and must
// not block. Every chunk passed to Write comes back exactly once, also
// when Write fails (at once) or the batch fails or is aborted (once Abort,
// or the failed Commit, has stopped the writer's goroutines): an engine
// that lends chunks out of its own buffers (walk.Chunk.Lent) gets them
// all back. Defaults to none.
func WithChunkRelease(f func(walk.Chunk)) Option { return func(o *config) { o.release = f } }

// WithSweepWhileWriting makes NewBatchWriter return before the leftovers
// of earlier attempts (see NewBatchWriter) are removed: the removal runs
// while the batch is written, Commit waits for it, and a failure of it
// fails the batch at Commit instead of at NewBatchWriter. Each removal
// lists the store (an S3 request, or two local directories); the stage
// opens a launch's writers before it walks, and the removals held up every
// launch (a fifth of the GPU stage's engine loop in an execution trace of
// a backlog to file://). Nothing removed has this attempt's names. It
// concerns local stores only: on other stores the removal is part of the
// commit, or of an attempt that ends without one.
func WithSweepWhileWriting() Option { return func(o *config) { o.sweepWhileWriting = true } }

// WithDirCache makes Lookup take the directories above the batch
// directories from c, listing them again once c's listing is older than
// its TTL, and a writer add its own directory to c when it commits, so
// that its batch is found at once (see output.DirCache for what a
// directory made elsewhere within the TTL costs). Give one cache to the
// writers and lookups of one bucket. Defaults to none: every Lookup lists.
func WithDirCache(c *output.DirCache) Option { return func(o *config) { o.dirCache = c } }

// WithBuffers makes the writer take its encoders and buffers from b and
// give them back there, for the next writer given b (see Buffers).
func WithBuffers(b *Buffers) Option { return func(o *config) { o.buffers = b } }

func (c *config) validate() error {
	if c.callTimeout <= 0 || c.stallTimeout <= 0 || c.staleAfter <= 0 {
		return fmt.Errorf("sink: call timeout %v, upload stall timeout %v and stale age %v must be positive", c.callTimeout, c.stallTimeout, c.staleAfter)
	}
	if c.zstdLevelSet != 0 && (c.zstdLevelSet < 1 || c.zstdLevelSet > 4) {
		return fmt.Errorf("sink: zstd level %d, want 1 (fastest) to 4 (best)", c.zstdLevelSet)
	}
	switch c.walkEncoding {
	case AutoWalkEncoding, ByteStreamSplit, DeltaBinaryPacked:
	default:
		return fmt.Errorf("sink: unknown walk encoding %q", c.walkEncoding)
	}
	switch c.compression {
	case Zstd, Snappy, None:
	default:
		return fmt.Errorf("sink: unknown compression %q", c.compression)
	}
	if c.rowGroupRows < 0 {
		return fmt.Errorf("sink: row group rows %d < 0", c.rowGroupRows)
	}
	if c.fileBytes <= 0 {
		return fmt.Errorf("sink: file size %d must be positive", c.fileBytes)
	}
	if c.memoryLimit <= 0 {
		return fmt.Errorf("sink: memory limit %d must be positive", c.memoryLimit)
	}
	if c.encoders <= 0 {
		return fmt.Errorf("sink: %d encoders, want at least 1", c.encoders)
	}
	if c.parallelParts <= 0 {
		return fmt.Errorf("sink: %d parallel parts, want at least 1", c.parallelParts)
	}
	if c.uploadBuffer < 5<<20 || c.uploadParallel <= 0 {
		return fmt.Errorf("sink: upload buffer %d bytes x %d: S3 needs parts of at least 5 MiB and one upload", c.uploadBuffer, c.uploadParallel)
	}
	return nil
}

// rowsPerGroup resolves the row group size for walks of up to length steps.
func (c *config) rowsPerGroup(length int) int {
	if c.rowGroupRows > 0 {
		return c.rowGroupRows
	}
	return max(1, min(DefaultMaxRowGroupRows, DefaultMaxRowGroupVertices/(length+1)))
}
