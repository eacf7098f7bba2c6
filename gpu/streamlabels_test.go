package gpu

import (
	"bytes"
	"context"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// labelLayoutWant is g's label layout (entries, ends) made from the label
// tables' own regrouping (walk.ForLabelSegments, what the CPU engine and
// the GPU's label_tables_build hold): entries in segment order, 12-byte
// {prob, keep, alt} of each segment's alias table for a weighted graph,
// the target for an unweighted one; ends of each vertex's first nl-1
// segments relative to its first edge.
func labelLayoutWant(g *graph.Graph) ([]uint32, []uint32) {
	nl := g.NumLabels
	per := uint64(1)
	if g.Weighted() {
		per = 3
	}
	ent := make([]uint32, per*uint64(g.NumEdges()))
	ends := make([]uint32, g.NumVertices()*(nl-1))
	walk.ForLabelSegments(g, g.Weighted(), func(v, l int, seg uint64, adj []uint32, prob []float32, alias []uint32) {
		for i, x := range adj {
			if g.Weighted() {
				k := 3 * (seg + uint64(i))
				ent[k], ent[k+1], ent[k+2] = math.Float32bits(prob[i]), x, adj[alias[i]]
			} else {
				ent[seg+uint64(i)] = x
			}
		}
		if l < nl-1 {
			ends[v*(nl-1)+l] = uint32(seg + uint64(len(adj)) - g.Offsets[v])
		}
	})
	return ent, ends
}

// TestLabelLayoutIsTheLabelTables: the label layout MetaPath streams, built
// in memory (the pinned path) and as a file from the graph file's targets,
// weights and labels (the disk path, each section read once), is the label
// tables' regrouping and per-segment alias tables word for word, with the
// segment ends that delimit them, for weighted and unweighted graphs of
// one, three and five labels.
func TestLabelLayoutIsTheLabelTables(t *testing.T) {
	for _, c := range []struct {
		weighted bool
		labels   int
	}{{true, 3}, {false, 3}, {true, 5}, {false, 1}, {true, 1}} {
		g := savedGraphOf(t, graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 7, Undirected: true,
			Weighted: c.weighted, Labels: c.labels, Name: "labels"})
		wantEnt, wantEnds := labelLayoutWant(g)
		ent := make([]uint32, len(wantEnt))
		ends := make([]uint32, len(wantEnds))
		fillLabelEntries(g, c.labels, ent, ends)
		if !equalWords(ent, wantEnt) || !equalWords(ends, wantEnds) {
			t.Fatalf("weighted=%v labels=%d: the in-memory label layout differs from the label tables", c.weighted, c.labels)
		}
		f, fends, read, err := buildEntriesFile(context.Background(), g, t.TempDir(), c.labels)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantRead := 5 * g.NumEdges()
		if c.weighted {
			wantRead += 4 * g.NumEdges()
		}
		switch {
		case !bytes.Equal(got, bytesOf(wantEnt)):
			t.Fatalf("weighted=%v labels=%d: the label entries file (%d bytes) differs from the label tables (%d)", c.weighted, c.labels, len(got), 4*len(wantEnt))
		case !equalWords(fends, wantEnds):
			t.Fatalf("weighted=%v labels=%d: the file's segment ends differ", c.weighted, c.labels)
		case read != wantRead:
			t.Fatalf("weighted=%v labels=%d: read %d bytes, want %d (each section once)", c.weighted, c.labels, read, wantRead)
		}
	}
}

func equalWords(a, b []uint32) bool {
	return len(a) == len(b) && bytes.Equal(bytesOf(a), bytesOf(b))
}

// TestPlanStreamCarriesLabels: a plan of a graph MetaPath walks on label
// tables carries its label count and budgets the segment ends (labels-1
// words a vertex) on the device inside the budget; one label needs no
// ends; an unlabelled graph or one of more labels than the label tables
// take carries none, and MetaPath is refused on it; a budget too small for
// the ends streams without them.
func TestPlanStreamCarriesLabels(t *testing.T) {
	g := placementGraph(t) // 4 labels
	for _, c := range []struct {
		labelled         bool
		labels, want     int
		wantBytes        int64
		metapathStreamed bool
	}{
		{true, 4, 4, uploadBytes(int64(g.NumVertices()) * 3 * 4), true},
		{true, 1, 1, 0, true},
		{true, 16, 16, uploadBytes(int64(g.NumVertices()) * 15 * 4), true},
		{true, 17, 0, 0, false},
		{false, 0, 0, 0, false},
	} {
		s := shapeOf(g)
		s.labelled, s.labels = c.labelled, int64(c.labels)
		budget := streamFixedBytes(s.vertices, c.wantBytes) + s.edges*12/2
		p, err := planStream(s, g.Offsets, budget, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		checkStreamPlan(t, g, p)
		if p.Labels != c.want || p.LabelBytes != c.wantBytes || p.DeviceBytes() > budget || p.Streamed() == 0 {
			t.Fatalf("%d labels: plan carries %d labels, %d bytes (want %d, %d), device %d of %d", c.labels, p.Labels, p.LabelBytes, c.want, c.wantBytes, p.DeviceBytes(), budget)
		}
		if strings.Contains(p.String(), "metapath") != (c.want > 0) {
			t.Fatalf("%d labels: %s", c.labels, p)
		}
		err = streamSupported(walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{0}}, p)
		if (err == nil) != c.metapathStreamed {
			t.Fatalf("%d labels: metapath: %v", c.labels, err)
		}
	}
	// A budget that holds the offsets and the buffers but not the ends
	// beside them streams without labels, and MetaPath is refused
	// naming the ends; a budget that holds neither fails as before.
	s := shapeOf(g)
	ends := streamLabelBytes(s.vertices, 4)
	budget := streamFixedBytes(s.vertices, 0) + 3*allocBytes(16<<10) + ends/2
	p, err := planStream(s, g.Offsets, budget, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	checkStreamPlan(t, g, p)
	err = streamSupported(walk.Algorithm{Kind: walk.MetaPath, Length: 5, Schema: []uint8{0}}, p)
	if p.Labels != 0 || p.LabelBytes != 0 || p.LabelsLeftOut != ends || p.DeviceBytes() > budget ||
		!strings.Contains(p.String(), "no metapath") || err == nil || !strings.Contains(err.Error(), "label segment ends") {
		t.Fatalf("plan %s (labels %d, %d bytes, %d left out), metapath: %v", p, p.Labels, p.LabelBytes, p.LabelsLeftOut, err)
	}
	if _, err := planStream(s, g.Offsets, streamFixedBytes(s.vertices, 0)+1000, 16<<10); err == nil {
		t.Fatal("a budget below two buffers planned")
	}
}
