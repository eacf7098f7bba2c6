package graphsample

import (
	"context"
	"reflect"
	"testing"
)

// mergeCases are the samplers and parts a merged call is checked with:
// parts of different seeds, sizes and first instances, one part empty,
// instances_per_seed above 1 so that a part starts inside a seed's
// repetitions.
func mergeCases() ([]SampleParams, []MergePart) {
	params := []SampleParams{
		{Kind: NeighborSampling, Fanouts: []int{3, 2}},
		{Kind: NeighborSampling, Fanouts: []int{3, 2}, EdgeBias: Bias{Kind: BiasEdgeWeight}},
		{Kind: NeighborSampling, Fanouts: []int{3, 2}, Replace: true},
		{Kind: LayerSampling, LayerSizes: []int{3, 5}},
		{Kind: ForestFire, BurnProb: 0.5, Depth: 3},
		{Kind: Snowball, Depth: 2},
		{Kind: FrontierWalk, FrontierSize: 2, Samples: 20},
	}
	for k := range params {
		params[k].InstancesPerSeed = 3
	}
	parts := []MergePart{
		{Seed: 7, Starts: []uint32{0, 1, 2, 3, 11, 12}, First: 0, Count: 9},
		{Seed: 8, Starts: []uint32{15, 4, 0, 1, 2, 3, 11, 12}, First: 8, Count: 4}, // ids 8.. follow the first part's last, 8
		{Seed: 7, Starts: []uint32{3, 2}, First: 0, Count: 0},
		{Seed: 1 << 40, Starts: []uint32{12, 11, 2, 3, 4, 15, 0, 1}, First: 2, Count: 10},
	}
	return params, parts
}

// A merged call gives each part the edges of its own call (the keys are
// the parts', not the call's), with one and with several workers.
func TestMergedSampleEqualsEachPartAlone(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	params, parts := mergeCases()
	for _, p := range params {
		var want [][]SampledEdge
		for _, pt := range parts {
			q := p
			q.Seed = pt.Seed
			alone, _, err := SampleRange(ctx, g, q, pt.Starts, pt.First, pt.Count, 1)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			want = append(want, alone...)
		}
		m, starts := Merge(p, parts)
		for _, workers := range []int{1, 3} {
			got, st, err := SampleRange(ctx, g, m, starts, 0, -1, workers)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if st.Instances != int64(len(want)) || !reflect.DeepEqual(got, want) {
				t.Errorf("%s, %d workers: the merged call's samples differ from the parts' own", p, workers)
			}
		}
		// Columns through SampleColumnsOn (the stage's path) too.
		c := Columns{WithEdges: true}
		if _, err := SampleColumnsOn(ctx, nil, g, m, starts, 0, len(want), 2, &c); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.Edges(), want) {
			t.Errorf("%s: merged columns differ from the parts' own", p)
		}
	}
}

func TestSegmentsOutOfOrderRejected(t *testing.T) {
	g := testGraph(t)
	p := SampleParams{Kind: Snowball, Depth: 1, InstancesPerSeed: 1,
		Segments: []Segment{{First: 0, Seed: 1}, {First: 2, Seed: 2}, {First: 2, Seed: 3}}}
	if _, _, err := SampleRange(context.Background(), g, p, []uint32{0, 1, 2, 3}, 0, -1, 1); err == nil {
		t.Error("segments out of order: no error")
	}
	p.Segments = []Segment{{First: 1, Seed: 1}}
	if _, _, err := SampleRange(context.Background(), g, p, []uint32{0, 1, 2, 3}, 0, -1, 1); err == nil {
		t.Error("segments starting after the call's first instance: no error")
	}
}
