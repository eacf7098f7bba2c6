package livegraph

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// variant is one kind of base graph the model tests run on.
type variant struct {
	name                      string
	weighted, labelled, timed bool
	// mapped gives the base an id map (external ids 1000 + 7i) and the
	// added vertices random ids among them; otherwise ids are dense and
	// the added vertices take the next ones.
	mapped bool
}

var variants = []variant{
	{name: "plain"},
	{name: "weighted-labelled", weighted: true, labelled: true},
	{name: "mapped-weighted", weighted: true, mapped: true},
	{name: "timed-mapped", timed: true, mapped: true, weighted: true},
}

// model is the edge list a live graph should equal: base edges in CSR order,
// inserts appended in order, a delete removing every copy of its pair.
type model struct {
	v      variant
	edges  []graph.Edge
	ids    []int64 // every vertex's external id, dense order of the live graph
	hasID  map[int64]bool
	nextID int64
	// clock, when set, gives a timed variant's inserts their times.
	clock func(*rand.Rand) int64
}

func (m *model) options(name string) graph.BuildOptions {
	o := graph.BuildOptions{Name: name, Weighted: m.v.weighted, Labelled: m.v.labelled, Timed: m.v.timed,
		SelfLoops: true, Duplicates: graph.DupKeepAll}
	if !m.v.mapped {
		o.DenseIDs, o.NumVertices = true, len(m.ids)
	}
	return o
}

