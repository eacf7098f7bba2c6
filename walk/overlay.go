package walk

import (
	"fmt"
	"iter"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
)

// A live graph (package livegraph) is a loaded base graph plus a delta of
// edge updates: edges appended per vertex, tombstones for deleted ones, and
// vertices the base did not have. Walks read it through Overlay, one
// immutable snapshot per job (Job.Overlay), so the walk package needs to
// know nothing of how updates arrive or how snapshots are published.
//
// A step from a vertex with a delta draws from all of its edges, base and
// appended, dead ones included, and draws again when it lands on a dead
// one: the side (base or delta) is chosen by the sides' weight sums (edge
// counts for an unweighted walk), the base edge by the engine's usual
// uniform or alias draw, the delta edge uniformly and, for a weighted walk,
// accepted with probability weight / MaxWeight. Every accepted edge is live
// and taken with probability weight / (live weight), exactly the step of
// the graph rebuilt with the updates. After maxRejections draws an exact
// scan over the live edges decides, so a vertex whose edges are mostly
// deleted costs O(degree) rather than an unbounded loop.

// Overlay is a published, immutable snapshot of a live graph: the base graph
// an engine was built for and the delta over it. Implementations must be
// safe for concurrent readers and never change once handed to a job.
type Overlay interface {
	// Base is the graph the delta applies to; a job's overlay must have
	// the engine's graph as its base.
	Base() *graph.Graph
	// NumVertices counts the base's vertices and those the delta added
	// (dense ids Base().NumVertices() and up).
	NumVertices() int
	// Empty reports that the delta changes nothing: the engine then walks
	// the base on its usual, fastest path.
	Empty() bool
	// Vertex returns v's delta, or nil when v has none (its base edges are
	// all it has, all live). Every added vertex has one.
	Vertex(v uint32) *DeltaVertex
}

// TimedOverlay is implemented by the snapshots of a live graph over a timed
// base: Temporal walks read the appended edges' times from it.
type TimedOverlay interface {
	Overlay
	// DeltaTimes returns the times of v's appended edges (Unix
	// milliseconds), DeltaTimes(v)[i] that of Vertex(v).Edges[i]; read-only,
	// as the edges are.
	DeltaTimes(v uint32) []int64
}

// DeltaVertex is one vertex's delta in a snapshot, 48 bytes, and the one
// record a live graph keeps of it: the delta index holds these by value in
// flat arrays (DeltaIndex.At), which is what the first draw of a step
// reads (the appended edges' address and count, both sides' weights, the
// tombstones' filter), and the live graph's applier keeps the ones it
// wrote since the last index in its tree (docs/design/live-graph.md,
// "Memory per vertex with a delta": a 64-byte state behind the tree, a
// 48-byte head and a pointer in the index cost 120 bytes a vertex). The
// tombstones, and the labels behind the appended edges, are an address and
// a count each (Dead, Labels). Its arrays are read-only and may share
// memory with later snapshots, which only ever append beyond their
// lengths, so two DeltaVertex values that are equal (==) are the same
// delta.
type DeltaVertex struct {
	// First is the first appended edge (nil when there are none), N
	// their count (Edges): oldest first, dead ones included, target and
	// weight side by side (the weight is 1 on an unweighted graph).
	First     *DeltaEdge
	N         uint32
	MaxWeight float32
	// BaseWeight is the weight sum of the base edges, dead ones included
	// (the edge count on an unweighted graph); MaxWeight is the largest
	// appended weight. A weighted step picks the delta side with weight
	// N * MaxWeight, the envelope of its accept-by-weight draw.
	BaseWeight float64
	// dead is the first tombstone (Dead), nil when there are none;
	// nDead their count, with labelledBit when the appended edges'
	// labels follow them (Labels).
	dead  *Tombstone
	nDead uint32
	// Live counts the vertex's live edges, base and appended: 0 is a
	// dead end.
	Live uint32
	// DeadBits has bit DeadBit(t) set for every tombstone's target t (0
	// when there are none): a step checks it before it searches the
	// tombstones, which sit in an array of their own, a cache miss away.
	// With a tombstone or two a vertex, a base edge's check reads the
	// array once in 32 to 64 steps instead of at every one. SetDead
	// keeps it.
	DeadBits uint64
}

// DeltaHead is the DeltaVertex under the name the walkers' first draw
// reads it by (it was a 48-byte digest of a 64-byte DeltaVertex until the
// two became one record).
type DeltaHead = DeltaVertex

// labelledBit marks DeltaVertex.nDead when the labels follow the edges.
const labelledBit = 1 << 31

// DeltaCap is the capacity of the array that holds n appended edges: the
// first of 1, 2, 3, 4, 6, 8, 12, 16 (steps of a half, each a whole Go size
// class: most vertices of a delta hold a few edges, and doubling left a
// quarter of their arrays spare), then powers of two. A labelled vertex's
// labels sit right after that many edges (Labels), so whoever makes the
// array (package livegraph) allocates DeltaCap(n) edges and grows it only
// when full.
func DeltaCap(n int) int {
	if uint(n) < uint(len(deltaCaps)) {
		return int(deltaCaps[n])
	}
	return 1 << bits.Len(uint(n-1))
}

// deltaCaps is DeltaCap up to 16: the applier asks it at every insert.
var deltaCaps = [17]uint8{0, 1, 2, 3, 4, 6, 6, 8, 8, 12, 12, 12, 12, 16, 16, 16, 16}

// Edges returns the appended edges. Read-only.
func (d *DeltaVertex) Edges() []DeltaEdge {
	if d.First == nil {
		return nil
	}
	return unsafe.Slice(d.First, d.N)
}

