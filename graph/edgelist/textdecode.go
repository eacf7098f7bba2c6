package edgelist

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
)

// textChunkBytes is the size of the pieces of text the decoders parse in
// parallel: at least a whole line of maxLineBytes, so every legal line fits
// in one piece, and few enough of them in flight to keep memory small.
const textChunkBytes = 2 * maxLineBytes

// textBatchEdges caps a text batch, as defaultBatchRows caps a Parquet
// one, so a piece of very short lines needs no bigger batch.
const textBatchEdges = 64 << 10

// textPart is a run of whole lines (the last may lack its newline), or
// skip lines of a Matrix Market preamble that hold no edges.
type textPart struct {
	buf   *[]byte // the chunk buffer data lives in, returned to the pool when parsed
	data  []byte
	skip  int   // lines before data that the producer consumed
	first bool  // data starts at the file's first line
	bytes int64 // input bytes consumed up to the end of data
}

// readText splits r into pieces of whole lines on one goroutine, parses
// them on b.o.Workers and adds the edges to b in input order. Errors name
// the input and line.
func readText(r io.Reader, name string, b *runBuilder, cr *countingReader) error {
	var pool batchPool
	chunks := sync.Pool{New: func() any { s := make([]byte, textChunkBytes); return &s }}
	want := 2 + btoi(b.o.Weighted) + btoi(b.o.Labelled) + btoi(b.o.timed)
	line := 0 // lines committed
	err := decodeOrdered(b.o.Workers, partDepth, &pool,
		func(send func(textPart) bool) error {
			return splitText(r, name, cr, &chunks, send)
		},
		func(p textPart, emit func(*edgeBatch) bool) {
			parseText(p, b.o, want, &pool, emit)
			if p.buf != nil {
				chunks.Put(p.buf)
			}
		},
		func(e *edgeBatch) error {
			if err := b.addBatch(e); err != nil {
				return err
			}
			b.bytes = max(b.bytes, e.bytes)
			if e.err != nil {
				return fmt.Errorf("import %s line %d: %w", name, line+e.lines+1, e.err)
			}
			line += e.lines
			return nil
		})
	if err == nil {
		b.bytes = cr.n
	}
	return err
}

// splitText reads r into chunks cut after their last newline and sends
// them in order. A Matrix Market preamble (the header, comments and the
// size line) is consumed here, so that the parsers need no state.
func splitText(r io.Reader, name string, cr *countingReader, chunks *sync.Pool, send func(textPart) bool) error {
	br := bufio.NewReaderSize(r, maxLineBytes)
	if bom, _ := br.Peek(3); bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		br.Discard(3) // a UTF-8 byte order mark
	}
	first := true
	if mm, _ := br.Peek(14); string(mm) == "%%MatrixMarket" {
		skip, err := skipMatrixMarket(br, name)
		if err != nil {
			return err
		}
		if !send(textPart{skip: skip}) {
			return nil
		}
		first = false
	}
	var carry []byte // the unfinished line at the end of the last chunk
	for {
		buf := chunks.Get().(*[]byte)
		n0 := copy(*buf, carry)
		n, err := io.ReadFull(br, (*buf)[n0:])
		data := (*buf)[:n0+n]
		last := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !last {
			chunks.Put(buf)
			return fmt.Errorf("import %s: %w", name, err)
		}
		cut := len(data)
		if !last {
			// A tail as long as a line may be is sent as it is: its parser
			// reports the line as too long, and reading stops there.
			if i := bytes.LastIndexByte(data, '\n'); i >= 0 && len(data)-i-1 < maxLineBytes {
				cut = i + 1
			} else {
				last = true
			}
		}
		carry = append(carry[:0], data[cut:]...)
		if !send(textPart{buf: buf, data: data[:cut], first: first, bytes: cr.n - int64(len(carry))}) || last {
			return nil
		}
		first = false
	}
}

// skipMatrixMarket consumes a Matrix Market file's header and comment
// lines and its "rows cols entries" size line, which is not an edge, and
// returns how many lines that was.
func skipMatrixMarket(br *bufio.Reader, name string) (int, error) {
	var fields [1][]byte
	for line := 1; ; line++ {
		raw, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return 0, fmt.Errorf("import %s line %d: longer than %d bytes", name, line, maxLineBytes)
		}
		if err != nil && err != io.EOF {
			return 0, fmt.Errorf("import %s line %d: %w", name, line, err)
		}
		if nf, _ := splitFields(raw, fields[:]); nf > 0 && fields[0][0] != '#' && fields[0][0] != '%' {
			return line, nil // the size line
		}
		if err == io.EOF {
			return line - btoi(len(raw) == 0), nil
		}
	}
}