func (m *model) build(t testing.TB, name string) *graph.Graph {
	t.Helper()
	g, err := graph.FromEdges(m.edges, m.options(name))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// newModel builds a base of n vertices with random edges; in a mapped
// variant every vertex has a self-loop, which the ops never delete, so no
// vertex is ever edgeless (an id-mapped offline build drops those).
func newModel(t testing.TB, v variant, n, e int, rng *rand.Rand) (*model, *graph.Graph) {
	m := &model{v: v, hasID: map[int64]bool{}}
	for i := range n {
		id := int64(i)
		if v.mapped {
			id = 1000 + 7*int64(i)
		}
		m.ids = append(m.ids, id)
		m.hasID[id] = true
		if v.mapped {
			m.edges = append(m.edges, m.edge(id, id, rng))
		}
	}
	m.nextID = int64(n)
	for range e {
		m.edges = append(m.edges, m.edge(m.ids[rng.IntN(n)], m.ids[rng.IntN(n)], rng))
	}
	g := m.build(t, "base")
	// The model's order is the base's CSR order.
	m.edges = m.edges[:0]
	for u := range g.NumVertices() {
		lo := g.Offsets[u]
		tm := map[uint64]int64{}
		if g.Timed() {
			for k, j := range g.ByTime[lo:g.Offsets[u+1]] {
				tm[lo+uint64(j)] = g.Times[lo+uint64(k)]
			}
		}
		for e := lo; e < g.Offsets[u+1]; e++ {
			x := graph.Edge{Src: g.ExternalID(uint32(u)), Dst: g.ExternalID(g.Targets[e]), Weight: 1, Time: tm[e]}
			if g.Weighted() {
				x.Weight = g.Weights[e]
			}
			if g.Labelled() {
				x.Label = g.Labels[e]
			}
			m.edges = append(m.edges, x)
		}
	}
	return m, g
}

func (m *model) edge(s, d int64, rng *rand.Rand) graph.Edge {
	e := graph.Edge{Src: s, Dst: d, Weight: 1}
	if m.v.weighted {
		e.Weight = float32(1 + rng.IntN(8))
	}
	if m.v.labelled {
		e.Label = uint8(rng.IntN(4))
	}
	if m.v.timed {
		e.Time = int64(rng.IntN(50))
		if m.clock != nil {
			e.Time = m.clock(rng)
		}
	}
	return e
}

// vertex picks an endpoint for an insert, now and then a new one: in a
// mapped variant the record then starts with the new vertex's self-loop.
func (m *model) vertex(rng *rand.Rand, rec *[]Update) int64 {
	if rng.IntN(20) > 0 {
		return m.ids[rng.IntN(len(m.ids))]
	}
	id := m.nextID
	if m.v.mapped {
		for id = rng.Int64N(4000) - 500; m.hasID[id]; id = rng.Int64N(4000) - 500 {
		}
	}
	m.nextID++
	m.ids = append(m.ids, id)
	m.hasID[id] = true
	if m.v.mapped {
		m.insert(graph.Edge{Src: id, Dst: id, Weight: 1, Time: 7}, rec)
	}
	return id
}

func (m *model) insert(e graph.Edge, rec *[]Update) {
	u := Update{Op: Insert, Src: e.Src, Dst: e.Dst}
	if m.v.weighted && e.Weight != 1 {
		u.Weight, u.Has = e.Weight, u.Has|HasWeight
	}
	if m.v.labelled && e.Label != 0 {
		u.Label, u.Has = e.Label, u.Has|HasLabel
	}
	if m.v.timed {
		u.Time, u.Has = e.Time, u.Has|HasTime
	}
	m.edges = append(m.edges, e)
	*rec = append(*rec, u)
}

func (m *model) delete(s, d int64, rec *[]Update) {
	m.edges = slices.DeleteFunc(m.edges, func(e graph.Edge) bool { return e.Src == s && e.Dst == d })
	*rec = append(*rec, Update{Op: Delete, Src: s, Dst: d})
}

// randomRecord makes a record of up to 8 updates: inserts, deletes of
// existing edges (inserted or base) and of pairs that may not exist.
func (m *model) randomRecord(rng *rand.Rand) []Update {
	var rec []Update
	for range 1 + rng.IntN(8) {
		switch r := rng.IntN(10); {
		case r < 6:
			s := m.vertex(rng, &rec)
			m.insert(m.edge(s, m.vertex(rng, &rec), rng), &rec)
		case r < 9 && len(m.edges) > 0:
			e := m.edges[rng.IntN(len(m.edges))]
			if e.Src != e.Dst || !m.v.mapped {
				m.delete(e.Src, e.Dst, &rec)
			}
		default:
			s, d := m.ids[rng.IntN(len(m.ids))], m.ids[rng.IntN(len(m.ids))]
			if s != d || !m.v.mapped {
				m.delete(s, d, &rec)
			}
		}
	}
	return rec
}

// TestCompactEqualsRebuild applies random records to a live graph and to
// the model, and checks that every published snapshot — old ones included,
// after later updates — compacts to the graph built offline from the
// model's edges at that point: the same content, vertex numbering and
// checksum, so walks on it are those on the offline import.
func TestCompactEqualsRebuild(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(v.name))))
			m, base := newModel(t, v, 40, 200, rng)
			l, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			type published struct {
				snap  *Snapshot
				want  *graph.Graph
				marks map[int32]int64
			}
			var pubs []published
			marks := map[int32]int64{}
			for i := range 400 {
				rec := m.randomRecord(rng)
				part := int32(i % 3)
				if err := l.Apply(part, int64(10*i), rec); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				marks[part] = int64(10*i) + 1
				if i%50 == 49 {
					pubs = append(pubs, published{l.Publish(), m.build(t, "base"), maps_clone(marks)})
				}
			}
			for k, p := range pubs {
				got, err := Compact(context.Background(), p.snap)
				if err != nil {
					t.Fatal(err)
				}
				if got.Checksum() != p.want.Checksum() || got.NumVertices() != p.want.NumVertices() || !reflect.DeepEqual(got.IDs, p.want.IDs) {
					t.Fatalf("snapshot %d: compacted %d vertices %d edges checksum %x, rebuilt %d vertices %d edges checksum %x",
						k, got.NumVertices(), got.NumEdges(), got.Checksum(), p.want.NumVertices(), p.want.NumEdges(), p.want.Checksum())
				}
				if !reflect.DeepEqual(p.snap.Watermark(), p.marks) {
					t.Fatalf("snapshot %d: watermark %v, want %v", k, p.snap.Watermark(), p.marks)
				}
			}
		})
	}
}

