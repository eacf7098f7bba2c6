package pages

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"

	"github.com/walkstage/walkstage/graph"
)

// The sink's sample row types (sink.SampleRow and its kin), whose part
// writers' schemas the fragments carry.
type (
	sampleRow struct {
		InstanceID int64 `parquet:"instance_id,delta"`
		Seed       int64 `parquet:"seed,delta"`
		Hop        int32 `parquet:"hop,delta"`
		Src        int64 `parquet:"src"`
		Dst        int64 `parquet:"dst,delta"`
	}
	weightedSampleRow struct {
		InstanceID int64   `parquet:"instance_id,delta"`
		Seed       int64   `parquet:"seed,delta"`
		Hop        int32   `parquet:"hop,delta"`
		Src        int64   `parquet:"src"`
		Dst        int64   `parquet:"dst,delta"`
		EdgeWeight float32 `parquet:"edge_weight,split"`
	}
	stringSampleRow struct {
		InstanceID int64  `parquet:"instance_id,delta"`
		Seed       string `parquet:"seed,dict"`
		Hop        int32  `parquet:"hop,delta"`
		Src        string `parquet:"src,dict"`
		Dst        string `parquet:"dst,dict"`
	}
)

func schemaOf[T any](t *testing.T) []format.SchemaElement {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.NewGenericWriter[T](&buf).Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return f.Metadata().Schema
}

