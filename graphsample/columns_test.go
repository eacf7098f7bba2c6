package graphsample

import (
	"context"
	"reflect"
	"testing"

	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// SampleColumnsOn gives SampleRange's edges, instance for instance, on the
// CPU and through a device sampler that hands over per-instance edges,
// with and without edge indices, in waves of changing sizes into one
// reused set of columns (smaller waves after larger ones leave no stale
// rows behind).
func TestSampleColumnsOnEqualsSampleRange(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	eng, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	starts := []uint32{0, 1, 2, 3, 11, 12, 15, 4}
	for _, p := range []SampleParams{
		{Kind: NeighborSampling, Fanouts: []int{3, 2}},
		{Kind: NeighborSampling, Fanouts: []int{1, 4}, EdgeBias: Bias{Kind: BiasEdgeWeight}},
		{Kind: LayerSampling, LayerSizes: []int{3, 5}},
		{Kind: ForestFire, BurnProb: 0.6, Depth: 3, MaxVertices: 6},
		{Kind: Snowball, Depth: 2},
		{Kind: FrontierWalk, FrontierSize: 4, Samples: 20},
	} {
		p.Seed, p.InstancesPerSeed = 7, 3
		want, _, err := Sample(ctx, g, p, starts, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, withEdges := range []bool{true, false} {
			for _, e := range []walk.Engine{nil, &oneByOne{Engine: eng, g: g}} {
				cols := &Columns{WithEdges: withEdges}
				var got [][]SampledEdge
				var edges int64
				for lo, wave := 0, 5; lo < len(want); lo, wave = lo+wave, 12-wave {
					wave = min(wave, len(want)-lo)
					st, err := SampleColumnsOn(ctx, e, g, p, starts, lo, wave, 2, cols)
					if err != nil {
						t.Fatal(err)
					}
					if cols.Instances() != wave || st.Instances != int64(wave) || st.Edges != cols.Len() {
						t.Fatalf("%s: wave %d+%d: %d instances, stats %+v, %d rows", p, lo, wave, cols.Instances(), st, cols.Len())
					}
					edges += cols.Len()
					got = append(got, cols.Edges()...)
				}
				w := want
				if !withEdges {
					w = withoutEdgeIndices(want)
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s (engine %v, edges %v): columns differ from SampleRange", p, e, withEdges)
				}
				var n int64
				for _, es := range want {
					n += int64(len(es))
				}
				if edges != n {
					t.Errorf("%s: %d edges in columns, want %d", p, edges, n)
				}
			}
		}
	}
}

// withoutEdgeIndices is edges with every Edge zero (columns without edge
// indices).
func withoutEdgeIndices(edges [][]SampledEdge) [][]SampledEdge {
	out := make([][]SampledEdge, len(edges))
	for k, es := range edges {
		if es == nil {
			continue
		}
		out[k] = make([]SampledEdge, len(es))
		for j, e := range es {
			e.Edge = 0
			out[k][j] = e
		}
	}
	return out
}

// Columns keep their memory when a wave is up to a fifth larger than the
// first: `walkstage walk`'s second wave is (message.SampleWave grows the
// wave to the mean it measured), and the GPU engine page-locks column
// memory that comes back (gpu/hostreg.go), so a set that grew at its
// second wave was locked a second time.
func TestColumnsKeepMemoryForALargerWave(t *testing.T) {
	const first = 1_800_000
	c := Columns{WithEdges: true}
	c.Reset(30_000, first)
	hop, src, dst, edge, off := &c.Hop[0], &c.Src[0], &c.Dst[0], &c.Edge[0], &c.Offsets[0]
	c.Reset(36_000, first*6/5)
	if len(c.Src) != first*6/5 || len(c.Offsets) != 36_001 {
		t.Fatalf("reset to %d edges of 36,000 instances: %d edges, %d offsets", first*6/5, len(c.Src), len(c.Offsets))
	}
	for _, m := range []struct {
		name  string
		moved bool
	}{{"Hop", hop != &c.Hop[0]}, {"Src", src != &c.Src[0]}, {"Dst", dst != &c.Dst[0]}, {"Edge", edge != &c.Edge[0]},
		{"Offsets", off != &c.Offsets[0]}} {
		if m.moved {
			t.Errorf("%s moved to fresh memory for a wave a fifth larger", m.name)
		}
	}
}