// SetEdges sets the appended edges (Edges) to e, which the DeltaVertex
// then shares. On a labelled vertex e must be the start of an array of
// DeltaCap(len(e)) edges followed by their labels (SetLabelled).
func (d *DeltaVertex) SetEdges(e []DeltaEdge) {
	d.First, d.N = unsafe.SliceData(e), uint32(len(e))
	if len(e) == 0 {
		d.First = nil
	}
}

// NDead counts the tombstones.
func (d *DeltaVertex) NDead() uint32 { return d.nDead &^ labelledBit }

// Dead returns the tombstones, sorted by target, one per deleted target:
// every base edge to Target is dead, and so is every appended edge to it
// with index below Upto (inserted before the delete). Read-only.
func (d *DeltaVertex) Dead() []Tombstone {
	if d.dead == nil {
		return nil
	}
	return unsafe.Slice(d.dead, d.NDead())
}

// SetDead sets the tombstones (Dead) to ts, which the DeltaVertex then
// shares and which must not change after, and their filter (DeadBits).
func (d *DeltaVertex) SetDead(ts []Tombstone) {
	d.dead, d.nDead = unsafe.SliceData(ts), uint32(len(ts))|d.nDead&labelledBit
	if len(ts) == 0 {
		d.dead = nil
	}
	d.DeadBits = 0
	for _, t := range ts {
		d.DeadBits |= DeadBit(t.Target)
	}
}

// SetDeadAdding is SetDead for ts holding the targets of the current
// tombstones and t: the filter gains t's bit instead of being computed
// again, O(1) where SetDead is O(len(ts)) (a hub's deletes each copy its
// tombstones already; a pass over them with a hash each slowed the
// applier).
func (d *DeltaVertex) SetDeadAdding(ts []Tombstone, t uint32) {
	bits := d.DeadBits | DeadBit(t)
	d.dead, d.nDead = unsafe.SliceData(ts), uint32(len(ts))|d.nDead&labelledBit
	d.DeadBits = bits
}

// SetLabelled says whether the appended edges' labels follow them in
// their array (Labels): on a labelled graph.
func (d *DeltaVertex) SetLabelled(on bool) {
	d.nDead &^= labelledBit
	if on {
		d.nDead |= labelledBit
	}
}

// Labels returns the appended edges' labels, Labels()[i] Edges()[i]'s, on
// a labelled graph (nil on one without, or without appended edges):
// MetaPath's overlay step reads them. They sit in the edges' array after
// DeltaCap(N) edges, append-only and shared as the edges are.
func (d *DeltaVertex) Labels() []uint8 {
	if d.nDead&labelledBit == 0 || d.First == nil {
		return nil
	}
	return unsafe.Slice((*uint8)(unsafe.Add(unsafe.Pointer(d.First), DeltaCap(int(d.N))*int(unsafe.Sizeof(DeltaEdge{})))), d.N)
}

// DeltaIndexer is implemented by overlays that keep a DeltaIndex of
// themselves, built once per snapshot, so that each job walking a snapshot
// does not rebuild it (IndexOf).
type DeltaIndexer interface {
	DeltaIndex() *DeltaIndex
}

// DeltaIndex is a snapshot's deltas in flat arrays, for walkers that check
// at every step whether the vertex has a delta: a bit per vertex (an eighth
// of a byte, where a lookup in the snapshot's own structure may be a walk
// down a tree) and, for the vertices marked, their DeltaVertex and
// DeltaHead by position (Rank).
//
// It has two levels, so that the index of a live graph's next snapshot
// costs what changed since the last one, not what the delta holds: a base
// level, the whole index as of an older snapshot, and a patch level, the
// vertices whose delta changed since (their current deltas; a mark there
// hides the base level's). Update makes the next snapshot's index from
// this one and the changed vertices, sharing the base level: it copies the
// marks (32 bytes per 64 vertices) and the patch. Fold merges the patch
// into a new base level, O(vertices with a delta), which the caller does
// when the patch has grown to a share of the base (livegraph: an eighth).
// A position is the rank in the base level, or the base level's length
// plus the rank in the patch.
//
// Why: a read-your-writes batch walks the newest snapshot, and building
// its index whole, O(vertices with a delta) through their scattered
// states, kept update -> walkable at 13-18 s at scale 22 (millions of
// vertices with a delta; docs/benchmarks/live-graph.md).
type DeltaIndex struct {
	words []indexWord
	// The base level's deltas, by rank among the words' base marks.
	heads []DeltaVertex
	// The patch's, by rank among the patch marks.
	pheads []DeltaVertex
	// n counts the vertices with a delta.
	n int
	// headBase and patchBase are the addresses HeadAddr adds a position's
	// offset to: the base level's first head, and the patch's first head
	// less the base level's length (wrapping, as uint64 arithmetic does).
	headBase, patchBase uint64
	// sides are the snapshot's side words (Sides), for unweighted [0]
	// and weighted [1] walks, each built by the first walk that asks
	// (behind pointers: an index is a value its tests copy). Two
	// allocations, so that a newer index's link to one kind (sideFrom)
	// keeps only that kind's words alive.
	sides [2]*sideSet
	// appended are the long deltas' sorted targets (HasAppended), made
	// as walks ask.
	appended *appendedSets
}

