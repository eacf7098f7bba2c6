package gpu

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

func placementGraph(t *testing.T) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 3,
		Undirected: true, Weighted: true, Labels: 4, Name: "placement"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	return g
}

// TestPlanLayout checks the relocation for budgets from nothing to
// everything: each vertex's edges lie wholly on one side, the sides do not
// overlap, starts keep their residue modulo 4, the device side stays within
// its budget and holds the highest degrees.
func TestPlanLayout(t *testing.T) {
	g := placementGraph(t)
	E := g.NumEdges()
	for _, budget := range []int64{0, 100, E / 10, E / 4, E / 2, E, 2 * E} {
		l := planLayout(g.Offsets, budget)
		if int64(l.split) > budget+chunkPad {
			t.Fatalf("budget %d: %d device slots", budget, l.split)
		}
		if l.split%chunkPad != 0 {
			t.Fatalf("budget %d: split %d not a multiple of %d", budget, l.split, chunkPad)
		}
		used := make([]bool, l.split+l.host)
		minHot, maxCold := int64(1<<62), int64(-1)
		var devEdges int64
		for v := range g.NumVertices() {
			a, z := g.Offsets[v], g.Offsets[v+1]
			d := int64(z - a)
			if d == 0 {
				continue
			}
			p := l.place[v]
			if p%placeAlign != a%placeAlign {
				t.Fatalf("budget %d: vertex %d at %d, original %d: residue changed", budget, v, p, a)
			}
			if dev := p < l.split; dev {
				if p+uint64(d) > l.split {
					t.Fatalf("budget %d: vertex %d straddles the split", budget, v)
				}
				minHot = min(minHot, d)
				devEdges += d
			} else {
				maxCold = max(maxCold, d)
			}
			for i := p; i < p+uint64(d); i++ {
				if used[i] {
					t.Fatalf("budget %d: slot %d used twice", budget, i)
				}
				used[i] = true
			}
		}
		if maxCold > minHot {
			t.Fatalf("budget %d: a host vertex has degree %d, a device one %d", budget, maxCold, minHot)
		}
		if devEdges != l.deviceEdges {
			t.Fatalf("budget %d: counted %d device edges, layout says %d", budget, devEdges, l.deviceEdges)
		}
		if budget >= 2*E && devEdges != E {
			t.Fatalf("budget %d: only %d of %d edges on the device", budget, devEdges, E)
		}
		// Everything that fits is taken: the next vertex would not have.
		if budget >= E/4 && budget < E && float64(devEdges) < 0.9*float64(budget) {
			t.Fatalf("budget %d: only %d edges on the device", budget, devEdges)
		}
	}
}

// TestFillPlaced: every vertex's relocated edges, weights, labels and alias
// entries equal the graph's and walk.BuildAlias's, on either side.
func TestFillPlaced(t *testing.T) {
	g := placementGraph(t)
	l := planLayout(g.Offsets, g.NumEdges()/3)
	dn, hn := int64(l.split)+chunkPad, int64(l.host)+chunkPad
	side := func(n int64) sideArrays {
		return sideArrays{make([]uint32, n), make([]float32, n), make([]uint8, n), make([]aliasEntry, n)}
	}
	dev, host := side(dn), side(hn)
	fillPlaced(g, l, dev, host)
	prob, alias := walk.BuildAlias(g)
	for v := range g.NumVertices() {
		a, z := g.Offsets[v], g.Offsets[v+1]
		s, p := dev, l.place[v]
		if p >= l.split {
			s, p = host, p-l.split
		}
		for i := uint64(0); i < z-a; i++ {
			e := a + i
			x := s.alias[p+i]
			if s.targets[p+i] != g.Targets[e] || s.weights[p+i] != g.Weights[e] || s.labels[p+i] != g.Labels[e] ||
				x.prob != prob[e] || x.alia != alias[e] || x.keep != g.Targets[e] || x.alt != g.Targets[a+uint64(alias[e])] {
				t.Fatalf("vertex %d edge %d: relocated copy differs", v, i)
			}
		}
	}
}

