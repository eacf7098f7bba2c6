package sink

import (
	"bytes"
	"context"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk"
)

// duckdbReads says whether DuckDB decodes a column chunk of physical type
// typ in encoding enc. Its Parquet reader takes PLAIN, RLE (levels,
// booleans), dictionaries, the DELTA encodings, and BYTE_STREAM_SPLIT for
// FLOAT and DOUBLE only ("BYTE_STREAM_SPLIT encoding is only supported for
// FLOAT or DOUBLE data", DuckDB 1.5.6, which declined to add INT64).
func duckdbReads(typ format.Type, enc format.Encoding) bool {
	switch enc {
	case format.Plain, format.RLE, format.PlainDictionary, format.RLEDictionary,
		format.DeltaBinaryPacked, format.DeltaLengthByteArray, format.DeltaByteArray:
		return true
	case format.ByteStreamSplit:
		return typ == format.Float || typ == format.Double
	}
	return false
}

// Every output kind written with the default options uses only encodings
// DuckDB reads, in every column of every part (issue 33: the walk values
// and the samples' src and dst were BYTE_STREAM_SPLIT INT64).
func TestDefaultEncodingsReadByDuckDB(t *testing.T) {
	ctx := context.Background()
	parts := map[string][]byte{}
	collect := func(kind string, b interface {
		ReadAll(context.Context, string) ([]byte, error)
	}, m *output.Manifest) {
		for _, f := range m.Files {
			data, err := b.ReadAll(ctx, f.Key)
			if err != nil {
				t.Fatal(err)
			}
			parts[kind+" "+f.Key] = data
		}
	}
	g := ringGraph(t, 1<<16)
	const n = 3000
	chunks := bigChunks(g, n, 80, 500)
	meta := BatchMeta{BatchID: "walks", Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, Seed: 42, Engine: "cpu",
		WalkstageVersion: "test", Walks: n}
	for _, c := range []Compression{Zstd, Snappy, None} {
		b, _ := fileBucket(t)
		collect("walks/"+string(c), b, writeBatch(t, b, meta, g, chunks, WithCompression(c)))
	}
	tg := testGraph(t)
	ids, res := countVisits(t, tg, 40)
	b, _ := fileBucket(t)
	collect("visits", b, writeVisits(t, b, visitMeta("visits", len(ids)), tg, ids, res, 7))
	wg := weightedTestGraph(t)
	for _, weight := range []bool{false, true} {
		seeds, edges := runSample(t, wg, sampleParams, 200)
		b, _ := fileBucket(t)
		collect("samples", b, writeSamples(t, b, sampleMeta("samples", sampleParams, len(edges), weight), wg, seeds, edges, 64))
	}
	for name, data := range parts {
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, rg := range f.Metadata().RowGroups {
			for _, cc := range rg.Columns {
				md := cc.MetaData
				for _, enc := range md.Encoding {
					if !duckdbReads(md.Type, enc) {
						t.Errorf("%s: column %v is %v in %v, which DuckDB cannot read", name, md.PathInSchema, md.Type, enc)
					}
				}
			}
		}
	}
}
