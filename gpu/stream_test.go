package gpu

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// TestPlanStreamCoversTheGraphWithinBudget: for budgets from a sliver of
// the graph to all of it, the partitions are contiguous vertex ranges that
// cover the graph, each within the buffers (or one vertex), the plan's
// device bytes stay within the budget, and resident partitions are the
// densest that fit.
func TestPlanStreamCoversTheGraphWithinBudget(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		g := placementGraph(t)
		s := shapeOf(g)
		s.weighted = weighted
		whole := s.edges * streamEntryBytes(weighted)
		for _, share := range []float64{0.1, 0.25, 0.5, 0.9, 1.5} {
			budget := streamFixedBytes(s.vertices, streamLabelBytes(s.vertices, streamLabels(s))) + int64(share*float64(whole))
			for _, partBytes := range []int64{0, 16 << 10} {
				if 4*partBytes > int64(share*float64(whole)) {
					continue // two buffers would not fit
				}
				p, err := planStream(s, g.Offsets, budget, partBytes)
				if err != nil {
					t.Fatalf("weighted=%v share %v part %d: %v", weighted, share, partBytes, err)
				}
				checkStreamPlan(t, g, p)
				if p.DeviceBytes() > budget {
					t.Fatalf("weighted=%v share %v: device %d > budget %d", weighted, share, p.DeviceBytes(), budget)
				}
				if share >= 1.5 {
					if len(p.Parts) != 1 || !p.Parts[0].Resident {
						t.Fatalf("share %v: want one resident partition, got %+v", share, p.Parts)
					}
					continue
				}
				if p.Streamed() == 0 {
					t.Fatalf("weighted=%v share %v: nothing streamed, the graph does not fit", weighted, share)
				}
				if share >= 0.25 && p.ResidentEdges() == 0 {
					t.Fatalf("weighted=%v share %v part %d: nothing resident: %s", weighted, share, partBytes, p)
				}
				if partBytes > 0 && len(p.Parts) < 10 {
					t.Fatalf("part %d: only %d partitions", partBytes, len(p.Parts))
				}
				// No streamed partition fits what the budget has left while
				// a sparser one is resident.
				left := budget - p.DeviceBytes()
				for _, x := range p.Parts {
					if !x.Resident && (x.EHi-x.ELo)*p.EntryBytes <= left-64 {
						t.Fatalf("share %v: streamed partition %+v fits the %d bytes left", share, x, left)
					}
				}
			}
		}
	}
}

func checkStreamPlan(t *testing.T, g *graph.Graph, p *StreamPlan) {
	t.Helper()
	var v int64
	for i, x := range p.Parts {
		if x.VLo != v || x.VHi <= x.VLo {
			t.Fatalf("partition %d: vertices [%d, %d) after %d", i, x.VLo, x.VHi, v)
		}
		if x.ELo != int64(g.Offsets[x.VLo]) || x.EHi != int64(g.Offsets[x.VHi]) {
			t.Fatalf("partition %d: edges [%d, %d), offsets say [%d, %d)", i, x.ELo, x.EHi, g.Offsets[x.VLo], g.Offsets[x.VHi])
		}
		if len(p.Parts) > 1 && x.EHi-x.ELo > p.BufferEdges {
			t.Fatalf("partition %d: %d edges, buffers hold %d", i, x.EHi-x.ELo, p.BufferEdges)
		}
		v = x.VHi
	}
	if v != int64(g.NumVertices()) {
		t.Fatalf("partitions end at %d of %d vertices", v, g.NumVertices())
	}
	if len(p.Parts) > maxStreamParts {
		t.Fatalf("%d partitions", len(p.Parts))
	}
}

