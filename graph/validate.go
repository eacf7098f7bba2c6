package graph

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
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
	if g.IDs != nil && len(g.IDs) != n {
		return fmt.Errorf("%w: %d external ids for %d vertices", ErrInvalid, len(g.IDs), n)
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

func (g *Graph) validateRange(from, to int) error {
	n := uint32(len(g.Offsets) - 1)
	e := uint64(len(g.Targets))
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
	}
	return nil
}
