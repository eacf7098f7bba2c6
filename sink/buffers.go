package sink

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"

	"github.com/walkstage/walkstage/sink/pages"
	"github.com/walkstage/walkstage/store"
)

// Buffers is memory that batch writers hand on from one batch to the next:
// the fragment encoders (page buffers, the zstd and Huffman state), the
// fragments and the parts' write buffers. A writer without WithBuffers
// keeps its own, so a stage that writes thousands of small batches gives
// all its writers one Buffers: each new writer's encoders otherwise
// allocated, and the kernel and the runtime zeroed, megabytes of fresh
// buffers per batch (7% of the GPU stage's CPU on the 16-core host, a
// backlog of 800,000-vertex requests to file://). The garbage collector
// may drop what is not in use, as with any sync.Pool. Safe for concurrent
// use.
//
// Buffers also bounds how many row groups its writers encode at once. Each
// writer runs an encoder per core, so with many batches in flight hundreds
// of encoders were runnable together, and the stage's own goroutines on the
// path from request to launch (the engine loop, opening writers, reading
// Kafka) queued behind them for milliseconds each (execution trace of the
// GPU stage on 16 cores: 13 s runnable over 3,000 writer openings).
// Encoders over the bound wait, not runnable, for a turn.
type Buffers struct {
	encoders sync.Pool      // *pages.Encoder, released by its writer
	samplers sync.Pool      // *pages.SampleEncoder, released by its writer
	frags    bytePool       // fragments
	writes   sync.Pool      // *bufio.Writer of partWriteBuffer bytes, detached
	objects  store.BodyPool // bodies of S3 objects sent in one request
	turns    chan struct{}  // a token per row group being encoded; nil: no bound
	// encoding counts the row groups being encoded; peak is its largest.
	encoding, peak atomic.Int64
}

// NewBuffers returns an empty Buffers whose writers encode at most
// encoding row groups at once (no bound when 0 or less).
func NewBuffers(encoding int) *Buffers {
	b := &Buffers{}
	if encoding > 0 {
		b.turns = make(chan struct{}, encoding)
	}
	return b
}

// turn waits until fewer than the bound's row groups are being encoded;
// the returned func ends the turn.
func (b *Buffers) turn() func() {
	if b.turns != nil {
		b.turns <- struct{}{}
	}
	n := b.encoding.Add(1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	return func() {
		b.encoding.Add(-1)
		if b.turns != nil {
			<-b.turns
		}
	}
}

// partWriteBuffer is the size of a part's write buffer: row groups are
// spliced through it, and at parquet-go's default (4 KiB) writing a part
// took one system call per 4 KiB.
const partWriteBuffer = 1 << 20

// encoder returns a fragment encoder for cfg, reused when one with cfg's
// codec is free.
func (b *Buffers) encoder(cfg pages.Config) (*pages.Encoder, error) {
	if e, ok := b.encoders.Get().(*pages.Encoder); ok {
		if ok, err := e.Reset(cfg); ok || err != nil {
			return e, err
		}
	}
	return pages.NewEncoder(cfg)
}

func (b *Buffers) putEncoder(e *pages.Encoder) {
	e.Release()
	b.encoders.Put(e)
}

// sampleEncoder returns a sample fragment encoder for cfg, reused when one
// with cfg's codec is free (a new one allocates its zstd state: a stage
// writing many small samples batches made one per row group encoded at
// once, each batch).
func (b *Buffers) sampleEncoder(cfg pages.SampleConfig) (*pages.SampleEncoder, error) {
	if e, ok := b.samplers.Get().(*pages.SampleEncoder); ok {
		if ok, err := e.Reset(cfg); ok || err != nil {
			return e, err
		}
	}
	return pages.NewSampleEncoder(cfg)
}

func (b *Buffers) putSampleEncoder(e *pages.SampleEncoder) {
	e.Release()
	b.samplers.Put(e)
}

// frag returns an empty fragment buffer, reused if one is free: fresh
// memory costs page faults that the 16-core profile showed.
func (b *Buffers) frag() []byte { return b.frags.get() }

func (b *Buffers) putFrag(f []byte) { b.frags.put(f) }

// writeBuffer returns a write buffer in front of out.
func (b *Buffers) writeBuffer(out io.Writer) *bufio.Writer {
	if bw, ok := b.writes.Get().(*bufio.Writer); ok {
		bw.Reset(out)
		return bw
	}
	return bufio.NewWriterSize(out, partWriteBuffer)
}

func (b *Buffers) putWriteBuffer(bw *bufio.Writer) {
	bw.Reset(nil)
	b.writes.Put(bw)
}

// bytePool recycles byte slices, handed out empty.
type bytePool struct{ p sync.Pool } // of *[]byte

func (p *bytePool) get() []byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

func (p *bytePool) put(b []byte) {
	if cap(b) > 0 {
		p.p.Put(&b)
	}
}