// parseText parses a part's lines into batches of at most textBatchEdges
// edges. A batch's lines are the lines it covers; one that ends at a bad
// line carries the error, its lines those before the bad one.
func parseText(p textPart, o ImportOptions, want int, pool *batchPool, emit func(*edgeBatch) bool) {
	e := pool.get()
	e.lines, e.bytes = p.skip, p.bytes
	var fields [5][]byte
	data := p.data
	for n := 0; len(data) > 0; n++ {
		raw := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			raw, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if len(bytes.TrimSuffix(raw, []byte("\n"))) >= maxLineBytes {
			e.err = fmt.Errorf("longer than %d bytes", maxLineBytes)
			break
		}
		nf, extra := splitFields(raw, fields[:])
		if nf > 0 && fields[0][0] != '#' && fields[0][0] != '%' {
			if nf != want || extra {
				e.err = fmt.Errorf("%s, want %d (%s)%s", countFields(raw), want, columnNames(o), columnHint(nf, want, p.first && n == 0))
				break
			}
			if e.err = parseEdge(e, fields[:nf], o); e.err != nil {
				break
			}
		}
		e.lines++
		if len(e.src) == textBatchEdges && len(data) > 0 {
			if !emit(e) {
				return
			}
			e = pool.get()
			e.bytes = p.bytes
		}
	}
	emit(e)
}

// parseEdge appends one line's edge to e, or returns what is wrong with it.
// A bad line may leave values of its own in e's optional columns past the
// batch's edges, which nothing reads.
func parseEdge(e *edgeBatch, f [][]byte, o ImportOptions) error {
	if o.timed {
		i := o.TimeColumn - 1
		t, err := parseID(f[i])
		if err != nil {
			return fmt.Errorf("bad time %q in column %d (want an integer, e.g. Unix milliseconds)", f[i], o.TimeColumn)
		}
		// The other columns in their order, without the time.
		f = append(f[:i:i], f[i+1:]...)
		e.t = append(e.t, t)
	}
	if o.StringIDs {
		for i, what := range []string{"source", "target"} {
			if err := checkStringID(f[i]); err != nil {
				return fmt.Errorf("bad %s id %q: %v", what, f[i], err)
			}
		}
		if err := parseWeightLabel(e, f, o); err != nil {
			return err
		}
		s := e.stageSrc(f[0], o.hashSeed)
		d := s // a self-loop's ends are one place
		if !bytes.Equal(f[0], f[1]) {
			d = e.stageDst(f[1], o.hashSeed)
		}
		e.src, e.dst = append(e.src, s), append(e.dst, d)
		return nil
	}
	s, err := parseID(f[0])
	if err != nil {
		return fmt.Errorf("bad source id %q%s", f[0], stringHint(f[0]))
	}
	d, err := parseID(f[1])
	if err != nil {
		return fmt.Errorf("bad target id %q%s", f[1], stringHint(f[1]))
	}
	if o.DenseIDs {
		if uint64(s) >= graph.MaxVertices || uint64(d) >= graph.MaxVertices {
			return fmt.Errorf("vertex id %d or %d outside [0, %d) with dense ids", s, d, int64(graph.MaxVertices))
		}
		e.maxID = max(e.maxID, s, d)
	}
	if err := parseWeightLabel(e, f, o); err != nil {
		return err
	}
	e.src, e.dst = append(e.src, s), append(e.dst, d)
	return nil
}

// stringHint suggests string ids for an id that is not a number.
func stringHint(f []byte) string {
	for _, c := range f {
		if (c < '0' || c > '9') && c != '-' && c != '+' {
			return " (not an integer; --id-type string reads string ids)"
		}
	}
	return ""
}

// parseWeightLabel appends the weight and label columns after src and dst.
func parseWeightLabel(e *edgeBatch, f [][]byte, o ImportOptions) error {
	i := 2
	if o.Weighted {
		x, err := strconv.ParseFloat(unsafe.String(&f[i][0], len(f[i])), 32)
		if err != nil || !(x > 0) || math.IsInf(x, 0) || x > math.MaxFloat32 {
			return fmt.Errorf("bad weight %q (want a finite number > 0)", f[i])
		}
		e.w = append(e.w, float32(x))
		i++
	}
	if o.Labelled {
		x, err := parseID(f[i])
		if err != nil || x < 0 || x > 255 {
			return fmt.Errorf("bad label %q (want an integer in [0, 255])", f[i])
		}
		e.l = append(e.l, uint8(x))
	}
	return nil
}