// mappedGraph has external ids far from its dense ids (above 2^32, so
// seeds take the 64-bit path) and edge weights.
func mappedGraph(t testing.TB, n int) *graph.Graph {
	t.Helper()
	var edges []graph.Edge
	for i := range n {
		ext := func(v int) int64 { return 1<<40 + int64(v)*7919 }
		edges = append(edges, graph.Edge{Src: ext(i), Dst: ext((i + 1) % n), Weight: float32(i%13) + 0.25},
			graph.Edge{Src: ext(i), Dst: ext((i * 31) % n), Weight: float32(i%5) + 1})
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "mapped", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// randomSampleRows are n edges of neighbour-like instances (runs of one
// source) over g, the first instance id first, seeds as the sink gives
// them (external ids; dense ids for string ids).
func randomSampleRows(g *graph.Graph, n int, first int64) *SampleRows {
	r := rand.New(rand.NewPCG(uint64(n), 9))
	nv := uint32(g.NumVertices())
	ne := uint64(len(g.Targets))
	rows := &SampleRows{}
	for id := first; rows.Rows() < n; id++ {
		if r.IntN(20) == 0 {
			continue // an instance without edges
		}
		seed := r.Uint32N(nv)
		rows.Starts = append(rows.Starts, int32(rows.Rows()))
		rows.IDs = append(rows.IDs, id)
		if g.HasStringIDs() {
			rows.Seeds = append(rows.Seeds, int64(seed))
		} else {
			rows.Seeds = append(rows.Seeds, g.ExternalID(seed))
		}
		for hop := range int32(1 + r.IntN(3)) {
			src := seed
			for range 1 + r.IntN(12) {
				if rows.Rows() == n {
					return rows
				}
				if hop > 0 {
					src = r.Uint32N(nv)
				}
				rows.Hop = append(rows.Hop, hop)
				rows.Src = append(rows.Src, src)
				rows.Dst = append(rows.Dst, r.Uint32N(nv))
				rows.Edge = append(rows.Edge, r.Uint64N(ne))
			}
		}
	}
	return rows
}

// The sample encoder writes a row group's columns as a Parquet file whose
// rows are the edges with external ids (string ids where the graph has
// them) and edge weights, for every codec, in several pages, whichever
// way the ids are stored; it reuses its buffers from group to group.
func TestSampleEncoderRoundTrip(t *testing.T) {
	for _, gc := range []struct {
		name string
		g    *graph.Graph
	}{{"dense", ringGraph(t, 1<<20)}, {"mapped", mappedGraph(t, 5000)}, {"strings", stringRing(t, 3000)}} {
		for _, comp := range []Compression{Zstd, Snappy, None} {
			for _, weights := range []bool{false, true} {
				if weights && !gc.g.Weighted() {
					continue
				}
				t.Run(fmt.Sprint(gc.name, "/", comp, "/weights=", weights), func(t *testing.T) {
					g := gc.g
					var schema []format.SchemaElement
					switch {
					case g.HasStringIDs():
						schema = schemaOf[stringSampleRow](t)
					case weights:
						schema = schemaOf[weightedSampleRow](t)
					default:
						schema = schemaOf[sampleRow](t)
					}
					e, err := NewSampleEncoder(SampleConfig{Graph: g, Compression: comp, ZstdLevel: zstd.SpeedFastest, Weights: weights, Schema: schema})
					if err != nil {
						t.Fatal(err)
					}
					var buf []byte
					for _, n := range []int{pageValues + 5000, 700} {
						rows := randomSampleRows(g, n, 77)
						frag, err := e.Encode(buf, rows)
						if err != nil {
							t.Fatal(err)
						}
						f, err := parquet.OpenFile(bytes.NewReader(frag), int64(len(frag)))
						if err != nil {
							t.Fatal(err)
						}
						if got := f.NumRows(); got != int64(n) {
							t.Fatalf("%d rows, want %d", got, n)
						}
						if pages := len(f.OffsetIndexes()[4].PageLocations); n > pageValues && pages < 2 {
							t.Errorf("%d pages of dst for %d rows", pages, n)
						}
						var got, exp []any
						switch {
						case g.HasStringIDs():
							type strRow struct {
								InstanceID int64  `parquet:"instance_id"`
								Seed       string `parquet:"seed"`
								Hop        int32  `parquet:"hop"`
								Src        string `parquet:"src"`
								Dst        string `parquet:"dst"`
							}
							rs, err := parquet.Read[strRow](bytes.NewReader(frag), int64(len(frag)))
							if err != nil {
								t.Fatal(err)
							}
							for _, x := range rs {
								got = append(got, x)
							}
							forEachWant(rows, func(k, r int) {
								exp = append(exp, strRow{rows.IDs[k], g.ExternalString(uint32(rows.Seeds[k])), rows.Hop[r], g.ExternalString(rows.Src[r]), g.ExternalString(rows.Dst[r])})
							})
						default:
							rs, err := parquet.Read[weightedSampleRow](bytes.NewReader(frag), int64(len(frag)))
							if err != nil {
								t.Fatal(err)
							}
							for _, x := range rs {
								got = append(got, x)
							}
							forEachWant(rows, func(k, r int) {
								w := weightedSampleRow{rows.IDs[k], rows.Seeds[k], rows.Hop[r], g.ExternalID(rows.Src[r]), g.ExternalID(rows.Dst[r]), 0}
								if weights {
									w.EdgeWeight = g.Weights[rows.Edge[r]]
								}
								exp = append(exp, w)
							})
						}
						if !reflect.DeepEqual(got, exp) {
							t.Fatalf("%d rows read back differ from the %d written", len(got), len(exp))
						}
						buf = frag
					}
				})
			}
		}
	}
}

// forEachWant calls f for each row r of rows with its instance's index k.
func forEachWant(rows *SampleRows, f func(k, r int)) {
	k := 0
	for r := range rows.Rows() {
		for k+1 < len(rows.Starts) && int(rows.Starts[k+1]) <= r {
			k++
		}
		f(k, r)
	}
}

// A vertex or edge beyond the graph, a negative hop or columns of
// different lengths are ErrBadChunk, never a panic.
func TestSampleEncoderRefusesBadRows(t *testing.T) {
	g := mappedGraph(t, 500)
	e, err := NewSampleEncoder(SampleConfig{Graph: g, Compression: Zstd, ZstdLevel: zstd.SpeedFastest, Weights: true, Schema: schemaOf[weightedSampleRow](t)})
	if err != nil {
		t.Fatal(err)
	}
	nv := uint32(g.NumVertices())
	for name, spoil := range map[string]func(*SampleRows){
		"src beyond":  func(r *SampleRows) { r.Src[17] = nv },
		"dst beyond":  func(r *SampleRows) { r.Dst[0] = nv + 9 },
		"edge beyond": func(r *SampleRows) { r.Edge[5] = uint64(len(g.Targets)) },
		"hop":         func(r *SampleRows) { r.Hop[3] = -1 },
		"short dst":   func(r *SampleRows) { r.Dst = r.Dst[:len(r.Dst)-1] },
		"starts":      func(r *SampleRows) { r.Starts[0] = 1 },
	} {
		rows := randomSampleRows(g, 1000, 0)
		spoil(rows)
		if _, err := e.Encode(nil, rows); !errors.Is(err, ErrBadChunk) {
			t.Errorf("%s: %v, want ErrBadChunk", name, err)
		}
	}
	if _, err := NewSampleEncoder(SampleConfig{Graph: g, Compression: Zstd, ZstdLevel: zstd.SpeedFastest, Schema: schemaOf[weightedSampleRow](t)}); err == nil {
		t.Error("a schema with edge weights taken for rows without")
	}
}

// neighbourRows are n edges of neighbour [25, 10] samples over nv
// vertices with random ids, as BenchmarkWriteSamples (sink) draws them.
func neighbourRows(nv uint32, n int) *SampleRows {
	r := rand.New(rand.NewPCG(1, 2))
	rows := &SampleRows{}
	for id := int64(0); rows.Rows() < n; id++ {
		seed := r.Uint32N(nv)
		rows.Starts = append(rows.Starts, int32(rows.Rows()))
		rows.IDs, rows.Seeds = append(rows.IDs, id), append(rows.Seeds, int64(seed))
		var hop1 [25]uint32
		for k := range hop1 {
			hop1[k] = r.Uint32N(nv)
			rows.Hop, rows.Src, rows.Dst = append(rows.Hop, 0), append(rows.Src, seed), append(rows.Dst, hop1[k])
		}
		for _, v := range hop1 {
			for range 10 {
				rows.Hop, rows.Src, rows.Dst = append(rows.Hop, 1), append(rows.Src, v), append(rows.Dst, r.Uint32N(nv))
			}
		}
	}
	rows.Hop, rows.Src, rows.Dst = rows.Hop[:n], rows.Src[:n], rows.Dst[:n]
	for len(rows.Starts) > 0 && int(rows.Starts[len(rows.Starts)-1]) >= n {
		rows.Starts, rows.IDs, rows.Seeds = rows.Starts[:len(rows.Starts)-1], rows.IDs[:len(rows.IDs)-1], rows.Seeds[:len(rows.Seeds)-1]
	}
	return rows
}

// Under zstd a neighbour sample's row group takes no more bytes, column by
// column (within 5%), than parquet-go's pages of the same rows: the
// per-instance columns' repeated packed deltas must reach zstd's match
// finder (the codec's literal rule made the seed column eight times
// larger), and src's runs frames must code as tightly as zstd's matches
// (in the predefined match length table they took 12% more).
func TestSampleEncoderSizeMatchesParquetGo(t *testing.T) {
	g := ringGraph(t, 1<<22)
	rows := neighbourRows(uint32(g.NumVertices()), 1<<16)
	e, err := NewSampleEncoder(SampleConfig{Graph: g, Compression: Zstd, ZstdLevel: zstd.SpeedFastest, Schema: schemaOf[sampleRow](t)})
	if err != nil {
		t.Fatal(err)
	}
	frag, err := e.Encode(nil, rows)
	if err != nil {
		t.Fatal(err)
	}
	var want []sampleRow
	forEachWant(rows, func(k, r int) {
		want = append(want, sampleRow{rows.IDs[k], rows.Seeds[k], rows.Hop[r], int64(rows.Src[r]), int64(rows.Dst[r])})
	})
	var buf bytes.Buffer
	pw := parquet.NewGenericWriter[sampleRow](&buf, parquet.Compression(&pqzstd.Codec{Level: pqzstd.SpeedFastest}),
		parquet.DataPageVersion(1), parquet.MaxRowsPerRowGroup(1<<16))
	if _, err := pw.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	sizes := func(data []byte) map[string]int64 {
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, cc := range f.Metadata().RowGroups[0].Columns {
			m[cc.MetaData.PathInSchema[0]] += cc.MetaData.TotalCompressedSize
		}
		return m
	}
	ours, theirs := sizes(frag), sizes(buf.Bytes())
	for col, n := range theirs {
		if ours[col] > n*105/100+64 {
			t.Errorf("%s: %d bytes, parquet-go's %d", col, ours[col], n)
		}
	}
	t.Logf("bytes a column, ours and parquet-go's: %v %v", ours, theirs)
}

// The sample encoder's fragments are the same bytes as those of the
// encoder that wrote the committed digests (commit 650c928): speed-ups of
// the encoder must not change its output (the parts' bytes, and so the
// batches' fingerprints and the readers' view, follow from these). Each
// case covers a path: 32-bit ids (the AVX2 delta packer, src runs frames),
// 64-bit external ids and seeds, edge weights, string ids, every codec,
// and row groups of several pages.
func TestSampleEncoderBytesUnchanged(t *testing.T) {
	dense, mapped, strs := ringGraph(t, 1<<22), mappedGraph(t, 5000), stringRing(t, 3000)
	cases := []struct {
		name    string
		g       *graph.Graph
		rows    *SampleRows
		comp    Compression
		weights bool
		want    string
	}{
		{"neighbour/zstd", dense, neighbourRows(1<<22, 1<<16), Zstd, false, "827a9239d6c137918b9fd352be2c73dda2d2e563076d3b29e3441a5e583beba0"},
		{"neighbour/pages/zstd", dense, neighbourRows(1<<22, 3*pageValues-77), Zstd, false, "fb93993402bc09fdb225ea549b7d3096b45f01bd83bf94eb90685cfeb0489001"},
		{"neighbour/snappy", dense, neighbourRows(1<<22, 1<<16), Snappy, false, "1c2de0f5cd61f94de91758e8c07f0bf661bc127c78785aabfa26c584d5e9fdc3"},
		{"neighbour/none", dense, neighbourRows(1<<22, 1<<16), None, false, "bdea0961201ddc1350c38a26c1248d95d93fefeecc5d610694400b91249a191f"},
		{"mapped/weights/zstd", mapped, randomSampleRows(mapped, 3*pageValues-5, 1<<33), Zstd, true, "8db12d413c70854e4c4da9aa447574c03dc1674aaef571926f18ca174f8f8347"},
		{"mapped/zstd", mapped, randomSampleRows(mapped, 1<<16, 7), Zstd, false, "8fc4928b2317f18d2e16e765fe00f6b340a6ecd18fcbb88e04401e10e4c4369c"},
		{"mapped/weights/none", mapped, randomSampleRows(mapped, 1<<16, 7), None, true, "c085e37748c3eaad2eb870384679e90c8a433756c4ddaeb261e630f14fa54b44"},
		{"strings/zstd", strs, randomSampleRows(strs, 1<<16, 3), Zstd, false, "e35a304ef8d4f77bcefe2f3873f6f2ffbe89b7cd6ae733ab607adcd448a97aeb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			schema := schemaOf[sampleRow](t)
			switch {
			case tc.g.HasStringIDs():
				schema = schemaOf[stringSampleRow](t)
			case tc.weights:
				schema = schemaOf[weightedSampleRow](t)
			}
			e, err := NewSampleEncoder(SampleConfig{Graph: tc.g, Compression: tc.comp, ZstdLevel: zstd.SpeedFastest, Weights: tc.weights, Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			// Twice: the second Encode reuses the buffers of the first.
			for range 2 {
				frag, err := e.Encode(nil, tc.rows)
				if err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprintf("%x", sha256.Sum256(frag)); got != tc.want {
					t.Errorf("fragment of %d bytes has SHA-256 %s, want %s", len(frag), got, tc.want)
				}
			}
		})
	}
}

// BenchmarkSampleEncode encodes one row group (65,536 edges) of neighbour
// [25, 10] samples a iteration, as the sink's encoders do on each core;
// reported per edge.
func BenchmarkSampleEncode(b *testing.B) {
	for _, tc := range []struct {
		name    string
		weights bool
	}{{"plain", false}, {"weights", true}} {
		b.Run(tc.name, func(b *testing.B) {
			g := mappedGraph(b, 1<<16)
			g.IDs = nil // dense ids: the 32-bit paths, as most graphs take
			rows := neighbourRows(uint32(g.NumVertices()), 1<<16)
			r := rand.New(rand.NewPCG(3, 4))
			rows.Edge = make([]uint64, rows.Rows())
			for i := range rows.Edge {
				rows.Edge[i] = r.Uint64N(uint64(len(g.Targets)))
			}
			var buf bytes.Buffer
			var schema []format.SchemaElement
			if tc.weights {
				if err := parquet.NewGenericWriter[weightedSampleRow](&buf).Close(); err != nil {
					b.Fatal(err)
				}
			} else if err := parquet.NewGenericWriter[sampleRow](&buf).Close(); err != nil {
				b.Fatal(err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
			if err != nil {
				b.Fatal(err)
			}
			schema = f.Metadata().Schema
			e, err := NewSampleEncoder(SampleConfig{Graph: g, Compression: Zstd, ZstdLevel: zstd.SpeedFastest, Weights: tc.weights, Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			var frag []byte
			b.ResetTimer()
			for b.Loop() {
				if frag, err = e.Encode(frag, rows); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N) * float64(rows.Rows())
			b.ReportMetric(b.Elapsed().Seconds()*1e9/n, "ns/edge")
			b.ReportMetric(n*12/b.Elapsed().Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(len(frag))/float64(rows.Rows()), "B/edge")
		})
	}
}

// TestDeltaRunsMatchesFilledColumn checks appendDeltaRuns32 against the
// column written out and packed (fillRuns, appendDeltaUint32), for runs
// shorter and longer than a block, pages starting inside a run, and values
// at and above 2^31 (the packer's scalar path).
func TestDeltaRunsMatchesFilledColumn(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		rows, maxRun int
		top          uint64
	}{{1, 1, 10}, {2, 1, 10}, {129, 1, 1 << 20}, {300, 275, 1 << 20}, {1000, 3, 1 << 31}, {70000, 275, 1 << 22},
		{70000, 40, 1 << 32}, {65536, 1000, 1 << 32}, {5000, 128, 1 << 30}, {5000, 129, 1 << 30}} {
		rows := &SampleRows{}
		for n := 0; n < tc.rows; {
			l := min(1+int(r.Uint64N(uint64(tc.maxRun))), tc.rows-n)
			rows.Starts = append(rows.Starts, int32(n))
			rows.IDs = append(rows.IDs, int64(r.Uint64N(tc.top)))
			n += l
		}
		rows.Hop = make([]int32, tc.rows)
		for _, pg := range [][2]int{{0, tc.rows}, {tc.rows / 3, tc.rows}, {tc.rows / 2, tc.rows/2 + min(tc.rows/2, 777)}} {
			p0, p1 := pg[0], pg[1]
			if p0 >= p1 {
				continue
			}
			col := make([]uint32, p1-p0)
			fillRuns(rows, rows.IDs, p0, p1, col, func(v int64) uint32 { return uint32(v) })
			want, wlo, whi := appendDeltaUint32([]byte("x"), col)
			got, lo, hi := appendDeltaRuns32([]byte("x"), rows, rows.IDs, p0, p1)
			if !bytes.Equal(got, want) || lo != wlo || hi != whi {
				t.Errorf("%d rows, runs <= %d, values < %d, rows %d..%d: %d bytes, bounds %d..%d; want %d bytes, %d..%d",
					tc.rows, tc.maxRun, tc.top, p0, p1, len(got), lo, hi, len(want), wlo, whi)
			}
		}
	}
}
