package sink

import (
	"bufio"
	"bytes"
	"io"
	"sync/atomic"
	"testing"
)

// recordWrites keeps every slice written to it, as given.
type recordWrites struct{ writes [][]byte }

func (r *recordWrites) Write(p []byte) (int, error) {
	r.writes = append(r.writes, p)
	return len(p), nil
}

// A column chunk copied from a fragment reaches the part's object as the
// fragment's own bytes, in one Write, even when the write buffer holds a
// header before it: the buffer is flushed, not filled from the fragment.
func TestFragmentSectionsAreNotCopied(t *testing.T) {
	frag := fragment(bytes.Repeat([]byte("walks"), 100_000))
	rec := &recordWrites{}
	out := &countingWriter{w: rec, total: new(atomic.Int64)}
	f := fragmentFlusher{bufio.NewWriterSize(out, 1<<20), out}
	if _, err := f.Write([]byte("header")); err != nil {
		t.Fatal(err)
	}
	const off, n = 1000, 300_000
	if m, err := io.Copy(f, io.NewSectionReader(frag, off, n)); err != nil || m != n {
		t.Fatalf("copied %d bytes: %v", m, err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(rec.writes) != 2 || string(rec.writes[0]) != "header" {
		t.Fatalf("%d writes reached the object, want the header then the section", len(rec.writes))
	}
	if w := rec.writes[1]; len(w) != n || &w[0] != &frag[off] {
		t.Fatalf("the section arrived as %d bytes of another buffer, want the fragment's own %d", len(w), n)
	}
	if out.n != int64(len("header")+n) {
		t.Fatalf("counted %d bytes", out.n)
	}
}