func maps_clone(m map[int32]int64) map[int32]int64 {
	c := map[int32]int64{}
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestCompactWalksEqualOfflineImport compacts a live graph in the
// background twice while records go on (each compaction swapped in by a
// rebase) and a last time, writes the same edges as a text edge list,
// imports it with the importer `walkstage graph import` runs, and checks
// that the two files and the CPU engine's walks on them — on the live
// graph's snapshot after the last swap, on the import — are byte-identical.
func TestCompactWalksEqualOfflineImport(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, uint64(len(v.name))))
			m, base := newModel(t, v, 60, 400, rng)
			l, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			// Two background compactions with a rebase each while the
			// records go on, then a last one, swapped in: the live graph's
			// base is then the compacted graph.
			var done chan *graph.Graph
			compact := func() {
				s, err := l.BeginCompaction()
				if err != nil {
					t.Fatal(err)
				}
				done = make(chan *graph.Graph, 1)
				go func() {
					g, err := Compact(context.Background(), s)
					if err != nil {
						t.Error(err)
					}
					done <- g
				}()
			}
			for i := range 300 {
				switch i {
				case 60, 150:
					compact()
				case 100, 200:
					if _, _, err := l.Rebase(<-done); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.Apply(0, int64(i), m.randomRecord(rng)); err != nil {
					t.Fatal(err)
				}
			}
			compact()
			final, _, err := l.Rebase(<-done)
			if err != nil {
				t.Fatal(err)
			}
			compacted := final.Base()
			dir := t.TempDir()
			livePath := filepath.Join(dir, "live.wsg")
			if err := graph.Save(livePath, compacted); err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for _, e := range m.edges {
				fmt.Fprintf(&text, "%d %d", e.Src, e.Dst)
				if v.weighted {
					fmt.Fprintf(&text, " %g", e.Weight)
				}
				if v.labelled {
					fmt.Fprintf(&text, " %d", e.Label)
				}
				if v.timed {
					fmt.Fprintf(&text, " %d", e.Time)
				}
				text.WriteByte('\n')
			}
			o := edgelist.ImportOptions{Name: "base", Weighted: v.weighted, Labelled: v.labelled, SelfLoops: true,
				Duplicates: graph.DupKeepAll, DenseIDs: !v.mapped}
			if v.timed {
				o.TimeColumn = 3 + btoi(v.weighted) + btoi(v.labelled)
			}
			offPath := filepath.Join(dir, "offline.wsg")
			if _, err := edgelist.ImportTextReader(context.Background(), strings.NewReader(text.String()), "edges.txt", offPath, o); err != nil {
				t.Fatal(err)
			}
			a, err := os.ReadFile(livePath)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(offPath)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a, b) {
				t.Fatalf("compacted file (%d bytes) differs from the offline import (%d bytes)", len(a), len(b))
			}
			off, err := graph.Load(offPath)
			if err != nil {
				t.Fatal(err)
			}
			defer off.Close()
			alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 20, Weighted: v.weighted}
			if w1, w2 := walkAll(t, compacted, final, alg, 3), walkAll(t, off, nil, alg, 3); !slices.Equal(w1, w2) {
				t.Fatal("walks on the live graph after its compaction differ from walks on the offline import")
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// walkAll walks walks walks from every vertex of g (or of ov) on the CPU
// engine and returns them as one sequence: vertex ids, a walk's end marked
// by graph.NoVertex, in walk id order.
func walkAll(t testing.TB, g *graph.Graph, ov walk.Overlay, alg walk.Algorithm, walks int) []uint32 {
	t.Helper()
	e, err := cpu.New(g, cpu.WithWorkers(2), cpu.WithChunkSize(64))
	if err != nil {
		t.Fatal(err)
	}
	n := g.NumVertices()
	if ov != nil {
		n = ov.NumVertices()
	}
	starts := make([]uint32, 0, n*walks)
	for v := range n {
		for range walks {
			starts = append(starts, uint32(v))
		}
	}
	byID := make([][]uint32, len(starts))
	err = e.Run(context.Background(), []walk.Job{{Algorithm: alg, Seed: 42, Starts: starts, Overlay: ov}}, func(c walk.Chunk) error {
		for k, id := range c.WalkIDs {
			byID[id] = slices.Clone(c.Walk(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint32
	for _, w := range byID {
		out = append(append(out, w...), graph.NoVertex)
	}
	return out
}

// TestSnapshotIsolation checks that a published snapshot does not change
// while later updates append to the same vertices, delete their edges and
// add vertices.
func TestSnapshotIsolation(t *testing.T) {
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}, {Src: 0, Dst: 2}, {Src: 1, Dst: 2}}, graph.BuildOptions{Name: "tiny", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Snapshot(); !s.Empty() || s.NumVertices() != 3 || s.Vertex(0) != nil {
		t.Fatalf("new live graph: empty %v, %d vertices", s.Empty(), s.NumVertices())
	}
	// A delete of nothing, and of an unknown vertex, changes nothing.
	if err := l.Apply(0, 0, []Update{{Op: Delete, Src: 2, Dst: 0}, {Op: Delete, Src: 99, Dst: 0}}); err != nil {
		t.Fatal(err)
	}
	if s := l.Publish(); !s.Empty() {
		t.Fatal("deletes of absent edges made the delta non-empty")
	}
	if err := l.Apply(0, 1, []Update{{Op: Insert, Src: 0, Dst: 1}, {Op: Insert, Src: 0, Dst: 7}}); err != nil {
		t.Fatal(err)
	}
	s1 := l.Publish()
	view := func(s *Snapshot, v uint32) walk.DeltaVertex { return *s.Vertex(v) }
	before := view(s1, 0)
	if before.Live != 4 || !slices.Equal(targets(before), []uint32{1, 3}) || s1.NumVertices() != 4 || s1.ExternalID(3) != 7 {
		t.Fatalf("after two inserts: %+v, %d vertices, vertex 3 is %d", before, s1.NumVertices(), s1.ExternalID(3))
	}
	// Delete 0->1 (a base and an inserted copy), insert it again, add a vertex.
	if err := l.Apply(1, 5, []Update{{Op: Delete, Src: 0, Dst: 1}, {Op: Insert, Src: 0, Dst: 1}, {Op: Insert, Src: 7, Dst: 8}}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(view(s1, 0), before) || s1.NumVertices() != 4 || s1.Vertex(4) != nil {
		t.Fatalf("published snapshot changed: %+v, %d vertices", view(s1, 0), s1.NumVertices())
	}
	if _, ok := s1.DenseID(8); ok {
		t.Fatal("snapshot 1 resolves vertex 8, added after it")
	}
	s2 := l.Publish()
	after := view(s2, 0)
	if after.Live != 3 || !slices.Equal(targets(after), []uint32{1, 3, 1}) || !after.BaseDead(1) || !after.DeltaDead(0) || after.DeltaDead(2) {
		t.Fatalf("after delete and re-insert: %+v", after)
	}
	if v, ok := s2.DenseID(8); !ok || v != 4 || s2.NumVertices() != 5 {
		t.Fatalf("vertex 8: dense %d ok %v, %d vertices", v, ok, s2.NumVertices())
	}
	if got, want := s2.Watermark(), map[int32]int64{0: 2, 1: 6}; !reflect.DeepEqual(got, want) {
		t.Fatalf("watermark %v, want %v", got, want)
	}
	if st := s2.Stats(); st.DeltaEdges != 4 || st.Tombstones != 1 || st.Added != 2 || st.Inserted != 4 || st.Deleted != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestApplyRefusesRecordWhole checks that a record with one update the
// graph cannot take is refused whole, naming the update, with nothing of it
// applied and the watermark where it was.
func TestApplyRefusesRecordWhole(t *testing.T) {
	plain, _ := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}}, graph.BuildOptions{Name: "plain", DenseIDs: true})
	timed, _ := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1, Time: 3}}, graph.BuildOptions{Name: "timed", DenseIDs: true, Timed: true})
	cases := []struct {
		name string
		g    *graph.Graph
		bad  Update
		err  string
	}{
		{"weight on an unweighted graph", plain, Update{Op: Insert, Src: 0, Dst: 5, Weight: 2, Has: HasWeight}, `update 1: weight 2 on graph "plain", which has no weights`},
		{"label on an unlabelled graph", plain, Update{Op: Insert, Src: 0, Dst: 5, Label: 1, Has: HasLabel}, "which has no labels"},
		{"time on an untimed graph", plain, Update{Op: Insert, Src: 0, Dst: 5, Time: 1, Has: HasTime}, "which has no edge times"},
		{"no time on a timed graph", timed, Update{Op: Insert, Src: 0, Dst: 5}, `needs a time`},
		{"delete with fields", plain, Update{Op: Delete, Src: 0, Dst: 1, Weight: 1, Has: HasWeight}, "a delete takes only src and dst"},
		{"unknown op", plain, Update{Op: 9, Src: 0, Dst: 1}, "unknown op 9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := New(c.g)
			if err != nil {
				t.Fatal(err)
			}
			good := Update{Op: Insert, Src: 1, Dst: 9}
			if c.g.Timed() {
				good.Time, good.Has = 4, HasTime
			}
			err = l.Apply(0, 7, []Update{good, c.bad})
			if !errors.Is(err, ErrBadUpdate) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("Apply = %v, want an ErrBadUpdate containing %q", err, c.err)
			}
			if s := l.Publish(); !s.Empty() || s.NumVertices() != c.g.NumVertices() || len(s.Watermark()) != 0 {
				t.Fatalf("refused record left a trace: empty %v, %d vertices, watermark %v", s.Empty(), s.NumVertices(), s.Watermark())
			}
		})
	}
}