// TestFillLabelSegments: the placed label tables regroup each vertex's
// edges by label, stably, with segment offsets in the original index space
// and an alias table per segment, both with a device side and all on the
// host.
func TestFillLabelSegments(t *testing.T) {
	g := placementGraph(t)
	nl := g.NumLabels
	// The segments' alias tables as the CPU engine builds them (its
	// golden-digest tests pin those); the test checks where they land.
	type table struct {
		prob []float32
		col  []uint32
	}
	var mu sync.Mutex
	segAlias := map[[2]int]table{}
	walk.ForLabelSegments(g, true, func(v, lab int, _ uint64, _ []uint32, prob []float32, col []uint32) {
		mu.Lock()
		segAlias[[2]int{v, lab}] = table{slices.Clone(prob), slices.Clone(col)}
		mu.Unlock()
	})
	for _, allHost := range []bool{false, true} {
		l := planLayout(g.Offsets, g.NumEdges()/2)
		if allHost {
			l.split = 0
		}
		dn, hn := int64(l.split)+chunkPad, int64(g.NumEdges())+int64(g.NumVertices())*4+2*chunkPad
		dev := sideArrays{targets: make([]uint32, dn), alias: make([]aliasEntry, dn)}
		host := sideArrays{targets: make([]uint32, hn), alias: make([]aliasEntry, hn)}
		segOff := make([]uint64, g.NumVertices()*nl+1)
		fillLabelSegments(g, l, segOff, dev, host)
		for v := range g.NumVertices() {
			a, z := g.Offsets[v], g.Offsets[v+1]
			s, p := dev, l.place[v]
			if p >= l.split {
				s, p = host, p-l.split
			}
			at := a
			for lab := range nl {
				if segOff[v*nl+lab] != at {
					t.Fatalf("vertex %d label %d: segment at %d, want %d", v, lab, segOff[v*nl+lab], at)
				}
				var w []float32
				for e := a; e < z; e++ {
					if int(g.Labels[e]) == lab {
						if got := s.targets[p+at-a]; got != g.Targets[e] {
							t.Fatalf("vertex %d label %d: target %d, want %d", v, lab, got, g.Targets[e])
						}
						w = append(w, g.Weights[e])
						at++
					}
				}
				if len(w) == 0 {
					continue
				}
				ref := segAlias[[2]int{v, lab}]
				prob, col := ref.prob, ref.col
				seg := p + at - a - uint64(len(w))
				for i := range w {
					x := s.alias[seg+uint64(i)]
					if x.prob != prob[i] || x.alia != col[i] || x.keep != s.targets[seg+uint64(i)] || x.alt != s.targets[seg+uint64(col[i])] {
						t.Fatalf("vertex %d label %d column %d: alias entry %+v", v, lab, i, x)
					}
				}
			}
		}
		if segOff[len(segOff)-1] != uint64(g.NumEdges()) {
			t.Fatal("last segment offset is not E")
		}
	}
}

