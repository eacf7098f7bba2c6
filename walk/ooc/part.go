package ooc

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// needs is what a run's walks read from a loaded partition.
type needs struct {
	alias       bool // weighted DeepWalk or PPR: per-vertex alias tables
	labelTables bool // MetaPath: per-(vertex, label) segments
	segAlias    bool // weighted MetaPath: alias tables over each segment
}

// covers says whether tables loaded for h serve n too.
func (h needs) covers(n needs) bool {
	return (h.alias || !n.alias) && (h.labelTables || !n.labelTables) && (h.segAlias || !n.segAlias)
}

// part is one slot of the pool: a loaded partition, its arrays in the
// slot's own buffers, which the next partition the slot takes reuses.
type part struct {
	id  int // partition index, -1 when the slot is empty
	p   Partition
	has needs

	// off holds the partition's offsets rebased to its first edge:
	// vertex Lo+i's edges are [off[i], off[i+1]) of tgt.
	off []uint64
	tgt []uint32
	// prob and alt are the alias table (walk.AliasVertex) of each vertex,
	// by edge: keep tgt[e] when Unit24(coin) < prob[e], else take alt[e],
	// the entry walk/cpu's packed table holds.
	prob []float32
	alt  []uint32
	segs segTables

	bufOff, bufTgt, bufW, bufLab, bufProb, bufAlt alignedBuf
}

// segTables are walk/cpu's label tables for one partition: segment l of
// local vertex i is [off[i*L+l], off[i*L+l+1]) of tgt, with alias entries
// over the segment's weights for a weighted graph.
type segTables struct {
	numLabels int
	off       []uint64
	tgt       []uint32
	prob      []float32
	alt       []uint32
}

func castSlice[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(z)))
}

// load reads partition id into the slot and builds the tables n asks for.
// It never touches the graph's mapping: g gives only counts and flags.
func (s *part) load(ctx context.Context, g *graph.Graph, r *reader, sec sections, tf *tableFile, id int, p Partition, n needs, workers int) error {
	s.id = -1
	nv, ne := int64(p.Vertices()), p.Edges()
	raw, err := r.read(&s.bufOff, int64(sec.offsets)+int64(p.Lo)*8, (nv+1)*8)
	if err != nil {
		return err
	}
	s.off = castSlice[uint64](raw)
	base := s.off[0]
	if s.off[nv]-base != uint64(ne) {
		return fmt.Errorf("%w: partition [%d, %d) offsets span %d edges, the plan %d (the file changed since the plan?)",
			graph.ErrFormat, p.Lo, p.Hi, s.off[nv]-base, ne)
	}
	for i := range s.off {
		s.off[i] -= base
	}
	if raw, err = r.read(&s.bufTgt, int64(sec.targets)+int64(p.EdgeLo)*4, ne*4); err != nil {
		return err
	}
	s.tgt = castSlice[uint32](raw)
	stored := n.alias && tf != nil && tf.has(id)
	if stored {
		// Built on an earlier load: read back, the weights not needed
		// unless MetaPath's segments are built too. Into the weights'
		// buffer when they are not, which building the table used: a slot
		// then holds 12 bytes an edge for a weighted walk, not 16.
		pb := &s.bufW
		if n.segAlias {
			pb = &s.bufProb
		}
		if raw, err = tf.r.read(pb, int64(p.EdgeLo)*4, ne*4); err != nil {
			return err
		}
		s.prob = castSlice[float32](raw)
		if raw, err = tf.r.read(&s.bufAlt, tf.altOff+int64(p.EdgeLo)*4, ne*4); err != nil {
			return err
		}
		s.alt = castSlice[uint32](raw)
	}
	var w []float32
	if n.segAlias || n.alias && !stored {
		if raw, err = r.read(&s.bufW, int64(sec.weights)+int64(p.EdgeLo)*4, ne*4); err != nil {
			return err
		}
		w = castSlice[float32](raw)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.labelTables {
		raw, err := r.read(&s.bufLab, int64(sec.labels)+int64(p.EdgeLo), ne)
		if err != nil {
			return err
		}
		// Built before the alias tables, which overwrite the weights.
		s.buildSegs(&graph.Graph{Offsets: s.off, Targets: s.tgt, Weights: w, Labels: raw, NumLabels: g.NumLabels}, n.segAlias)
	}
	switch {
	case n.alias && !stored:
		s.buildAlias(w, workers)
		if tf != nil {
			if err := tf.store(id, p.EdgeLo, s.prob, s.alt); err != nil {
				return err
			}
		}
	case !n.alias:
		s.prob, s.alt = nil, nil
	}
	s.id, s.p, s.has = id, p, n
	return nil
}

// buildAlias builds every vertex's alias table as walk/cpu's packed table
// holds it, in place over the weights w (a vertex's weights are copied out
// before its probabilities overwrite them), on workers goroutines.
func (s *part) buildAlias(w []float32, workers int) {
	s.prob, s.alt = w, castSlice[uint32](s.bufAlt.ensure(len(s.tgt)*4))
	nv := len(s.off) - 1
	var wg sync.WaitGroup
	for k := range workers {
		lo, hi := vertexShare(s.off, k, workers)
		if lo >= hi {
			continue
		}
		wg.Go(func() {
			var scaled []float64
			var small, large []uint32
			var ws []float32
			for v := lo; v < hi && v < nv; v++ {
				a, b := s.off[v], s.off[v+1]
				if a == b {
					continue
				}
				ws = append(ws[:0], w[a:b]...)
				alias := s.alt[a:b]
				scaled, small, large = walk.AliasVertex(ws, s.prob[a:b], alias, scaled, small, large)
				for i, c := range alias {
					alias[i] = s.tgt[a+uint64(c)]
				}
			}
		})
	}
	wg.Wait()
}

// vertexShare is share k of n of the vertices of off, cut so that each
// share has about the same edges plus vertices.
func vertexShare(off []uint64, k, n int) (lo, hi int) {
	nv := len(off) - 1
	total := off[nv] + uint64(nv)
	cut := func(j int) int {
		if j >= n {
			return nv
		}
		want := total * uint64(j) / uint64(n)
		// First vertex v with off[v]+v >= want.
		l, h := 0, nv
		for l < h {
			m := (l + h) / 2
			if off[m]+uint64(m) < want {
				l = m + 1
			} else {
				h = m
			}
		}
		return l
	}
	return cut(k), cut(k + 1)
}

// buildSegs builds the partition's label tables (walk.ForLabelSegments, as
// walk/cpu lays them out).
func (s *part) buildSegs(pg *graph.Graph, weighted bool) {
	nl := pg.NumLabels
	nv, ne := pg.NumVertices(), len(pg.Targets)
	st := &s.segs
	st.numLabels = nl
	st.off = grow(st.off, nv*nl+1)
	st.tgt = grow(st.tgt, ne)
	if weighted {
		st.prob, st.alt = grow(st.prob, ne), grow(st.alt, ne)
	} else {
		st.prob, st.alt = st.prob[:0], st.alt[:0]
	}
	st.off[nv*nl] = uint64(ne)
	walk.ForLabelSegments(pg, weighted, func(v, l int, seg uint64, adj []uint32, prob []float32, alias []uint32) {
		st.off[v*nl+l] = seg
		copy(st.tgt[seg:], adj)
		for i := range prob {
			st.prob[seg+uint64(i)] = prob[i]
			st.alt[seg+uint64(i)] = adj[alias[i]]
		}
	})
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