// TestPlanStreamHubAndTooSmall: a star's hub larger than the asked
// partition gets a partition of its own and the buffers grow to it; a
// budget below two such buffers fails naming the size that would do, and
// that size plans; a budget below the offsets is a MemoryPlanError.
func TestPlanStreamHubAndTooSmall(t *testing.T) {
	var edges []graph.Edge
	for i := int64(1); i <= 20000; i++ {
		edges = append(edges, graph.Edge{Src: 5, Dst: i})
		for k := int64(1); k <= 3; k++ {
			edges = append(edges, graph.Edge{Src: i, Dst: (i*7 + k) % 20001})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "star", DenseIDs: true, NumVertices: 20001})
	if err != nil {
		t.Fatal(err)
	}
	s := shapeOf(g)
	hub, _ := g.MaxDegree()
	fixed := streamFixedBytes(s.vertices, streamLabelBytes(s.vertices, streamLabels(s)))
	p, err := planStream(s, g.Offsets, fixed+2*allocBytes(int64(hub)*4)+20000, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	checkStreamPlan(t, g, p)
	if p.BufferEdges < int64(hub) || hub < 19999 {
		t.Fatalf("buffers of %d edges, the hub has %d", p.BufferEdges, hub)
	}
	_, err = planStream(s, g.Offsets, fixed+100<<10, 4<<10)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the largest vertex has %d", hub)) {
		t.Fatalf("small budget: %v", err)
	}
	if _, err := planStream(s, g.Offsets, fixed+2*allocBytes(int64(hub)*4), 4<<10); err != nil {
		t.Fatalf("the budget the error names: %v", err)
	}
	var mpe *MemoryPlanError
	if _, err := planStream(s, g.Offsets, 1000, 0); !errors.As(err, &mpe) {
		t.Fatalf("budget below the offsets: %v", err)
	}
}

// TestChooseStreamedMostActiveFirst: the streamed partition with the most
// waiting walkers, a loaded one counting double, resident and skipped ones
// left out; the victim buffer is an empty one, else the less busy.
func TestChooseStreamedMostActiveFirst(t *testing.T) {
	parts := []StreamPart{{}, {}, {Resident: true}, {}, {}}
	none := [2]int{-1, -1}
	cases := []struct {
		name   string
		counts []uint32
		loaded [2]int
		skip   int
		want   int
	}{
		{"most waiting", []uint32{3, 9, 0, 5, 1}, none, -1, 1},
		{"resident left out", []uint32{3, 9, 50, 5, 1}, none, -1, 1},
		{"loaded counts double", []uint32{3, 9, 0, 5, 1}, [2]int{3, -1}, -1, 3},
		{"skip", []uint32{3, 9, 0, 5, 1}, none, 1, 3},
		{"ties to the lower", []uint32{4, 0, 0, 4, 0}, none, -1, 0},
		{"none waiting", []uint32{0, 0, 7, 0, 0}, none, -1, -1},
	}
	for _, c := range cases {
		if got := chooseStreamed(parts, c.counts, c.loaded, c.skip); got != c.want {
			t.Errorf("%s: chose %d, want %d", c.name, got, c.want)
		}
	}
	counts := []uint32{3, 9, 0, 5, 1}
	for _, c := range []struct {
		loaded [2]int
		want   int
	}{{none, 0}, {[2]int{1, -1}, 1}, {[2]int{1, 3}, 1}, {[2]int{4, 1}, 0}} {
		if got := streamVictim(counts, c.loaded); got != c.want {
			t.Errorf("victim of %v: %d, want %d", c.loaded, got, c.want)
		}
	}
}