// sideSet is one kind of walk's side words, built once.
type sideSet struct {
	once  sync.Once
	words []uint64
	bytes atomic.Int64 // for SidesBytes, which may run beside a build
	// built is set once words are (read without the once by a newer
	// index's build, which patches them).
	built atomic.Bool
	// off is the base offsets words were built over: a newer index
	// patches them only over the same base.
	off *uint64
	// from is how words may be made from an older index's: nil once
	// built (dropping the older words), or for an index made whole.
	from atomic.Pointer[sideFrom]
}

// sideFrom links an index made by Update or UpdateFold to the index it was
// made from, per kind of walk: the older index's side words and the
// vertices whose delta changed between them. Sides copies the newest
// built words along the chain and recomputes only the vertices changed
// since, where a whole build computes every vertex with a delta.
//
// Why: while walks go on, each publication of a live graph makes an index,
// and each walked one built its side words whole: O(vertices with a
// delta), nearly every vertex at a 10% delta (8 bytes and a threshold
// search each; 4 Mi vertices at scale 22, 10-20 snapshots a second),
// where a publication changes a fraction of them (issue 37, "the live
// graph's CPU per update").
type sideFrom struct {
	prev    *sideSet
	changed []uint32 // sorted
	// depth and total count the links and changed vertices from here to
	// the first index of the chain; Update starts a new chain past
	// maxSideChain links or past a quarter of the vertices.
	depth, total int
}

// maxSideChain bounds how many unbuilt indexes a build looks back through
// for built side words: each link holds its changed vertices, and the
// chain keeps the first built words alive until a newer index builds its
// own.
const maxSideChain = 16

// indexWord is 64 vertices' marks and ranks in both levels, side by side:
// a lookup reads one 32-byte entry, where separate mark and rank arrays
// took two cache lines.
type indexWord struct {
	base, patch         uint64
	baseRank, patchRank uint32 // marks in the words before this one
	_                   uint64 // two entries a cache line
}

// DeadBit is the bit of DeltaHead.DeadBits that tombstones of target t
// set: t's top six bits after a multiplicative hash, so that targets near
// each other (the low ids an R-MAT graph's edges crowd to) spread.
func DeadBit(t uint32) uint64 { return 1 << (uint64(t) * 0x9e3779b97f4a7c15 >> 58) }

// MayBeDead reports whether a tombstone of target t may exist: false means
// there is none (BaseDead and DeltaDead are false), without reading the
// tombstones.
func (h *DeltaHead) MayBeDead(t uint32) bool { return h.DeadBits&DeadBit(t) != 0 }

// DeltaDeadTarget is DeltaDead for appended edge i whose target t the
// caller has read already.
func (h *DeltaHead) DeltaDeadTarget(i, t uint32) bool {
	if !h.MayBeDead(t) {
		return false
	}
	ts, ok := findTombstone(h.Dead(), t)
	return ok && i < ts.Upto
}

// findTombstone is a binary search of tombstones sorted by target.
func findTombstone(dead []Tombstone, t uint32) (Tombstone, bool) {
	lo, hi := 0, len(dead)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if dead[m].Target < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(dead) && dead[lo].Target == t {
		return dead[lo], true
	}
	return Tombstone{}, false
}

// NewDeltaIndex builds the index of n vertices (dense ids 0..n-1) from
// their deltas, listed in increasing vertex order.
func NewDeltaIndex(n int, deltas iter.Seq2[uint32, *DeltaVertex]) *DeltaIndex {
	x := &DeltaIndex{words: make([]indexWord, (n+63)/64)}
	for v, dv := range deltas {
		if dv == nil || int(v) >= n {
			continue
		}
		x.words[v>>6].base |= 1 << (v & 63)
		x.heads = append(x.heads, *dv)
	}
	var r uint32
	for i := range x.words {
		x.words[i].baseRank = r
		r += uint32(bits.OnesCount64(x.words[i].base))
	}
	x.n = len(x.heads)
	return x.addrs()
}

// NewDeltaIndexSpans builds the index of n vertices from spans of span
// vertices each (span a multiple of 64; span i covers vertices [i*span,
// (i+1)*span)), several spans at once: count(i) says how many deltas span
// i holds, deltas(i, yield) lists them in increasing vertex order. Two
// passes over the deltas, both spread over the cores: a live graph's
// snapshot holds millions of vertices with a delta behind pointers, and a
// single pass on one core (NewDeltaIndex) took most of a stage's CPU at
// scale 22 (docs/benchmarks/live-graph.md). The arrays are allocated at
// their exact sizes, so a build leaves no garbage but the old snapshot's.
func NewDeltaIndexSpans(n, span int, count func(i int) int, deltas func(i int, yield func(uint32, *DeltaVertex) bool)) *DeltaIndex {
	if span <= 0 || span%64 != 0 {
		panic(fmt.Sprintf("walk: delta index span %d is not a positive multiple of 64", span))
	}
	words := (n + 63) / 64
	spans := (n + span - 1) / span
	x := &DeltaIndex{words: make([]indexWord, words)}
	counts := make([]int, spans+1)
	ParallelSpans(spans, func(i int) { counts[i+1] = count(i) })
	for i := range spans {
		counts[i+1] += counts[i]
	}
	x.heads = make([]DeltaVertex, counts[spans])
	x.n = counts[spans]
	ParallelSpans(spans, func(i int) {
		k, end := counts[i], counts[i+1]
		lo, hi := uint32(i*span), uint32(min(n, (i+1)*span))
		for v, dv := range func(yield func(uint32, *DeltaVertex) bool) { deltas(i, yield) } {
			if dv == nil || v < lo || v >= hi {
				continue
			}
			if k == end {
				panic(fmt.Sprintf("walk: delta index span %d lists more than the %d deltas it counted", i, end-counts[i]))
			}
			x.words[v>>6].base |= 1 << (v & 63)
			x.heads[k] = *dv
			k++
		}
		if k != end {
			panic(fmt.Sprintf("walk: delta index span %d lists %d deltas, it counted %d", i, k-counts[i], end-counts[i]))
		}
		r := uint32(counts[i])
		for w := int(lo) / 64; w < (int(hi)+63)/64; w++ {
			x.words[w].baseRank = r
			r += uint32(bits.OnesCount64(x.words[w].base))
		}
	})
	return x.addrs()
}

