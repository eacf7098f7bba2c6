package sink

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/walk"
)

// Every walk encoding and codec reads back, through parquet-go and through
// Apache Arrow, on pages large enough for each kind of zstd frame the
// encoder writes: RLE (the zero high bytes), raw (uniform low bytes) and
// compressed (levels, the top used byte).
func TestWalkEncodingsReadBack(t *testing.T) {
	g := ringGraph(t, 1<<20)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 9000
	chunks := bigChunks(g, n, 80, 1000)
	want := expectedRows(g, chunks, n)
	for _, enc := range []WalkEncoding{ByteStreamSplit, DeltaBinaryPacked} {
		for _, c := range []Compression{Zstd, Snappy, None} {
			t.Run(fmt.Sprintf("%s/%s", enc, c), func(t *testing.T) {
				b, _ := fileBucket(t)
				meta := BatchMeta{BatchID: "enc", Algorithm: algo, Seed: 42, Engine: "cpu", WalkstageVersion: "test", Walks: n}
				m := writeBatch(t, b, meta, g, chunks, WithWalkEncoding(enc), WithCompression(c),
					WithRowGroupRows(4000), WithFileBytes(1<<20))
				if len(m.Files) < 2 {
					t.Fatalf("%d parts, want several", len(m.Files))
				}
				compareRows(t, readBatch(t, b, m), want)
				var got []Row
				for _, f := range m.Files {
					data, err := b.ReadAll(context.Background(), f.Key)
					if err != nil {
						t.Fatal(err)
					}
					checkLeafEncoding(t, data, enc, c)
					got = append(got, readArrow(t, data, m)...)
				}
				compareRows(t, got, want)
			})
		}
	}
}

// checkLeafEncoding checks the walk values' encoding and codec in a part,
// and that its pages are the encoder's, copied verbatim: parquet-go
// re-encoding them would write page statistics, which the encoder leaves
// out.
func checkLeafEncoding(t *testing.T, data []byte, enc WalkEncoding, c Compression) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	wantEnc, wantCodec := format.ByteStreamSplit, map[Compression]format.CompressionCodec{Zstd: format.Zstd, Snappy: format.Snappy, None: format.Uncompressed}[c]
	if enc == DeltaBinaryPacked {
		wantEnc = format.DeltaBinaryPacked
	}
	for _, rg := range f.Metadata().RowGroups {
		md := rg.Columns[3].MetaData
		if md.Codec != wantCodec || !slices.Contains(md.Encoding, wantEnc) {
			t.Fatalf("walk values: codec %v, encodings %v; want %v, %v", md.Codec, md.Encoding, wantCodec, wantEnc)
		}
		var h format.PageHeader
		r := bytes.NewReader(data[md.DataPageOffset:])
		if err := thrift.NewDecoder(new(thrift.CompactProtocol).NewReader(r)).Decode(&h); err != nil {
			t.Fatal(err)
		}
		if h.Type != format.DataPage || !h.DataPageHeader.Valid || h.DataPageHeader.V.Encoding != wantEnc {
			t.Fatalf("first page of walk values: %+v", h)
		}
		if st := h.DataPageHeader.V.Statistics; st.MinValue != nil || st.MaxValue != nil {
			t.Fatalf("first page of walk values has statistics %+v: parquet-go re-encoded the row group instead of copying it", st)
		}
	}
}

// Row groups are encoded by many goroutines, finish in any order and are
// committed to parts in walk id order: many encoders, many parts at once
// and chunks in random order give the same bytes as one encoder and one
// part fed in order.
func TestParallelEncodingCommitsInOrder(t *testing.T) {
	g := ringGraph(t, 1<<16)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 20000
	chunks := bigChunks(g, n, 80, 250)
	meta := BatchMeta{BatchID: "order", Algorithm: algo, Seed: 42, Engine: "cpu", WalkstageVersion: "test", Walks: n}
	for _, enc := range []WalkEncoding{ByteStreamSplit, DeltaBinaryPacked} {
		t.Run(string(enc), func(t *testing.T) {
			opts := []Option{WithWalkEncoding(enc), WithRowGroupRows(300), WithFileBytes(200 << 10)}
			b1, dir1 := fileBucket(t)
			m := writeBatch(t, b1, meta, g, chunks, append(opts, WithEncoders(1), WithParallelParts(1))...)
			shuffled := slices.Clone(chunks)
			rand.New(rand.NewPCG(5, 6)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			b2, dir2 := fileBucket(t)
			writeBatch(t, b2, meta, g, shuffled, append(opts, WithEncoders(16), WithParallelParts(8))...)
			a, bb := treeDigest(t, dir1), treeDigest(t, dir2)
			if len(a) < 5 {
				t.Fatalf("only %d objects; want several parts", len(a))
			}
			if !slices.Equal(a, bb) {
				t.Fatalf("outputs differ:\n%v\n%v", a, bb)
			}
			compareRows(t, readBatch(t, b1, m), expectedRows(g, chunks, n))
		})
	}
}

// The default walk encoding is delta encoding under every codec: DuckDB
// reads BYTE_STREAM_SPLIT only for FLOAT and DOUBLE, so a default of it
// for the INT64 walk values made the output unreadable there (issue 33).
func TestAutoWalkEncoding(t *testing.T) {
	g := ringGraph(t, 1<<16)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 2000
	chunks := bigChunks(g, n, 80, 500)
	meta := BatchMeta{BatchID: "auto", Algorithm: algo, Seed: 42, Engine: "cpu", WalkstageVersion: "test", Walks: n}
	for c, want := range map[Compression]WalkEncoding{Zstd: DeltaBinaryPacked, Snappy: DeltaBinaryPacked, None: DeltaBinaryPacked} {
		b, _ := fileBucket(t)
		m := writeBatch(t, b, meta, g, chunks, WithCompression(c))
		data, err := b.ReadAll(context.Background(), m.Files[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		checkLeafEncoding(t, data, want, c)
	}
	if e, err := ParseWalkEncoding("auto"); err != nil || e != AutoWalkEncoding {
		t.Fatalf("ParseWalkEncoding(auto) = %q, %v", e, err)
	}
	if _, err := ParseWalkEncoding("plain"); err == nil {
		t.Fatal("ParseWalkEncoding(plain) succeeded")
	}
}

func TestZstdLevel(t *testing.T) {
	g := ringGraph(t, 1<<16)
	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	const n = 2000
	chunks := bigChunks(g, n, 80, 500)
	meta := BatchMeta{BatchID: "level", Algorithm: algo, Seed: 42, Engine: "cpu", WalkstageVersion: "test", Walks: n}
	for _, bad := range []int{-1, 5} {
		b, _ := fileBucket(t)
		if _, err := NewBatchWriter(context.Background(), b, "walks", meta, g, WithZstdLevel(bad)); err == nil {
			t.Errorf("zstd level %d accepted", bad)
		}
	}
	for level := 1; level <= 4; level++ {
		b, _ := fileBucket(t)
		m := writeBatch(t, b, meta, g, chunks, WithZstdLevel(level))
		compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
	}
}
