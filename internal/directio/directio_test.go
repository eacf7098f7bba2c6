package directio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// pageAligned is n bytes starting on a page boundary, as pinned host
// memory does (O_DIRECT reads need it).
func pageAligned(n int) []byte {
	raw := make([]byte, n+Align)
	d := (Align - int(uintptr(unsafe.Pointer(&raw[0]))%Align)) % Align
	return raw[d : d+n : d+n]
}

// TestReadRange: ranges at every alignment, within a page,
// across the 8 MiB pieces and up to the file's last partial page read back
// the file's bytes, directly where the filesystem allows it and buffered
// where not; a buffer too small is an error, not a short read.
func TestReadRange(t *testing.T) {
	const size = 2*Piece + 3*Align + 123 // ends inside a page
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		r, err := Open(path, direct)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("direct asked %v, got %v", direct, r.Direct())
		cases := []struct{ off, n int64 }{
			{0, 4}, {4, 8}, {Align - 4, 12}, {12345, 4096}, {Align, Align},
			{3, Piece + 5}, {Piece - 100, Piece + 200}, {1, size - 1},
			{size - 12, 12}, {0, size},
		}
		for _, c := range cases {
			buf := pageAligned(int(Span(c.n)))
			at, err := r.ReadRange(context.Background(), buf, c.off, c.n)
			if err != nil {
				t.Fatalf("direct=%v [%d,+%d): %v", direct, c.off, c.n, err)
			}
			if !bytes.Equal(buf[at:at+c.n], data[c.off:c.off+c.n]) {
				t.Fatalf("direct=%v [%d,+%d): bytes differ (at %d)", direct, c.off, c.n, at)
			}
		}
		if _, err := r.ReadRange(context.Background(), pageAligned(Align), 100, Align); err == nil {
			t.Fatal("a buffer short of the widened range read")
		}
		if _, err := r.ReadRange(context.Background(), pageAligned(int(Span(64))), size+Align, 64); !errors.Is(err, io.EOF) {
			t.Fatalf("read past the end: %v", err)
		}
		if r.Reads() == 0 || r.Bytes() < size {
			t.Fatalf("counters: %d reads, %d bytes", r.Reads(), r.Bytes())
		}
		r.Close()
	}
}