// TestStreamSupported: DeepWalk and PPR stream on the uniform and alias
// samplers; MetaPath streams on label tables (the auto sampler, a plan
// that carries labels); Node2Vec streams on the rejection sampler, from
// pinned host memory and from disk; Node2Vec on a forced reservoir
// sampler, a forced reservoir sampler and MetaPath without label tables
// are refused with ErrInvalidAlgorithm naming the limit and the way out
// (from disk the host budget, not the placement plan, which would need the
// graph in memory).
func TestStreamSupported(t *testing.T) {
	meta := walk.Algorithm{Kind: walk.MetaPath, Length: 80, Schema: []uint8{0, 1}}
	metaZPRS := meta
	metaZPRS.Stepper = walk.StepperZPRS
	cases := []struct {
		alg    walk.Algorithm
		labels int
		ok     bool
		says   string
	}{
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 80}, 0, true, ""},
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}, 0, true, ""},
		{walk.Algorithm{Kind: walk.PPR, Length: 80, StopProb: 0.2, Weighted: true}, 0, true, ""},
		{meta, 5, true, ""},
		{walk.Algorithm{Kind: walk.MetaPath, Length: 80, Schema: []uint8{2}, Weighted: true}, 3, true, ""},
		{walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 1, Q: 2}, 5, true, ""},
		{walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 0.5, Q: 4, Weighted: true}, 0, true, ""},
		{walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 1, Q: 2, Stepper: walk.StepperZPRS}, 0, false, "rejection sampler only"},
		{walk.Algorithm{Kind: walk.Temporal, Length: 80}, 0, false, "deepwalk, ppr, node2vec and metapath only"},
		{meta, 0, false, "1 to 16 labels"},
		{metaZPRS, 5, false, "forces zprs"},
		{walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS}, 0, false, "leave the sampler auto"},
	}
	for _, disk := range []bool{false, true} {
		for _, c := range cases {
			p := &StreamPlan{Labels: c.labels}
			if disk {
				p.Disk = &DiskStream{}
			}
			ok, says := c.ok, c.says
			err := streamSupported(c.alg, p)
			if (err == nil) != ok || (err != nil && !errors.Is(err, walk.ErrInvalidAlgorithm)) {
				t.Errorf("disk=%v %+v: %v", disk, c.alg, err)
			}
			if err != nil && !strings.Contains(err.Error(), says) {
				t.Errorf("disk=%v %+v: %v does not say %q", disk, c.alg, err, says)
			}
			// From disk, the hint names the host budget, not the
			// placement plan (which would need the graph in memory).
			if err != nil && c.alg.Kind == walk.Temporal && disk != strings.Contains(err.Error(), "WALKSTAGE_HOST_MEMORY_LIMIT") {
				t.Errorf("disk=%v: %v", disk, err)
			}
		}
	}
	for _, s := range []string{"auto", "on", "off"} {
		m, err := ParseStreamMode(s)
		if err != nil || m.String() != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	if _, err := ParseStreamMode("yes"); err == nil {
		t.Error("yes parsed")
	}
}

// TestStreamCheaperFollowsTheBatch: a batch of millions of walks copies the
// streamed partitions in, a stage-sized batch reads them in place, and a
// plan with nothing streamed never copies (the figures are the scale-22
// graph's: 128 M edges, 37% resident). Short walks (MetaPath's 14 of 80
// steps on five labels, PPR's 4 at stop 0.2) read in place where
// full-length ones copy: the sweeps last as long, the steps are fewer.
func TestStreamCheaperFollowsTheBatch(t *testing.T) {
	p := &StreamPlan{Edges: 128e6, Parts: []StreamPart{{ELo: 0, EHi: 47e6, Resident: true}, {ELo: 47e6, EHi: 128e6}}}
	full := walk.StepsEstimate{Mean: 80, Longest: 80}
	for _, c := range []struct {
		name string
		st   walk.StepsEstimate
	}{
		{"metapath, 14.3 of 80 steps", walk.StepsEstimate{Mean: 14.3, Longest: 80}},
		{"ppr 0.2", walk.StepsEstimate{Mean: 4, Longest: 70}},
	} {
		if streamCheaper(p, 4_194_304, c.st, 12, 12) {
			t.Errorf("%s, 4.2 M weighted walks: copying is cheaper, want in place", c.name)
		}
	}
	cases := []struct {
		name                string
		walks               int64
		copyBytes, readByte int64
		want                bool
	}{
		{"weighted, 16.7 M walks", 16_777_216, 12, 12, true},
		{"weighted, 4.2 M walks", 4_194_304, 12, 12, true},
		{"weighted, a 10,000-walk request", 10_000, 12, 12, false},
		{"uniform of a weighted graph, 4.2 M walks", 4_194_304, 4, 12, true},
		{"unweighted, 4.2 M walks", 4_194_304, 4, 4, true},
		{"unweighted, 1 M walks", 1 << 20, 4, 4, false},
	}
	for _, c := range cases {
		if got := streamCheaper(p, c.walks, full, c.copyBytes, c.readByte); got != c.want {
			t.Errorf("%s: copy cheaper %v, want %v", c.name, got, c.want)
		}
	}
	all := &StreamPlan{Edges: 128e6, Parts: []StreamPart{{ELo: 0, EHi: 128e6, Resident: true}}}
	if streamCheaper(all, 16_777_216, full, 12, 12) {
		t.Error("nothing streamed, yet copying is cheaper")
	}
}

