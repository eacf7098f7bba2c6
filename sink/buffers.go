package sink

import (
	"bufio"
	"io"
	"sync"
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
type Buffers struct {
	encoders sync.Pool // *fragmentEncoder, detached from its writer
	frags    sync.Pool // *[]byte, empty
	writes   sync.Pool // *bufio.Writer of partWriteBuffer bytes, detached
}

// NewBuffers returns an empty Buffers.
func NewBuffers() *Buffers { return &Buffers{} }

// partWriteBuffer is the size of a part's write buffer: row groups are
// spliced through it, and at parquet-go's default (4 KiB) writing a part
// took one system call per 4 KiB.
const partWriteBuffer = 1 << 20

// encoder returns a fragment encoder for w, reused when one with w's codec
// is free.
func (b *Buffers) encoder(w *BatchWriter) (*fragmentEncoder, error) {
	if e, ok := b.encoders.Get().(*fragmentEncoder); ok && e.codec.kind == w.cfg.compression && e.codec.level == w.cfg.zstdLevel {
		e.attach(w)
		return e, nil
	}
	return newFragmentEncoder(w)
}

func (b *Buffers) putEncoder(e *fragmentEncoder) {
	e.w, e.schema, e.out, e.zeros = nil, nil, nil, 0
	b.encoders.Put(e)
}

// frag returns an empty fragment buffer, reused if one is free: fresh
// memory costs page faults that the 16-core profile showed.
func (b *Buffers) frag() []byte {
	if f, ok := b.frags.Get().(*[]byte); ok {
		return (*f)[:0]
	}
	return nil
}

func (b *Buffers) putFrag(f []byte) {
	if cap(f) > 0 {
		b.frags.Put(&f)
	}
}

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