// TestPlanPlacement: the plan's parts and shares for budgets and
// fractions, and its errors.
func TestPlanPlacement(t *testing.T) {
	g := placementGraph(t)
	s := shapeOf(g)
	all, err := PlanPlacement(g, 1<<40, 1)
	if err != nil {
		t.Fatal(err)
	}
	if all.DeviceShare() != 1 || all.HostSlots != 0 {
		t.Fatalf("unlimited plan: %s", all)
	}
	for _, f := range []float64{0.5, 0.25, 0.1, 0} {
		p, err := PlanPlacement(g, 1<<40, f)
		if err != nil {
			t.Fatal(err)
		}
		if sh := p.DeviceShare(); sh > f || sh < f-0.05 {
			t.Errorf("fraction %v: device share %.3f", f, sh)
		}
		if p.DeviceEdges+hostEdges(g, p) != s.edges {
			t.Errorf("fraction %v: edges do not add up", f)
		}
		if !strings.Contains(p.String(), "alias.table.host") {
			t.Errorf("fraction %v: plan %s does not name the host alias table", f, p)
		}
	}
	// A byte budget: the device parts stay within it.
	budget := int64(s.vertices)*16 + s.edges*edgeBytes(s)/3
	p, err := PlanPlacement(g, budget, 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Bytes(false) > budget {
		t.Fatalf("plan for %d device bytes takes %d: %s", budget, p.Bytes(false), p)
	}
	if sh := p.DeviceShare(); sh < 0.25 || sh > 0.34 {
		t.Fatalf("a third of the bytes gave a device share of %.3f", sh)
	}
	// Not even the offsets fit.
	_, err = PlanPlacement(g, 1000, 1)
	var pe *MemoryPlanError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "graph.offsets") || !strings.Contains(err.Error(), "graph.place") {
		t.Fatalf("tiny budget: %v", err)
	}
	// The host cannot hold its half either.
	herr := checkHostMemory(p, 1<<20)
	var he *HostMemoryError
	if !errors.As(herr, &he) || he.Need != p.Bytes(true)+p.Bytes(false) {
		t.Fatalf("host check: %v", herr)
	}
	for _, part := range []string{"graph.targets.host", "alias.table.host", "graph.offsets", "1.0 MiB"} {
		if !strings.Contains(herr.Error(), part) {
			t.Errorf("host memory error does not name %s: %v", part, herr)
		}
	}
	if checkHostMemory(p, -1) != nil || checkHostMemory(p, 1<<40) != nil {
		t.Fatal("host check failed with room to spare")
	}
}

// hostEdges counts the graph's edges a plan puts on the host.
func hostEdges(g *graph.Graph, p *Placement) int64 { return g.NumEdges() - p.DeviceEdges }

// TestHubLayout: a partitioned engine's hub layout packs only eligible
// vertices, hubs first, on the device side, keeps each start's residue
// modulo 4, leaves every other vertex at split + its offset (its place in
// the stripes), and its copy runs move exactly the hubs' edges.
func TestHubLayout(t *testing.T) {
	g := placementGraph(t)
	off := g.Offsets
	nv := g.NumVertices()
	eligible := func(v int) bool { return v%3 != 0 } // "not local"
	for _, budget := range []int64{0, 50, g.NumEdges() / 5, 2 * g.NumEdges()} {
		l := planHubLayout(off, budget, eligible)
		var minHot, maxCold int64 = 1 << 62, 0
		var hubEdges uint64
		for v := range nv {
			d := int64(off[v+1] - off[v])
			p := l.place[v]
			if p < l.split && d > 0 {
				if !eligible(v) {
					t.Fatalf("budget %d: vertex %d is local but packed", budget, v)
				}
				if p%placeAlign != off[v]%placeAlign {
					t.Fatalf("budget %d: vertex %d at %d, offset %d", budget, v, p, off[v])
				}
				minHot = min(minHot, d)
				hubEdges += uint64(d)
				continue
			}
			if p != l.split+off[v] {
				t.Fatalf("budget %d: cold vertex %d at %d, want split %d + offset %d", budget, v, p, l.split, off[v])
			}
			if eligible(v) {
				maxCold = max(maxCold, d)
			}
		}
		if hubEdges > 0 && maxCold > minHot {
			t.Fatalf("budget %d: a cold vertex of degree %d beside a hub of degree %d", budget, maxCold, minHot)
		}
		if int64(l.split) > budget+chunkPad {
			t.Fatalf("budget %d: %d device slots", budget, l.split)
		}
		var moved uint64
		for _, r := range hubRuns(off, l) {
			moved += r[2]
			if r[1]+r[2] > l.split {
				t.Fatalf("budget %d: run %v past split %d", budget, r, l.split)
			}
		}
		if moved != hubEdges || uint64(l.deviceEdges) != hubEdges {
			t.Fatalf("budget %d: runs move %d edges, hubs hold %d (layout says %d)", budget, moved, hubEdges, l.deviceEdges)
		}
	}
}