func TestNewRefusesStringIDs(t *testing.T) {
	g, err := graph.FromStringEdges([]graph.StringEdge{{Src: "a", Dst: "b"}}, graph.BuildOptions{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(g); err == nil || !strings.Contains(err.Error(), "string ids do not take edge updates yet") {
		t.Fatalf("New on a string-id graph: %v", err)
	}
}

func targets(dv walk.DeltaVertex) []uint32 {
	var t []uint32
	for _, e := range dv.Edges() {
		t = append(t, e.Target)
	}
	return t
}

// TestWaitFor checks read-your-writes: a wait for offsets not yet published
// returns the first snapshot that holds them once the applier publishes
// it, and gives up with the context, naming what it waited for.
func TestWaitFor(t *testing.T) {
	base, _ := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}}, graph.BuildOptions{Name: "rw", DenseIDs: true})
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := l.WaitFor(context.Background(), nil); err != nil || s != l.Snapshot() {
		t.Fatalf("WaitFor(nothing) = %v, %v", s, err)
	}
	got := make(chan *Snapshot)
	go func() {
		s, err := l.WaitFor(context.Background(), map[int32]int64{0: 5, 2: 1})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	if err := l.Apply(0, 4, []Update{{Op: Insert, Src: 1, Dst: 0}}); err != nil {
		t.Fatal(err)
	}
	l.Publish() // partition 2 not reached yet: the waiter goes on waiting
	if err := l.Apply(2, 0, []Update{{Op: Insert, Src: 0, Dst: 2}}); err != nil {
		t.Fatal(err)
	}
	want := l.Publish()
	if s := <-got; s != want || s.NumVertices() != 3 {
		t.Fatalf("WaitFor returned epoch %d, want %d", s.Epoch(), want.Epoch())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.WaitFor(ctx, map[int32]int64{1: 9}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "map[1:9]") {
		t.Fatalf("WaitFor with a done context: %v", err)
	}
}

// Every published snapshot's delta index, made from the last one's, says
// what a whole build of the snapshot's tree says — for every vertex, checked
// again after later updates — through serial and parallel records, added
// vertices, deletes, folds of the patch, publications while nobody walks
// (their updates put in by the next walked one, their own index built on
// their first walk) and a rebase (whose index is built whole), for every
// variant.
func TestPublishedIndexMatchesTree(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(len(v.name))))
			const n = midFan*leafFan + 3000 // two mids
			m, base := newModel(t, v, n, n, rng)
			l, err := New(base)
			if err != nil {
				t.Fatal(err)
			}
			var snaps []*Snapshot
			folds, lazy, viaDirty := 0, 0, 0
			for r := range 24 {
				var rec []Update
				size := 1 + rng.IntN(40)
				if r%6 == 5 {
					size = applyParallelMin + 100 // applied on all cores
				}
				for len(rec) < size {
					rec = append(rec, m.randomRecord(rng)...)
				}
				if err := l.Apply(0, int64(r), rec); err != nil {
					t.Fatal(err)
				}
				if r == 12 {
					cs, err := l.BeginCompaction()
					if err != nil {
						t.Fatal(err)
					}
					g, err := Compact(context.Background(), cs)
					if err != nil {
						t.Fatal(err)
					}
					snaps = append(snaps, cs)
					rs, _, err := l.Rebase(g)
					if err != nil {
						t.Fatal(err)
					}
					snaps = append(snaps, rs)
					continue
				}
				if r%5 == 1 || r == 7 {
					// Nobody walked lately: this snapshot's index is not
					// made; the next walked one puts these updates in.
					l.walkedAt.Store(0)
					s := l.Publish()
					if s.idx != nil {
						t.Fatalf("round %d: an index made with nobody walking", r)
					}
					lazy++
					snaps = append(snaps, s)
					continue
				}
				l.walkedAt.Store(time.Now().UnixNano())
				if l.index != nil && l.ndirty > 0 && 2*l.ndirty <= l.index.Len()+4096 {
					viaDirty++ // the unwalked updates go in by the dirty bitmap
				}
				s := l.Publish()
				s.DeltaIndex()
				if s.idx == nil {
					t.Fatalf("round %d: no index made right after a walk", r)
				}
				if s.idx.Pending() == 0 {
					folds++
				}
				snaps = append(snaps, s)
			}
			if folds < 2 || folds+lazy >= len(snaps)-1 || lazy < 3 || viaDirty < 2 {
				t.Fatalf("%d of %d snapshots folded, %d not indexed: the records did not exercise the patch, the fold and the lazy index (%d by the dirty bitmap)", folds, len(snaps), lazy, viaDirty)
			}
			for _, s := range snaps {
				got, want := s.DeltaIndex(), wholeIndex(s.top, s.under, s.n)
				if got.Len() != want.Len() {
					t.Fatalf("snapshot %d: %d vertices with a delta, its tree %d", s.Epoch(), got.Len(), want.Len())
				}
				for v := range s.n + 70 {
					k, kw := got.Rank(v), want.Rank(v)
					if got.Has(v) != want.Has(v) || (k < 0) != (kw < 0) || !sameDelta(got.Vertex(v), want.Vertex(v)) || !sameDelta(got.Vertex(v), s.Vertex(v)) {
						t.Fatalf("snapshot %d vertex %d: has %v delta %p, its tree %v %p", s.Epoch(), v, got.Has(v), got.Vertex(v), want.Has(v), want.Vertex(v))
					}
					if k >= 0 && *got.Head(k) != *want.Head(kw) {
						t.Fatalf("snapshot %d vertex %d: head %+v, its tree %+v", s.Epoch(), v, *got.Head(k), *want.Head(kw))
					}
				}
			}
		})
	}
}

