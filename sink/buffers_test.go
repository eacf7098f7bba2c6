package sink

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk"
)

// Writers that share Buffers, one after another and with different codecs,
// levels and walk encodings, write the bytes each writes on its own: an
// encoder or buffer handed on carries nothing of the last batch.
func TestSharedBuffersSameBytes(t *testing.T) {
	g := ringGraph(t, 1<<16)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 3000
	chunks := bigChunks(g, n, 80, 700)
	// Writers of one codec in a row, so that (sync.Pool allowing) each
	// takes the encoders the last one gave back.
	cases := []struct {
		name string
		opts []Option
	}{
		{"zstd", nil},
		{"zstd delta", []Option{WithWalkEncoding(DeltaBinaryPacked)}},
		{"zstd again", nil},
		{"snappy", []Option{WithCompression(Snappy)}},
		{"snappy split", []Option{WithCompression(Snappy), WithWalkEncoding(ByteStreamSplit)}},
		{"zstd level 3", []Option{WithZstdLevel(3)}},
		{"none split", []Option{WithCompression(None), WithWalkEncoding(ByteStreamSplit)}},
	}
	read := func(b interface {
		ReadAll(context.Context, string) ([]byte, error)
	}, m *output.Manifest) [][]byte {
		var out [][]byte
		for _, f := range m.Files {
			data, err := b.ReadAll(context.Background(), f.Key)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, data)
		}
		return out
	}
	shared := NewBuffers(2)
	for i, tc := range cases {
		meta := BatchMeta{BatchID: "shared", Algorithm: algo, Seed: uint64(i), Engine: "cpu", WalkstageVersion: "test", Walks: n}
		opts := append([]Option{WithRowGroupRows(512), WithEncoders(3)}, tc.opts...)
		b1, _ := fileBucket(t)
		alone := read(b1, writeBatch(t, b1, meta, g, chunks, opts...))
		b2, _ := fileBucket(t)
		got := read(b2, writeBatch(t, b2, meta, g, chunks, append(opts, WithBuffers(shared))...))
		if len(got) != len(alone) {
			t.Fatalf("%s: %d parts with shared buffers, %d alone", tc.name, len(got), len(alone))
		}
		for k := range got {
			if !bytes.Equal(got[k], alone[k]) {
				t.Fatalf("%s: part %d differs with shared buffers (%d bytes, %d alone)", tc.name, k, len(got[k]), len(alone[k]))
			}
		}
	}
}

// Writers sharing Buffers encode no more row groups at once than its bound,
// however many encoders each runs.
func TestBuffersBoundEncoding(t *testing.T) {
	g := ringGraph(t, 1<<16)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 4000
	chunks := bigChunks(g, n, 80, 500)
	for _, bound := range []int{1, 2, 0} {
		bufs := NewBuffers(bound)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := fileBucket(t)
				meta := BatchMeta{BatchID: fmt.Sprint("b", i), Algorithm: algo, Seed: uint64(i), Engine: "cpu", WalkstageVersion: "test", Walks: n}
				writeBatch(t, b, meta, g, chunks, WithRowGroupRows(256), WithEncoders(4), WithBuffers(bufs))
			}()
		}
		wg.Wait()
		peak := bufs.peak.Load()
		switch {
		case bound > 0 && peak > int64(bound):
			t.Fatalf("bound %d: %d row groups encoded at once", bound, peak)
		case peak < 1:
			t.Fatalf("bound %d: no row group encoded", bound)
		}
		t.Logf("bound %d: at most %d row groups encoded at once", bound, peak)
	}
}
