package sink

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/sink/pages"
	"github.com/walkstage/walkstage/store"
)

// part is the object being uploaded.
type part struct {
	index  int
	key    string
	in     chan *group // row groups to append, closed after the last
	ow     store.Object
	s3     store.S3Target
	cancel context.CancelCauseFunc
	out    *countingWriter
	pw     pages.RowGroupWriter
	bw     *bufio.Writer // between pw and out, for parts of fragments
	file   output.File
}

// PartCRC32C computes a part's checksum in the manifest's form.
func PartCRC32C(data []byte) string { return store.CRC32CString(crc32.Checksum(data, castagnoli)) }

// countingWriter counts and checksums (CRC32C) what goes to a part.
type countingWriter struct {
	w     io.Writer
	crc   uint32 // CRC32C of the bytes written
	n     int64
	total *atomic.Int64
	// known are the CRC32Cs of sections of the fragment starting at
	// knownOf, being copied: such a section's sum is combined, not
	// computed over bytes no longer in cache (0.39 of 5.88 core-s of the
	// scale-22 one-shot on the 16-core host).
	known   []pages.SectionSum
	knownOf *byte
	// combined counts the bytes whose sum was known (for tests).
	combined int64
	// held says that the object holds bytes of the fragment being copied
	// (store.HeldWriter): the fragment must stay unchanged until the object is
	// closed.
	held bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = store.CRC32CUpdate(c.crc, p[:n])
	c.n += int64(n)
	c.total.Add(int64(n))
	return n, err
}

// Sum32 is the CRC32C of the bytes written.
func (c *countingWriter) Sum32() uint32 { return c.crc }

// writeSection writes bytes off.. of fragment f, combining their checksum
// when it is known for exactly that section.
func (c *countingWriter) writeSection(f fragment, off int64, b []byte) (int, error) {
	n, err := c.writeFragment(b)
	if s, ok := c.knownSum(f, off, len(b)); ok && n == len(b) {
		c.crc = store.CRC32CCombine(c.crc, s.CRC, s.N)
		c.combined += s.N
	} else {
		c.crc = store.CRC32CUpdate(c.crc, b[:n])
	}
	c.n += int64(n)
	c.total.Add(int64(n))
	return n, err
}

// knownSum is the encoder's sum of the n bytes at off in f, if it has one.
func (c *countingWriter) knownSum(f fragment, off int64, n int) (pages.SectionSum, bool) {
	if len(f) == 0 || &f[0] != c.knownOf {
		return pages.SectionSum{}, false
	}
	for _, s := range c.known {
		if s.Off == off && s.N == int64(n) {
			return s, true
		}
	}
	return pages.SectionSum{}, false
}

// writeFragment writes bytes of a fragment to the object, held rather than
// copied where it can take them so.
func (c *countingWriter) writeFragment(b []byte) (int, error) {
	h, ok := c.w.(store.HeldWriter)
	if !ok {
		return c.w.Write(b)
	}
	n, held, err := h.WriteHeld(b)
	c.held = c.held || held
	return n, err
}

// ReadFrom is how parquet-go's row group copy writes a column chunk of a
// fragment: a section reader over it, through the part writer's buffer,
// which hands the reader on once it is empty. A section of a fragment is
// written with one Write of the fragment's own bytes, not copied through
// the buffer (0.4 core-s of a scale-22 run on the 16-core host); other
// readers are copied as io.Copy would.
func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if s, ok := r.(*io.SectionReader); ok {
		if f, off, n := s.Outer(); isFragment(f) {
			pos, err := s.Seek(0, io.SeekCurrent)
			if err != nil {
				return 0, err
			}
			m, err := c.writeSection(f.(fragment), off+pos, f.(fragment)[off+pos:off+n])
			_, _ = s.Seek(int64(m), io.SeekCurrent)
			return int64(m), err
		}
	}
	return io.Copy(struct{ io.Writer }{c}, r)
}

// fragment is an encoded row group in memory, as parquet-go reads it back
// to copy it into a part (an io.ReaderAt whose bytes ReadFrom can reach).
type fragment []byte

func isFragment(r io.ReaderAt) bool { _, ok := r.(fragment); return ok }