// Publishing a snapshot after a few updates, and indexing it for walks,
// costs what changed, not what the delta holds: over a delta of 60,000
// vertices, a snapshot of one more record allocates less than a tenth of a
// whole index of them (48 bytes a vertex). A read-your-writes batch walks
// the newest snapshot; when its index was built whole, that build kept
// update -> walkable at seconds at scale 22. And while nobody walks, a
// publication makes no index at all: making one each time took a fifth of
// the applier's time on a stream nobody walked.
func TestPublishCostsWhatChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	const n = 1 << 17
	_, base := newModel(t, variant{name: "plain"}, n, 2*n, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	var rec []Update
	for i := range 4 * n {
		rec = append(rec, Update{Op: Insert, Src: int64(rng.IntN(n)), Dst: int64(rng.IntN(n))})
		if len(rec) == 4096 || i == 4*n-1 {
			if err := l.Apply(0, int64(i), rec); err != nil {
				t.Fatal(err)
			}
			rec = rec[:0]
		}
	}
	s := l.Publish()
	if s.DeltaIndex().Len() < 60_000 {
		t.Fatalf("only %d vertices with a delta", s.DeltaIndex().Len())
	}
	for range 3 { // the patch's share of a publication, a few in
		if err := l.Apply(0, 0, []Update{{Op: Insert, Src: int64(rng.IntN(n)), Dst: 1}}); err != nil {
			t.Fatal(err)
		}
		l.Publish().DeltaIndex()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := l.Apply(0, 1, []Update{{Op: Insert, Src: 5, Dst: 6}, {Op: Delete, Src: 7, Dst: 8}}); err != nil {
		t.Fatal(err)
	}
	x := l.Publish().DeltaIndex()
	runtime.ReadMemStats(&after)
	whole := uint64(x.Len()) * 48
	if got := after.TotalAlloc - before.TotalAlloc; got > whole/10 {
		t.Fatalf("publishing and indexing a snapshot after one record allocated %d bytes; a whole index of its %d vertices with a delta is %d", got, x.Len(), whole)
	}

	// Nobody walking, a publication makes no index: it marks what was
	// written, and the first walked publication puts it in.
	l.walkedAt.Store(0)
	for i := range 2 { // the first grows the bitmap of what was written
		rec = rec[:0]
		for range 4096 {
			rec = append(rec, Update{Op: Insert, Src: int64(rng.IntN(n)), Dst: int64(rng.IntN(n))})
		}
		if err := l.Apply(0, int64(2+i), rec); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&before)
		l.Publish()
		runtime.ReadMemStats(&after)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > whole/100 {
		t.Fatalf("publishing a snapshot nobody walks after a record of 4,096 updates allocated %d bytes; a whole index is %d", got, whole)
	}
	if err := l.Apply(0, 4, []Update{{Op: Insert, Src: 11, Dst: 12}}); err != nil {
		t.Fatal(err)
	}
	l.walkedAt.Store(time.Now().UnixNano())
	if got, want := l.Publish().DeltaIndex(), wholeIndex(l.top, l.under, l.baseV+uint32(len(l.addedIDs))); got.Len() != want.Len() || !sameDelta(got.Vertex(11), want.Vertex(11)) {
		t.Fatalf("the walked publication after unwalked ones: %d vertices with a delta, a whole build %d", got.Len(), want.Len())
	}
}

// TestPublishIndexesForAWaiterOnlyOnceReached: a read-your-writes waiter
// for offsets the live graph has not applied yet walks none of the
// snapshots published before them, so while it waits (a backlog caught up
// under a request for its end) nobody walking, a publication makes no
// delta index; the publication that reaches its offsets makes one, and the
// waiter gets that snapshot.
func TestPublishIndexesForAWaiterOnlyOnceReached(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 1))
	const n = 1 << 12
	_, base := newModel(t, variant{name: "plain"}, n, 2*n, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	l.walkedAt.Store(0) // nobody walked
	want := map[int32]int64{0: 10}
	got := make(chan *Snapshot, 1)
	go func() {
		s, err := l.WaitFor(context.Background(), want)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	<-l.Wanted() // registered
	for off := range int64(10) {
		if err := l.Apply(0, off, []Update{{Op: Insert, Src: int64(rng.IntN(n)), Dst: int64(rng.IntN(n))}}); err != nil {
			t.Fatal(err)
		}
		s := l.Publish()
		switch {
		case off < 9 && s.idx != nil:
			t.Fatalf("offset %d: the publication made a delta index for a waiter for %v it does not reach", off, want)
		case off == 9 && s.idx == nil:
			t.Fatalf("offset %d: the publication reaching the waiter's %v made no delta index", off, want)
		case off == 9:
			if w := <-got; w != s {
				t.Fatalf("the waiter got snapshot %d, want the one reaching its offsets (%d)", w.Epoch(), s.Epoch())
			}
		}
	}
}

// sameDelta says whether a and b are the same delta: both none, or equal
// records (a record's arrays are append-only below its counts, so equal
// records hold the same edges and tombstones).
func sameDelta(a, b *walk.DeltaVertex) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}
