package graph

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// validateParallel checks the same invariants as Validate, spread over
// GOMAXPROCS goroutines, so loading a 100M-edge file is not held up by one
// core. When several parts are bad it reports the one at the lowest vertex,
// so the message does not depend on scheduling.
func (g *Graph) validateParallel() error {
	if len(g.Offsets) == 0 {
		return fmt.Errorf("%w: no offsets", ErrInvalid)
	}
	n := len(g.Offsets) - 1
	e := uint64(len(g.Targets))
	if g.Offsets[0] != 0 || g.Offsets[n] != e {
		return fmt.Errorf("%w: offsets span [%d,%d], want [0,%d]", ErrInvalid, g.Offsets[0], g.Offsets[n], e)
	}
	if g.Weights != nil && uint64(len(g.Weights)) != e || g.Labels != nil && uint64(len(g.Labels)) != e {
		return fmt.Errorf("%w: weights or labels do not match %d edges", ErrInvalid, e)
	}
	if err := g.validateShape(); err != nil {
		return err
	}
	const chunk = 1 << 15
	chunks := (n + chunk - 1) / chunk
	errs := make([]error, chunks)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), max(chunks, 1)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				c := int(next.Add(1) - 1)
				if c >= chunks {
					return
				}
				if err := g.validateRange(c*chunk, min((c+1)*chunk, n)); err != nil {
					errs[c] = err
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// validateShape checks the lengths of the optional arrays against V and E
// (after the offsets span [0, E] was checked), so validateRange can index
// them without bounds failures.
func (g *Graph) validateShape() error {
	n := len(g.Offsets) - 1
	e := len(g.Targets)
	if g.IDs != nil && len(g.IDs) != n {
		return fmt.Errorf("%w: %d external ids for %d vertices", ErrInvalid, len(g.IDs), n)
	}
	if (g.Times == nil) != (g.ByTime == nil) || g.Times != nil && (len(g.Times) != e || len(g.ByTime) != e) {
		return fmt.Errorf("%w: %d times and %d time-order entries for %d edges", ErrInvalid, len(g.Times), len(g.ByTime), e)
	}
	if g.StrOffsets != nil {
		if g.IDs != nil {
			return fmt.Errorf("%w: both integer and string external ids", ErrInvalid)
		}
		if len(g.StrOffsets) != n+1 {
			return fmt.Errorf("%w: %d string offsets for %d vertices, want %d", ErrInvalid, len(g.StrOffsets), n, n+1)
		}
		if g.StrOffsets[0] != 0 || g.StrOffsets[n] != uint64(len(g.StrBytes)) {
			return fmt.Errorf("%w: string offsets span [%d,%d], want [0,%d]", ErrInvalid, g.StrOffsets[0], g.StrOffsets[n], len(g.StrBytes))
		}
	}
	return nil
}

func (g *Graph) validateRange(from, to int) error {
	n := uint32(len(g.Offsets) - 1)
	e := uint64(len(g.Targets))
	var seen []bool // scratch for the time-order permutation check
	for v := from; v < to; v++ {
		lo, hi := g.Offsets[v], g.Offsets[v+1]
		if hi < lo || hi > e {
			return fmt.Errorf("%w: offsets of vertex %d are [%d,%d), not within [0,%d) and non-decreasing", ErrInvalid, v, lo, hi, e)
		}
		adj := g.Targets[lo:hi]
		prev := uint32(0)
		for i, t := range adj {
			if t >= n {
				return fmt.Errorf("%w: edge %d of vertex %d targets %d, beyond %d vertices", ErrInvalid, lo+uint64(i), v, t, n)
			}
			if t < prev {
				return fmt.Errorf("%w: adjacency of vertex %d not sorted at edge %d", ErrInvalid, v, lo+uint64(i))
			}
			prev = t
		}
		if g.Weights != nil {
			for i, w := range g.Weights[lo:hi] {
				if !(w > 0) || w > math.MaxFloat32 {
					return fmt.Errorf("%w: edge %d has weight %v, want finite and > 0", ErrInvalid, lo+uint64(i), w)
				}
			}
		}
		if g.Times != nil {
			var err error
			if seen, err = g.validateTimes(v, lo, hi, seen); err != nil {
				return err
			}
		}
		if g.StrOffsets != nil {
			a, b := g.StrOffsets[v], g.StrOffsets[v+1]
			if b < a || b > uint64(len(g.StrBytes)) {
				return fmt.Errorf("%w: string offsets of vertex %d are [%d,%d), not within [0,%d) and non-decreasing", ErrInvalid, v, a, b, len(g.StrBytes))
			}
			if s := g.StrBytes[a:b]; len(s) == 0 || len(s) > maxStringID || !utf8.Valid(s) {
				return fmt.Errorf("%w: string id of vertex %d is %d bytes (want 1..%d of UTF-8)", ErrInvalid, v, len(s), maxStringID)
			}
		}
	}
	return nil
}

// validateTimes checks vertex v's times are sorted and its time order is a
// permutation of [0, deg) with ties ordered by local index; seen is scratch
// space, returned grown for the next vertex.
func (g *Graph) validateTimes(v int, lo, hi uint64, seen []bool) ([]bool, error) {
	d := int(hi - lo)
	if cap(seen) < d {
		seen = make([]bool, d)
	}
	seen = seen[:d]
	clear(seen)
	times, order := g.Times[lo:hi], g.ByTime[lo:hi]
	for k, j := range order {
		if int(j) >= d || seen[j] {
			return seen, fmt.Errorf("%w: time order of vertex %d is not a permutation of its %d edges (entry %d is %d)", ErrInvalid, v, d, k, j)
		}
		seen[j] = true
		if k > 0 && (times[k] < times[k-1] || times[k] == times[k-1] && j < order[k-1]) {
			return seen, fmt.Errorf("%w: times of vertex %d not in order at edge %d", ErrInvalid, v, lo+uint64(k))
		}
	}
	return seen, nil
}