func (f fragment) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(f)) {
		return 0, fmt.Errorf("sink: read at %d of a %d-byte fragment", off, len(f))
	}
	n := copy(p, f[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// uploadLoop assigns encoded row groups to parts in row group order and
// hands them to one goroutine per part, so that up to WithParallelParts
// objects upload at once (an object store serves several objects faster
// than one, and completing a multipart upload is a round trip of its own).
// A part ends after the row group that brings its encoded row groups to
// the file size, or, in the batch's tail, after its share of the tail
// (tailShare): fragment sizes are deterministic, so the split is too.
func (w *BatchWriter) uploadLoop() {
	defer w.wg.Done()
	defer close(w.done)
	var parts sync.WaitGroup
	defer parts.Wait()
	slots := make(chan struct{}, w.cfg.parallelParts)
	var p *part
	var size int64
	// Row groups in the part being filled and in the last part that
	// reached the file size; the tail's share of row groups once set.
	var groups, lastFull, share int64
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
			w.fail(gr.err) // recorded already (encodeLoop); never stop without it
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
			size, groups = 0, 0
			if share == 0 {
				share = tailShare(w.groups-gi, lastFull)
			}
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
		groups++
		select {
		case p.in <- gr:
		case <-w.ctx.Done():
			return
		}
		if size >= w.cfg.fileBytes || gi == w.groups-1 || groups == share {
			if size >= w.cfg.fileBytes {
				lastFull = groups
			}
			close(p.in)
			p = nil
		}
	}
	w.mu.Lock()
	w.next = w.groups
	w.mu.Unlock()
}

// tailShare is how many row groups each part of a batch's tail takes, or 0
// while the batch is not in its tail: once the remaining row groups would
// fill no more than the last full part did (lastFull row groups), they are
// shared evenly by tailParts parts instead of going to one, which are then
// written at once (up to WithParallelParts). A part is written in order by
// one goroutine, and a file by one writer at a time (tmpfs and most local
// file systems lock the file for a write): the last 64 MiB part of a
// one-shot walk kept one goroutine writing for 25-30 ms after every row
// group was encoded, 5-6% of the scale-22 one-shot on the 16-core host
// (an execution trace). The split depends on the batch alone, not on the
// writer's settings, so the output stays the same for the same input. A
// batch of less than one full part is not split.
func tailShare(remaining, lastFull int64) int64 {
	if lastFull == 0 || remaining > lastFull {
		return 0
	}
	return max(1, (remaining+tailParts-1)/tailParts)
}

// tailParts is how many parts share a batch's tail: DefaultParallelParts.
const tailParts = 4

// partLoop writes one part's row groups, then completes the object; on
// failure or cancellation it abandons the upload. Fragments the object
// holds (store.HeldWriter) are reused only once it is complete: after a failure
// the request may still be reading them, so they are left to the
// collector.
func (w *BatchWriter) partLoop(p *part) {
	var kept [][]byte
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
					return
				}
				for _, f := range kept {
					w.buf.putFrag(f)
				}
				return
			}
			err := w.appendGroup(p, gr)
			w.mu.Lock()
			w.used -= int64(len(gr.frag))
			w.queued--
			w.signal()
			w.mu.Unlock()
			if p.out.held {
				kept = append(kept, gr.frag)
				p.out.held = false
			} else {
				w.buf.putFrag(gr.frag)
			}
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
	p, err := w.newPart(i)
	if err != nil {
		return nil, err
	}
	p.in = make(chan *group, 64)
	opts := append(w.partOpts[:len(w.partOpts):len(w.partOpts)], w.partMetadata(i)...)
	p.bw = w.buf.writeBuffer(p.out)
	p.pw = pages.NewPartWriterFor(w.cfg.walkEncoding, w.meta.Times, fragmentFlusher{p.bw, p.out}, opts...)
	return p, nil
}

// fragmentFlusher is a part's write buffer as parquet-go's part writer sees
// it. A column chunk copied from a fragment (a section reader over it) goes
// to out in one Write of the fragment's own bytes once the buffer is
// flushed: bufio's ReadFrom hands a reader on only to an empty buffer, and
// with a page header or footer bytes in it copied the chunk through the
// buffer first (0.67 of 38.3 core-s of the GPU stage writing to versitygw,
// where the part's buffer then copies it again).
type fragmentFlusher struct {
	*bufio.Writer
	out *countingWriter
}

func (f fragmentFlusher) ReadFrom(r io.Reader) (int64, error) {
	if s, ok := r.(*io.SectionReader); ok {
		if o, _, _ := s.Outer(); isFragment(o) {
			if err := f.Flush(); err != nil {
				return 0, err
			}
			return f.out.ReadFrom(r)
		}
	}
	return f.Writer.ReadFrom(r)
}