// DeltaChange is a vertex whose delta changed (or came to be) since the
// snapshot of an index: its delta in the next snapshot.
type DeltaChange struct {
	V uint32
	D *DeltaVertex
}

// updateChunk is how many words a goroutine of Update and Fold takes at a
// time: 64 Ki vertices.
const updateChunk = 1024

// Update returns the index of the next snapshot, of n vertices (at least
// x's), whose deltas are x's with changes put in: changes sorted by vertex,
// no vertex twice, each with its delta (a vertex never loses its delta
// within a base). x is left as it is, for its snapshot's walkers. It costs
// O(n/64 + the patch + the changes): the base level is shared, and the
// patch holds the changed vertices since the last Fold.
func (x *DeltaIndex) Update(n int, changes []DeltaChange) *DeltaIndex {
	words := max((n+63)/64, len(x.words))
	y := &DeltaIndex{words: make([]indexWord, words), heads: x.heads, n: x.n}
	copy(y.words, x.words)
	for i := len(x.words); i < words; i++ {
		y.words[i].baseRank = uint32(len(x.heads))
	}
	for _, c := range changes {
		if c.D == nil || int(c.V) >= words*64 {
			panic(fmt.Sprintf("walk: delta index change of vertex %d (nil: %v) beyond the %d vertices or without a delta", c.V, c.D == nil, words*64))
		}
		wd := &y.words[c.V>>6]
		m := uint64(1) << (c.V & 63)
		if (wd.base|wd.patch)&m == 0 {
			y.n++
		}
		wd.patch |= m
	}
	var r uint32
	for i := range y.words {
		y.words[i].patchRank = r
		r += uint32(bits.OnesCount64(y.words[i].patch))
	}
	y.pheads = make([]DeltaVertex, r)
	// Chunks of words fill their parts of the patch at once: a chunk's
	// old entries start at its first word's old rank, its changes where
	// a search puts its first vertex.
	ParallelSpans((words+updateChunk-1)/updateChunk, func(c int) {
		w0, w1 := c*updateChunk, min(words, (c+1)*updateChunk)
		ci, _ := slices.BinarySearchFunc(changes, uint32(w0*64), func(d DeltaChange, v uint32) int { return cmpU32(d.V, v) })
		var oc int
		if w0 < len(x.words) {
			oc = int(x.words[w0].patchRank)
		} else {
			oc = len(x.pheads)
		}
		k := int(y.words[w0].patchRank)
		for w := w0; w < w1; w++ {
			p := y.words[w].patch
			if p == 0 {
				continue
			}
			var old uint64
			if w < len(x.words) {
				old = x.words[w].patch
			}
			for ; p != 0; p &= p - 1 {
				b := uint(bits.TrailingZeros64(p))
				v := uint32(w*64) + uint32(b)
				if ci < len(changes) && changes[ci].V == v {
					y.pheads[k] = *changes[ci].D
					ci++
				} else {
					y.pheads[k] = x.pheads[oc]
				}
				if old>>b&1 != 0 {
					oc++
				}
				k++
			}
		}
	})
	return y.addrs().linkSides(x, changes)
}

// Fold returns x with its patch merged into the base level: the index a
// whole build of x's deltas gives (NewDeltaIndex), with an empty patch. It
// costs O(vertices with a delta), spread over the cores.
func (x *DeltaIndex) Fold() *DeltaIndex {
	y := &DeltaIndex{words: make([]indexWord, len(x.words)), n: x.n}
	var r uint32
	for i, wd := range x.words {
		y.words[i] = indexWord{base: wd.base | wd.patch, baseRank: r}
		r += uint32(bits.OnesCount64(wd.base | wd.patch))
	}
	y.heads = make([]DeltaVertex, r)
	ParallelSpans((len(x.words)+updateChunk-1)/updateChunk, func(c int) {
		w0, w1 := c*updateChunk, min(len(x.words), (c+1)*updateChunk)
		bc, pc, k := int(x.words[w0].baseRank), int(x.words[w0].patchRank), int(y.words[w0].baseRank)
		for w := w0; w < w1; w++ {
			wd := x.words[w]
			if wd.patch == 0 {
				// The run of base entries as it is.
				c := bits.OnesCount64(wd.base)
				copy(y.heads[k:k+c], x.heads[bc:bc+c])
				bc, k = bc+c, k+c
				continue
			}
			for u := wd.base | wd.patch; u != 0; u &= u - 1 {
				b := uint(bits.TrailingZeros64(u))
				switch {
				case wd.patch>>b&1 != 0:
					y.heads[k] = x.pheads[pc]
					pc++
					if wd.base>>b&1 != 0 {
						bc++
					}
				default:
					y.heads[k] = x.heads[bc]
					bc++
				}
				k++
			}
		}
	})
	return y.addrs()
}