// TestVisitWalkers: a visit walks the waiting walkers of its streamed
// partition and of the resident ones; a visit of the resident ones alone
// (or in place) walks every waiting walker.
func TestVisitWalkers(t *testing.T) {
	parts := []StreamPart{{Resident: true}, {}, {}, {Resident: true}}
	counts := []uint32{5, 7, 11, 2, 99} // the last: Node2Vec's scan count, not a partition
	for _, c := range []struct {
		cur  uint64
		want uint64
	}{{1, 14}, {2, 18}, {noPart, 25}} {
		if got := visitWalkers(parts, counts, c.cur); got != c.want {
			t.Errorf("visit of %#x: %d walkers, want %d", c.cur, got, c.want)
		}
	}
}

// TestStreamTail: a copying batch reads its rest in place once the steps
// its walkers have left cost less there than the copies they wait for,
// and never when nothing is left to copy or nothing is streamed.
func TestStreamTail(t *testing.T) {
	// Ten partitions of 1 M edges, the first two resident: 80% streamed.
	plan := &StreamPlan{Edges: 10 << 20, EntryBytes: 12}
	for i := range 10 {
		plan.Parts = append(plan.Parts, StreamPart{VLo: int64(i), VHi: int64(i + 1), ELo: int64(i) << 20, EHi: int64(i+1) << 20, Resident: i < 2})
	}
	waitAt := func(parts ...int) []uint32 {
		c := make([]uint32, 10)
		for _, p := range parts {
			c[p]++
		}
		return c
	}
	none := [2]int{-1, -1}
	// One partition's copy: 12 MiB at 50 GB/s, 252 us; in place, a step's
	// 0.8 on the host at 80 M steps/s: 10 ns a remaining step.
	for _, c := range []struct {
		name       string
		plan       *StreamPlan
		counts     []uint32
		loaded     [2]int
		remaining  uint64
		copy, read int64
		reads      float64
		want       bool
	}{
		{"few steps left", plan, waitAt(5), none, 1000, 12, 12, 1, true},
		{"many steps left", plan, waitAt(5), none, 100000, 12, 12, 1, false},
		{"two partitions to copy", plan, waitAt(5, 7), none, 30000, 12, 12, 1, true},
		{"one of them loaded", plan, waitAt(5, 7), [2]int{7, -1}, 30000, 12, 12, 1, false},
		{"all loaded", plan, waitAt(5, 7), [2]int{7, 5}, 10, 12, 12, 1, false},
		{"resident only", plan, waitAt(0, 1), none, 10, 12, 12, 1, false},
		{"node2vec's reads", plan, waitAt(5), none, 20000, 12, 12, node2vecHostReads, false},
		{"targets read at their rate", plan, waitAt(5), none, 30000, 4, 4, 1, true},
		{"entries read at theirs", plan, waitAt(5), none, 30000, 4, 12, 1, false},
		{"nothing streamed", &StreamPlan{Edges: 100, Parts: []StreamPart{{VHi: 10, EHi: 100, Resident: true}}}, []uint32{5}, none, 1, 12, 12, 1, false},
	} {
		if got := streamTail(c.plan, c.counts, c.loaded, c.remaining, c.copy, c.read, c.reads); got != c.want {
			t.Errorf("%s: streamTail = %v, want %v", c.name, got, c.want)
		}
	}
}