// newPart creates part i's object (an upload guarded against stalls) and
// the counting, checksumming writer in front of it. Every output (walks,
// visits, samples) writes its parts through one.
func (w *BatchWriter) newPart(i int) (*part, error) {
	key := w.layout.AttemptPartKey(i, w.attempt)
	ctx, cancel := context.WithCancelCause(w.ctx)
	p := &part{index: i, key: key, cancel: cancel, file: output.File{Key: key, FirstWalkID: -1}}
	ow, err := w.newObject(ctx, key, false, &blob.WriterOptions{
		ContentType:    "application/vnd.apache.parquet",
		BufferSize:     w.cfg.uploadBuffer,
		MaxConcurrency: w.cfg.uploadParallel,
		BeforeWrite:    p.s3.BeforeWrite,
	})
	if err != nil {
		cancel(nil)
		return nil, fmt.Errorf("sink: create %s: %w", key, err)
	}
	p.ow = store.GuardStall(ctx, cancel, w.cfg.stallTimeout, ow)
	p.out = &countingWriter{w: p.ow, total: &w.bytesWritten}
	if so, ok := ow.(*store.S3PutObject); ok {
		// The request's checksum is the part's, which p.out keeps over the
		// same bytes: not computed a second time.
		so.UseCRC32C(p.out)
	}
	return p, nil
}

// partMetadata is the key-value metadata of part i: its index and the
// batch's own (w.kv).
func (w *BatchWriter) partMetadata(i int) []parquet.WriterOption {
	opts := []parquet.WriterOption{parquet.KeyValueMetadata(MetaPart, strconv.Itoa(i))}
	for _, kv := range w.kv {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	return opts
}

// rowPartOptions configure the parquet-go writer of a row output's part
// (visits, samples): rowGroupRows rows a group, output named in the
// metadata.
func (w *BatchWriter) rowPartOptions(i int, output string, rowGroupRows int) []parquet.WriterOption {
	opts := []parquet.WriterOption{
		parquet.Compression(partCodec(w.cfg.compression)),
		parquet.MaxRowsPerRowGroup(int64(rowGroupRows)),
		parquet.DataPageVersion(1),
		parquet.CreatedBy("walkstage", w.meta.WalkstageVersion, ""),
		parquet.KeyValueMetadata(MetaPart, strconv.Itoa(i)),
		parquet.KeyValueMetadata(MetaOutput, output),
	}
	for _, kv := range w.kv {
		opts = append(opts, parquet.KeyValueMetadata(kv[0], kv[1]))
	}
	return opts
}

// addRows records a row group of n rows written to p, numbered on from
// *written.
func (p *part) addRows(written *int64, n int) {
	if p.file.FirstWalkID < 0 {
		p.file.FirstWalkID = *written
	}
	*written += int64(n)
	p.file.LastWalkID = *written - 1
	p.file.Rows += int64(n)
	p.file.RowGroups++
}

func (w *BatchWriter) appendGroup(p *part, gr *group) error {
	f, err := parquet.OpenFile(fragment(gr.frag), int64(len(gr.frag)))
	if err != nil {
		return fmt.Errorf("sink: reopen encoded row group %d: %w", gr.index, err)
	}
	rgs := f.RowGroups()
	if len(rgs) != 1 {
		return fmt.Errorf("sink: encoded row group %d holds %d row groups", gr.index, len(rgs))
	}
	if len(gr.frag) > 0 {
		p.out.known, p.out.knownOf = gr.sums, &gr.frag[0]
		defer func() { p.out.known, p.out.knownOf = nil, nil }()
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
	err := w.sealPart(p, func() error {
		if err := p.pw.Close(); err != nil {
			return err
		}
		return p.bw.Flush()
	})
	w.buf.putWriteBuffer(p.bw) // an aborted part's is left to the collector
	p.bw = nil
	return err
}

// sealPart finishes part p: closeEncoder writes its footer, then the upload
// completes and the part is recorded for the manifest. On an error the
// upload is abandoned.
func (w *BatchWriter) sealPart(p *part, closeEncoder func() error) error {
	defer p.cancel(nil)
	if err := closeEncoder(); err != nil {
		w.abortPart(p)
		return fmt.Errorf("sink: finish %s: %w", p.key, err)
	}
	if err := p.ow.Close(); err != nil {
		w.abortPart(p)
		return fmt.Errorf("sink: upload %s: %w", p.key, err)
	}
	p.file.Bytes = p.out.n
	p.file.CRC32C = store.CRC32CString(p.out.Sum32())
	w.sumsCombined.Add(p.out.combined)
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
	if err := p.s3.AbortUploads(context.WithoutCancel(w.ctx), w.bucket, w.cfg.callTimeout); err != nil {
		w.mu.Lock()
		w.abortErr = err
		w.mu.Unlock()
	}
}