// Preview returns what Update(n, changes) would give for Pending and Len,
// O(changes), without making it: a caller that folds once the patch has
// grown large enough (livegraph) decides before the copy whether it wants
// Update or UpdateFold.
func (x *DeltaIndex) Preview(changes []DeltaChange) (pending, length int) {
	pending, length = len(x.pheads), x.n
	for _, c := range changes {
		w := int(c.V >> 6)
		var base, patch uint64
		if w < len(x.words) {
			base, patch = x.words[w].base, x.words[w].patch
		}
		m := uint64(1) << (c.V & 63)
		if patch&m == 0 {
			pending++
		}
		if (base|patch)&m == 0 {
			length++
		}
	}
	return pending, length
}

// UpdateFold is Update(n, changes).Fold() in one pass: the same index,
// without the patch Update would copy only for Fold to drop. A publication
// that folds allocated both, a patch of up to the index's length and the
// new base level (docs/benchmarks/live-graph.md, "The fold without its
// patch"); this allocates the new base level and the words.
func (x *DeltaIndex) UpdateFold(n int, changes []DeltaChange) *DeltaIndex {
	words := max((n+63)/64, len(x.words))
	y := &DeltaIndex{words: make([]indexWord, words)}
	// The changes' marks first, in the words' patch fields, which the
	// folded index leaves 0 and the fill below reads then clears.
	for _, c := range changes {
		if c.D == nil || int(c.V) >= words*64 {
			panic(fmt.Sprintf("walk: delta index change of vertex %d (nil: %v) beyond the %d vertices or without a delta", c.V, c.D == nil, words*64))
		}
		y.words[c.V>>6].patch |= 1 << (c.V & 63)
	}
	var r uint32
	for i := range y.words {
		m := y.words[i].patch
		if i < len(x.words) {
			m |= x.words[i].base | x.words[i].patch
		}
		y.words[i].base, y.words[i].baseRank = m, r
		r += uint32(bits.OnesCount64(m))
	}
	y.n = int(r)
	y.heads = make([]DeltaVertex, r)
	ParallelSpans((words+updateChunk-1)/updateChunk, func(c int) {
		w0, w1 := c*updateChunk, min(words, (c+1)*updateChunk)
		ci, _ := slices.BinarySearchFunc(changes, uint32(w0*64), func(d DeltaChange, v uint32) int { return cmpU32(d.V, v) })
		bc, pc := len(x.heads), len(x.pheads)
		if w0 < len(x.words) {
			bc, pc = int(x.words[w0].baseRank), int(x.words[w0].patchRank)
		}
		k := int(y.words[w0].baseRank)
		for w := w0; w < w1; w++ {
			var old indexWord
			if w < len(x.words) {
				old = x.words[w]
			}
			ch := y.words[w].patch
			y.words[w].patch = 0
			if ch|old.patch == 0 {
				// The run of base entries as it is.
				c := bits.OnesCount64(old.base)
				copy(y.heads[k:k+c], x.heads[bc:bc+c])
				bc, k = bc+c, k+c
				continue
			}
			for u := y.words[w].base; u != 0; u &= u - 1 {
				b := uint(bits.TrailingZeros64(u))
				switch {
				case ch>>b&1 != 0:
					y.heads[k] = *changes[ci].D
					ci++
				case old.patch>>b&1 != 0:
					y.heads[k] = x.pheads[pc]
				default:
					y.heads[k] = x.heads[bc]
				}
				if old.patch>>b&1 != 0 {
					pc++
				}
				if old.base>>b&1 != 0 {
					bc++
				}
				k++
			}
		}
	})
	return y.addrs().linkSides(x, changes)
}

// Pending counts the vertices in the patch: what Update copies and Fold
// would merge.
func (x *DeltaIndex) Pending() int { return len(x.pheads) }

// Flat returns x with no patch (x itself when it has none, else Fold's
// index): its positions are 0..Len()-1 in vertex order, for a copy of the
// index elsewhere (Words) that walks by rank.
func (x *DeltaIndex) Flat() *DeltaIndex {
	if x.Pending() == 0 {
		return x
	}
	return x.Fold()
}

