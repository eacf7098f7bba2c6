package ooc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Partition is a range of vertices [Lo, Hi) and their edges [EdgeLo,
// EdgeHi), the unit the engine reads and walks in.
type Partition struct {
	Lo, Hi         uint32
	EdgeLo, EdgeHi uint64
	// Bytes is the memory the partition takes loaded with every table the
	// engine may build for it (Plan.BytesPerVertex, Plan.BytesPerEdge).
	Bytes int64
}

// Vertices is the partition's vertex count.
func (p Partition) Vertices() int { return int(p.Hi - p.Lo) }

// Edges is the partition's edge count.
func (p Partition) Edges() int64 { return int64(p.EdgeHi - p.EdgeLo) }

// Plan is how a graph is walked out of core under a memory budget: the
// budget's shares, the partitions and how many of them the pool holds.
type Plan struct {
	Budget      int64 // bytes the engine may use in all
	PoolBytes   int64 // for loaded partitions: Slots of them at most
	WalkerBytes int64 // for walker state (ids, positions, the walks so far)
	Slots       int   // partitions held at once: one walked, one read ahead, the rest cached
	// PartitionBytes is the most a partition may take loaded.
	PartitionBytes int64
	// BytesPerVertex and BytesPerEdge are what a loaded partition takes
	// (offsets; targets; alias probability and target when weighted;
	// labels and MetaPath's label segments when labelled).
	BytesPerVertex, BytesPerEdge int64
	Partitions                   []Partition
	// GraphBytes is what the in-memory CPU engine needs for the graph:
	// InMemoryBytes.
	GraphBytes int64
}

// Budget shares. A random walk leaves a partition after a step or two, so
// a sweep over the graph advances each walker in flight by about one step
// whatever the partitions' size: the bytes read per step are the graph's
// bytes over the walkers in flight. The walkers therefore take half the
// budget; the pool a third, in three slots (one walked, one read ahead,
// one cached: large enough for reads of tens of MiB); the rest is left
// to the Go runtime and to the chunks on their way to the sink.
const (
	poolShare    = 0.35
	walkerShare  = 0.50
	DefaultSlots = 3
)

// HubError says a single vertex's edges take more memory than a partition
// may: the engine does not split a vertex's adjacency over partitions (its
// alias table is built over the whole adjacency), so the budget must grow.
type HubError struct {
	Vertex         uint32
	Degree         int64
	Bytes          int64 // the vertex's partition bytes
	PartitionBytes int64
	Budget         int64
	Slots          int
}

// ErrHubTooLarge is what a HubError wraps.
var ErrHubTooLarge = errors.New("a vertex does not fit one partition")

func (e *HubError) Error() string {
	return fmt.Sprintf("%v: vertex %d has %d edges, %d bytes loaded, above the %d bytes a partition may take under a budget of %d bytes "+
		"(%.0f%% for %d partition slots): raise %s to at least %d",
		ErrHubTooLarge, e.Vertex, e.Degree, e.Bytes, e.PartitionBytes, e.Budget, poolShare*100, e.Slots, EnvHostMemoryLimit,
		int64(float64(e.Bytes*int64(e.Slots))/poolShare)+1)
}

func (e *HubError) Unwrap() error { return ErrHubTooLarge }

// sections is where the arrays the engine reads lie in the graph file.
type sections struct {
	offsets, targets, weights, labels uint64
	size                              uint64
}

// fileSections lays out g's file as graph.Save does (graph.FileLayout),
// so the engine reads the sections at their offsets without mapping them.
func fileSections(g *graph.Graph) (sections, error) {
	l, err := graph.NewFileLayout(graph.FileShape{
		Vertices: uint64(g.NumVertices()), Edges: uint64(g.NumEdges()), NameBytes: len(g.Name),
		Weighted: g.Weighted(), Labelled: g.Labelled(), External: g.IDs != nil, Timed: g.Timed(),
		StringIDs: g.StrOffsets != nil, StringBytes: uint64(len(g.StrBytes)),
	})
	if err != nil {
		return sections{}, err
	}
	var s sections
	s.offsets, _ = l.Section(graph.SectionOffsets)
	s.targets, _ = l.Section(graph.SectionTargets)
	s.weights, _ = l.Section(graph.SectionWeights)
	s.labels, _ = l.Section(graph.SectionLabels)
	s.size = l.Size()
	return s, nil
}

// labelTablesFor says whether the engine builds MetaPath's label segments
// for g (walk.UsesLabelTables with the automatic stepper).
func labelTablesFor(g *graph.Graph) bool {
	return g.Labelled() && walk.UsesLabelTables(walk.Algorithm{Kind: walk.MetaPath, Schema: []uint8{0}}, g)
}

// partitionCosts are a loaded partition's bytes per vertex and per edge,
// for every table any supported walk of g may need.
func partitionCosts(g *graph.Graph) (perVertex, perEdge int64) {
	perVertex, perEdge = 8, 4
	if g.Weighted() {
		perEdge += 8 // alias probability (read as the weight) and alias target
	}
	if labelTablesFor(g) {
		perEdge += 1 + 4 // labels, segment targets
		if g.Weighted() {
			perEdge += 8
		}
		perVertex += 8 * int64(g.NumLabels)
	}
	return perVertex, perEdge
}

// InMemoryBytes is what the in-memory CPU engine (walk/cpu) needs to walk
// g: the offsets, targets, weights and labels it maps, and the packed alias
// table of a weighted graph (12 bytes an edge). The engine chooser walks a
// graph out of core when this exceeds the host budget.
func InMemoryBytes(g *graph.Graph) int64 {
	v, e := int64(g.NumVertices()), g.NumEdges()
	n := (v+1)*8 + e*4
	if g.Weighted() {
		n += e*4 + e*12
	}
	if g.Labelled() {
		n += e
	}
	return n
}

// PlanFor cuts g, whose file is path, into partitions for a budget of
// budget bytes held in slots slots (0: DefaultSlots). partitionBytes, when
// positive, caps a partition below the budget's share (tests use it for
// many small partitions). It reads the offsets section once, sequentially.
func PlanFor(ctx context.Context, g *graph.Graph, path string, budget int64, slots int, partitionBytes int64) (Plan, error) {
	r, err := openReader(path, false)
	if err != nil {
		return Plan{}, err
	}
	defer r.close()
	sec, err := fileSections(g)
	if err != nil {
		return Plan{}, err
	}
	return planFor(ctx, g, r, sec, budget, slots, partitionBytes)
}

func planFor(ctx context.Context, g *graph.Graph, r *reader, sec sections, budget int64, slots int, partitionBytes int64) (Plan, error) {
	if slots == 0 {
		slots = DefaultSlots
	}
	if slots < 2 {
		return Plan{}, fmt.Errorf("out-of-core plan: %d partition slots, want 2 or more (one walked, one read ahead)", slots)
	}
	if budget <= 0 {
		return Plan{}, fmt.Errorf("out-of-core plan: memory budget %d bytes must be positive", budget)
	}
	p := Plan{Budget: budget, PoolBytes: int64(float64(budget) * poolShare), WalkerBytes: int64(float64(budget) * walkerShare),
		Slots: slots, GraphBytes: InMemoryBytes(g)}
	p.PartitionBytes = p.PoolBytes / int64(slots)
	if partitionBytes > 0 {
		p.PartitionBytes = min(p.PartitionBytes, partitionBytes)
	}
	p.BytesPerVertex, p.BytesPerEdge = partitionCosts(g)

	// Greedy cut over the offsets, read in blocks: a partition grows
	// vertex by vertex while it stays within PartitionBytes.
	n := g.NumVertices()
	const block = 1 << 20 // offsets per read (8 MiB)
	var buf alignedBuf
	cur := Partition{}
	var curBytes int64
	prev := uint64(0)
	for base := 0; base < n; base += block {
		if err := ctx.Err(); err != nil {
			return Plan{}, err
		}
		cnt := min(block, n-base)
		raw, err := r.read(&buf, int64(sec.offsets)+int64(base+1)*8, int64(cnt)*8)
		if err != nil {
			return Plan{}, fmt.Errorf("out-of-core plan: read offsets: %w", err)
		}
		for i := range cnt {
			end := binary.LittleEndian.Uint64(raw[i*8:])
			v := uint32(base + i)
			deg := int64(end - prev)
			vb := p.BytesPerVertex + p.BytesPerEdge*deg
			if vb+p.BytesPerVertex > p.PartitionBytes { // a partition also holds its end offset
				return Plan{}, &HubError{Vertex: v, Degree: deg, Bytes: vb + p.BytesPerVertex, PartitionBytes: p.PartitionBytes, Budget: budget, Slots: slots}
			}
			if curBytes+vb+p.BytesPerVertex > p.PartitionBytes {
				cur.Hi, cur.EdgeHi, cur.Bytes = v, prev, curBytes+p.BytesPerVertex
				p.Partitions = append(p.Partitions, cur)
				cur, curBytes = Partition{Lo: v, EdgeLo: prev}, 0
			}
			curBytes += vb
			prev = end
		}
	}
	if prev != uint64(g.NumEdges()) {
		return Plan{}, fmt.Errorf("out-of-core plan: %w: offsets end at %d, the graph has %d edges", graph.ErrFormat, prev, g.NumEdges())
	}
	cur.Hi, cur.EdgeHi, cur.Bytes = uint32(n), prev, curBytes+p.BytesPerVertex
	p.Partitions = append(p.Partitions, cur)
	return p, nil
}

// checkSize compares the file's size with the layout's, so a file that is
// not the one g was loaded from is refused before any read.
func checkSize(path string, sec sections) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if uint64(st.Size()) != sec.size {
		return fmt.Errorf("%w: %s is %d bytes, its header's layout says %d", graph.ErrFormat, path, st.Size(), sec.size)
	}
	return nil
}