// Words returns a flat index's bitmap (bit v of word v/64 set when v has a
// delta) and, per word, the number of vertices marked in the words before
// it: what a copy of the index elsewhere (the GPU engine's, on the device)
// needs to find a vertex's position, Head(position) for its head. They are
// copies, O(vertices / 64). x must be flat (Flat): a patch's positions
// are not ranks.
func (x *DeltaIndex) Words() (marks []uint64, rank []uint32) {
	if x.Pending() != 0 {
		panic("walk: Words of a delta index with a patch; take Flat() first")
	}
	marks, rank = make([]uint64, len(x.words)), make([]uint32, len(x.words))
	for i, wd := range x.words {
		marks[i], rank[i] = wd.base, wd.baseRank
	}
	return marks, rank
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ParallelSpans runs f(0..n-1) on up to GOMAXPROCS goroutines, each
// taking the next i as it finishes one: the delta index's builds here and
// the GPU engine's layout of it (gpu/overlay.go) spread their spans so.
func ParallelSpans(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// IndexOf returns o's DeltaIndex: the one it keeps, or one built by asking
// Vertex of every vertex.
func IndexOf(o Overlay) *DeltaIndex {
	if di, ok := o.(DeltaIndexer); ok {
		return di.DeltaIndex()
	}
	return NewDeltaIndex(o.NumVertices(), func(yield func(uint32, *DeltaVertex) bool) {
		for v := range uint32(o.NumVertices()) {
			if dv := o.Vertex(v); dv != nil && !yield(v, dv) {
				return
			}
		}
	})
}

// Marks returns word w of the index's bitmap: bit b set when vertex
// 64w+b has a delta, in either level (0 beyond the index's vertices). With
// Rank and At, what a copy of the index elsewhere that keeps its own levels
// (the GPU engine's incremental upload, gpu/overlay.go) reads to find the
// vertices whose delta changed since the copy it holds: their *DeltaVertex
// differs, as a published vertex's delta is never written again.
func (x *DeltaIndex) Marks(w int) uint64 {
	if w >= len(x.words) {
		return 0
	}
	return x.words[w].base | x.words[w].patch
}

// Has reports whether v has a delta.
func (x *DeltaIndex) Has(v uint32) bool {
	w := int(v >> 6)
	return w < len(x.words) && (x.words[w].base|x.words[w].patch)>>(v&63)&1 != 0
}

// Vertex returns v's delta, nil when it has none: Overlay.Vertex, read from
// the flat arrays.
func (x *DeltaIndex) Vertex(v uint32) *DeltaVertex {
	k := x.Rank(v)
	if k < 0 {
		return nil
	}
	return x.At(k)
}

// Rank returns the position of v's delta in the index (At, Head), -1 when
// v has none.
func (x *DeltaIndex) Rank(v uint32) int {
	w := int(v >> 6)
	if w >= len(x.words) {
		return -1
	}
	wd := &x.words[w]
	below := uint64(1)<<(v&63) - 1
	if wd.patch>>(v&63)&1 != 0 {
		return len(x.heads) + int(wd.patchRank) + bits.OnesCount64(wd.patch&below)
	}
	if wd.base>>(v&63)&1 != 0 {
		return int(wd.baseRank) + bits.OnesCount64(wd.base&below)
	}
	return -1
}

// Lookup is Rank without a branch on whether v has a delta, or on its
// level: has is 1 when it has one, 0 when not, and k is its position when
// it has one (otherwise a position not to be read). v must be below the
// index's vertex count.
func (x *DeltaIndex) Lookup(v uint32) (has uint64, k int) {
	wd := &x.words[v>>6]
	sh := v & 63
	below := uint64(1)<<sh - 1
	inPatch := wd.patch >> sh & 1
	kb := int(wd.baseRank) + bits.OnesCount64(wd.base&below)
	kp := len(x.heads) + int(wd.patchRank) + bits.OnesCount64(wd.patch&below)
	return inPatch | wd.base>>sh&1, kb + int(-int64(inPatch)&int64(kp-kb))
}

// HeadAddr is the address of Head(k), computed without a branch or a
// bounds check, for a prefetch: an address from a position not to be read
// (Lookup's, when has is 0) is harmless to prefetch, never to load.
func (x *DeltaIndex) HeadAddr(k int) uint64 {
	mask := uint64(int64(k-len(x.heads)) >> 63) // all ones in the base level
	return x.patchBase ^ (x.headBase^x.patchBase)&mask + uint64(k)*uint64(unsafe.Sizeof(DeltaHead{}))
}

// addrs sets the addresses HeadAddr starts from, and gives x its (empty)
// side records and appended sets.
func (x *DeltaIndex) addrs() *DeltaIndex {
	x.sides = [2]*sideSet{new(sideSet), new(sideSet)}
	x.appended = new(appendedSets)
	size := uint64(unsafe.Sizeof(DeltaHead{}))
	if len(x.heads) > 0 {
		x.headBase = uint64(uintptr(unsafe.Pointer(&x.heads[0])))
	}
	if len(x.pheads) > 0 {
		x.patchBase = uint64(uintptr(unsafe.Pointer(&x.pheads[0]))) - uint64(len(x.heads))*size
	}
	return x
}

// WordAddr is the address of the index word Rank(v) reads, for a
// prefetch (0 for a vertex beyond the index: a prefetch of it is harmless).
func (x *DeltaIndex) WordAddr(v uint32) uintptr {
	if int(v>>6) >= len(x.words) {
		return 0
	}
	return uintptr(unsafe.Pointer(&x.words[v>>6]))
}

// At is the delta at position k (Rank), in the index's arrays: read-only.
func (x *DeltaIndex) At(k int) *DeltaVertex {
	if k < len(x.heads) {
		return &x.heads[k]
	}
	return &x.pheads[k-len(x.heads)]
}

// Head is At, under the name the walkers' first draw reads it by.
func (x *DeltaIndex) Head(k int) *DeltaHead { return x.At(k) }

// Bytes is the index's memory: the bitmap and ranks, and per vertex with a
// delta its 48-byte DeltaVertex (twice for a vertex in both levels).
func (x *DeltaIndex) Bytes() int64 {
	return int64(len(x.words))*int64(unsafe.Sizeof(indexWord{})) +
		int64(len(x.heads)+len(x.pheads))*int64(unsafe.Sizeof(DeltaVertex{}))
}

// Len counts the vertices with a delta.
func (x *DeltaIndex) Len() int { return x.n }

// A side word is what a step that drew a base edge at vertex v reads of
// v's delta to know whether that edge is the step's (Sides): 8 bytes per
// vertex, found by v alone, where the DeltaHead takes the index's word and
// two population counts to find, and 48 bytes to read. Bits 0..31 hold a
// threshold: the step's first attempt takes the base side when its side
// draw x (x2) is below it (SideThreshold, capped at 2^32-1; 0 for a vertex
// without a live edge), and a draw at or above it is decided by the head
// (by the index: a vertex without a delta takes the base side). Bits
// 32..63 hold the tombstones' bits (DeltaHead.DeadBits folded to 32, bit
// b and b+32 together: SideDead); a base edge to a target whose bit is
// clear is live. Kept small so that the words of all vertices stay in a
// core's L2 where the heads do not: 512 KiB at 2^16 vertices.

// SideThresholdMask masks a side word's threshold.
const SideThresholdMask = 1<<32 - 1

// SideDead is the bit of a side word that tombstones of target t set.
func SideDead(t uint32) uint64 { return 1 << (32 + (uint64(t)*0x9e3779b97f4a7c15>>58)&31) }

// SideThreshold returns the number of side draws x (0..2^32) for which a
// step at a vertex whose sides weigh wb (base) and wd (delta) takes the
// base side: x takes it when float64(x) * 2^-32 * (wb+wd) < wb, the test
// the overlay walkers make (overlayAttempts), and as that is monotone in x
// those x are exactly 0..threshold-1. It starts from the quotient and
// walks to the exact boundary, so a threshold agrees with the test bit for
// bit and walks that read it are the walks that compute the test.
func SideThreshold(wb, wd float64) uint64 {
	base := func(x uint64) bool { return float64(uint32(x))*(1.0/(1<<32))*(wb+wd) < wb }
	var t uint64
	if q := wb / (wb + wd) * (1 << 32); q >= 1<<32 {
		t = 1 << 32
	} else if q > 0 {
		t = uint64(q)
	}
	for t > 0 && !base(t-1) {
		t--
	}
	for t < 1<<32 && base(t) {
		t++
	}
	return t
}

// Sides returns a side word for each of the index's vertices (and up to
// the next multiple of 64), for weighted or unweighted walks over a base
// whose offsets are off (an unweighted walk weighs the base side by the
// base degree). They are made on the first call for each kind, spread
// over the cores, and kept with the index, so every job on the snapshot
// shares them (docs/benchmarks/live-graph.md has the bytes per delta
// edge). An index made by Update or UpdateFold copies the words of the
// newest index before it that built them (over the same offsets) and
// recomputes the vertices changed since (sideFrom); others build them
// whole. Either way the words are those a whole build gives. All callers
// of one index must pass the same base's offsets: the snapshot's.
func (x *DeltaIndex) Sides(weighted bool, off []uint64) []uint64 {
	k := 0
	if weighted {
		k = 1
	}
	set := x.sides[k]
	set.once.Do(func() {
		words := make([]uint64, len(x.words)*64)
		if old, lists := set.older(unsafe.SliceData(off), len(words)); old != nil {
			x.patchSides(words, old, lists, weighted, off)
		} else {
			x.buildSides(words, weighted, off)
		}
		set.words, set.off = words, unsafe.SliceData(off)
		set.bytes.Store(int64(len(words)) * 8)
		set.built.Store(true)
		set.from.Store(nil)
	})
	return set.words
}

// older returns the newest built side words along set's chain (sideFrom)
// over the base offsets off, of at most n words, and the lists of the
// vertices changed since them; nil when there are none.
func (set *sideSet) older(off *uint64, n int) (old []uint64, lists [][]uint32) {
	f := set.from.Load()
	for depth := 0; f != nil && depth < maxSideChain; depth++ {
		lists = append(lists, f.changed)
		p := f.prev
		if f = p.from.Load(); f == nil || p.built.Load() {
			// Built, or being built when from was read (a build sets
			// built before it drops from).
			if !p.built.Load() || p.off != off || len(p.words) > n {
				return nil, nil
			}
			return p.words, lists
		}
	}
	return nil, nil
}

// sideWord is vertex v's side word: the threshold of its sides' weights
// (0 without a live edge) and its tombstones' bits. v has a delta.
func (x *DeltaIndex) sideWord(v uint32, weighted bool, off []uint64) uint64 {
	h := x.Head(x.Rank(v))
	var t uint64
	if h.Live > 0 {
		wb, wd := h.BaseWeight, float64(h.N)*float64(h.MaxWeight)
		if !weighted {
			var d uint64
			if int(v) < len(off)-1 {
				d = off[v+1] - off[v]
			}
			wb, wd = float64(d), float64(h.N)
		}
		t = min(SideThreshold(wb, wd), SideThresholdMask)
	}
	return t | (h.DeadBits|h.DeadBits<<32)&^SideThresholdMask
}

// buildSides fills words with every vertex's side word.
func (x *DeltaIndex) buildSides(words []uint64, weighted bool, off []uint64) {
	ParallelSpans((len(x.words)+updateChunk-1)/updateChunk, func(c int) {
		w0, w1 := c*updateChunk, min(len(x.words), (c+1)*updateChunk)
		seg := words[w0*64 : w1*64]
		for j := range seg {
			seg[j] = SideThresholdMask
		}
		for w := w0; w < w1; w++ {
			for m := x.words[w].base | x.words[w].patch; m != 0; m &= m - 1 {
				v := uint32(w*64 + bits.TrailingZeros64(m))
				words[v] = x.sideWord(v, weighted, off)
			}
		}
	})
}

// sidePatchChunk is how many changed vertices a goroutine of patchSides
// recomputes at a time.
const sidePatchChunk = 4096

// patchSides fills words with old's words (a vertex beyond them has no
// delta there) and recomputes the vertices of lists: those whose delta
// changed since old was built, or came to be (a vertex never loses its
// delta over one base, so the others' words are old's).
func (x *DeltaIndex) patchSides(words, old []uint64, lists [][]uint32, weighted bool, off []uint64) {
	span := updateChunk * 64
	ParallelSpans((len(words)+span-1)/span, func(c int) {
		lo, hi := c*span, min(len(words), (c+1)*span)
		n := copy(words[lo:hi], old[min(lo, len(old)):min(hi, len(old))])
		seg := words[lo+n : hi]
		for j := range seg {
			seg[j] = SideThresholdMask
		}
	})
	// One list after another: a vertex appears at most once in a list,
	// so the goroutines of one never write the same word.
	for _, changed := range lists {
		ParallelSpans((len(changed)+sidePatchChunk-1)/sidePatchChunk, func(c int) {
			for _, v := range changed[c*sidePatchChunk : min(len(changed), (c+1)*sidePatchChunk)] {
				words[v] = x.sideWord(v, weighted, off)
			}
		})
	}
}

// linkSides links y's side words to x's, y made from x with changes
// (sideFrom), for each kind whose chain stays within its bounds; it
// returns y.
func (y *DeltaIndex) linkSides(x *DeltaIndex, changes []DeltaChange) *DeltaIndex {
	if x.sides[0] == nil {
		return y
	}
	var changed []uint32 // both kinds' links share it
	for k := range y.sides {
		prev := x.sides[k]
		f := &sideFrom{prev: prev, depth: 1, total: len(changes)}
		if up := prev.from.Load(); up != nil && !prev.built.Load() {
			f.depth, f.total = up.depth+1, up.total+len(changes)
		}
		if f.depth > maxSideChain || f.total > len(y.words)*16 {
			continue // a whole build costs about as much
		}
		if changed == nil {
			changed = make([]uint32, len(changes))
			for i, c := range changes {
				changed[i] = c.V
			}
		}
		f.changed = changed
		y.sides[k].from.Store(f)
	}
	return y
}

// SidesBytes is the memory of the side words built so far (Sides).
func (x *DeltaIndex) SidesBytes() int64 {
	var n int64
	for k := range x.sides {
		n += x.sides[k].bytes.Load()
	}
	return n
}

// DeltaEdge is one appended edge.
type DeltaEdge struct {
	Target uint32
	Weight float32
}

// Tombstone marks the edges to one target deleted; see DeltaVertex.Dead.
type Tombstone struct {
	Target uint32
	Upto   uint32
}

// BaseDead reports whether base edges to t are deleted.
func (d *DeltaVertex) BaseDead(t uint32) bool {
	if !d.MayBeDead(t) {
		return false
	}
	_, ok := findTombstone(d.Dead(), t)
	return ok
}

// DeltaDead reports whether appended edge i is deleted.
func (d *DeltaVertex) DeltaDead(i int) bool {
	if d.DeadBits == 0 {
		return false
	}
	return d.DeltaDeadTarget(uint32(i), d.Edges()[i].Target)
}

// OverlaySupported returns nil when the CPU engine walks a on a live graph's
// delta, else an error wrapping ErrInvalidAlgorithm that names the limit.
func OverlaySupported(a Algorithm) error {
	switch a.Kind {
	case DeepWalk, PPR:
		switch a.ResolvedStepper() {
		case StepperUniform, StepperAlias:
			return nil
		}
		return invalid("the %s sampler does not read a live graph's delta yet (uniform and alias do)", a.ResolvedStepper())
	case Node2Vec:
		if a.ResolvedStepper() == StepperRejection {
			return nil
		}
		return invalid("the %s sampler does not read a live graph's delta yet (node2vec's rejection sampler does)", a.ResolvedStepper())
	case MetaPath:
		// The auto sampler only: its overlay step draws from the label
		// tables (beyond MaxTableLabels, scans); a forced reservoir
		// sampler has no overlay step.
		if a.Stepper == StepperAuto {
			return nil
		}
		return invalid("the %s sampler does not read a live graph's delta yet (metapath's auto sampler does)", a.Stepper)
	case Temporal:
		// Every bias, direction and gap, temporal Node2Vec too: a step
		// from a vertex with a delta draws over the window's live edges
		// gathered from base and delta (the CPU engine's
		// walkOverlayTemporal).
		return nil
	}
	return invalid("%s walks do not read a live graph's delta yet (deepwalk, ppr, node2vec, metapath and temporal do); walk the compacted graph", a.Kind)
}

// OverlayWalker is implemented by engines that walk jobs on a live graph's
// snapshot (Job.Overlay): the in-memory CPU engine and the GPU engine (for
// the algorithms its CheckOverlay accepts). An engine without it refuses such
// jobs (ValidateJobs), so a caller asks CheckOverlay before it takes them.
type OverlayWalker interface {
	CheckOverlay(a Algorithm) error
}

// SnapshotHolder is implemented by engines whose jobs of some algorithms
// pay for a snapshot other than the one they walked last with a copy of it
// (the GPU engine's temporal walks gather the snapshot's timed lists on the
// host: about a second for a delta over a million vertices of a scale-22
// graph). A caller that may choose among consistent snapshots (the stage,
// within WALKSTAGE_EDGE_SNAPSHOT_HOLD) keeps such jobs on the one the
// engine holds.
type SnapshotHolder interface {
	HoldsSnapshot(a Algorithm) bool
}

// HoldsSnapshot reports whether e's jobs of algorithm a pay to change
// snapshots (SnapshotHolder).
func HoldsSnapshot(e Engine, a Algorithm) bool {
	h, ok := e.(SnapshotHolder)
	return ok && h.HoldsSnapshot(a)
}

// CheckOverlay returns nil when e walks a on a live graph's delta, else an
// error wrapping ErrInvalidAlgorithm that names the limit.
func CheckOverlay(e Engine, a Algorithm) error {
	if ow, ok := e.(OverlayWalker); ok {
		return ow.CheckOverlay(a)
	}
	return fmt.Errorf("%w: the %s engine does not walk a live graph's delta yet (the cpu and gpu engines do)", ErrInvalidAlgorithm, e.Name())
}
