//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// lendingReceiver keeps copies of the walks of lent chunks and gives each
// chunk back after a random pause, on its own goroutine, checking first
// that the vertices it was lent are still the ones it copied: a slot
// walked again before all its chunks were back would have overwritten them.
type lendingReceiver struct {
	e       *Engine
	rng     *rand.Rand
	walks   map[int][][]uint32
	returns sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

func (r *lendingReceiver) emit(c walk.Chunk) error {
	if !c.Lent {
		return fmt.Errorf("job %d: a chunk that is not lent", c.Tag)
	}
	if len(c.Starts) != c.Len() {
		return fmt.Errorf("job %d: %d starts for %d walks", c.Tag, len(c.Starts), c.Len())
	}
	for k := range c.Len() {
		r.walks[c.Tag][c.WalkIDs[k]] = slices.Clone(c.Walk(k))
		if c.Starts[k] != c.Walk(k)[0] {
			return fmt.Errorf("job %d walk %d: Starts says %d, the walk starts at %d", c.Tag, c.WalkIDs[k], c.Starts[k], c.Walk(k)[0])
		}
	}
	kept := slices.Clone(c.Vertices)
	pause := time.Duration(r.rng.IntN(3000)) * time.Microsecond
	r.returns.Add(1)
	go func() {
		defer r.returns.Done()
		time.Sleep(pause)
		if !slices.Equal(kept, c.Vertices) {
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Errorf("job %d walks %d..: lent vertices changed before they were given back", c.Tag, c.WalkIDs[0]))
			r.mu.Unlock()
		}
		r.e.Release(c)
	}()
	return nil
}

// TestLentChunks: with WithLentChunks the walks are the CPU engine's, no
// slot is walked again while its chunks are out (also across runs: each
// run returns with chunks still lent), every chunk comes back, and a run
// whose receiver fails gives back the chunks it never emitted, so the next
// run does not wait for them.
func TestLentChunks(t *testing.T) {
	g := testGraph(t)
	alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 40, Weighted: true}
	jobs := []walk.Job{{Tag: 1, Algorithm: alg, Seed: 9, Starts: allStarts(g, 3)}}
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, ref, jobs)
	for _, slots := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			e := newEngine(t, g, WithLentChunks(), WithMaxBatchWalks(3000), WithChunkWalks(700), WithBatchSlots(slots))
			r := &lendingReceiver{e: e, rng: rand.New(rand.NewPCG(uint64(slots), 1))}
			for round := range 3 {
				r.walks = map[int][][]uint32{1: make([][]uint32, len(jobs[0].Starts))}
				if err := e.Run(context.Background(), jobs, r.emit); err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				for id, w := range want[1] {
					if !slices.Equal(r.walks[1][id], w) {
						t.Fatalf("round %d: walk %d: gpu %v, cpu %v", round, id, r.walks[1][id], w)
					}
				}
			}
			// A receiver that fails on its fifth chunk.
			n := 0
			err := e.Run(context.Background(), jobs, func(c walk.Chunk) error {
				if n++; n == 5 {
					e.Release(c)
					return errInjected
				}
				return r.emit(c)
			})
			if !errors.Is(err, errInjected) {
				t.Fatalf("failing receiver: run returned %v", err)
			}
			r.walks = map[int][][]uint32{1: make([][]uint32, len(jobs[0].Starts))}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.Run(ctx, jobs, r.emit); err != nil {
				t.Fatalf("run after a failed one: %v", err)
			}
			r.returns.Wait()
			if err := errors.Join(r.errs...); err != nil {
				t.Fatal(err)
			}
			for _, s := range e.slots {
				if n := s.lent.Load(); n != 0 {
					t.Fatalf("%s: %d chunks still lent", s.name, n)
				}
			}
		})
	}
}

// TestLentRunEnd: every walk of a lent chunk's run (walk.Chunk.LentRunEnd)
// comes without a chunk given back. The receiver keeps each chunk until it
// has received every walk below its LentRunEnd (as the sink keeps walks
// waiting in a row group); an engine that waited for a slot before the end
// of a run would hang here (the context ends the run after a minute).
func TestLentRunEnd(t *testing.T) {
	g := testGraph(t)
	alg := walk.Algorithm{Kind: walk.DeepWalk, Length: 40, Weighted: true}
	jobs := []walk.Job{{Tag: 1, Algorithm: alg, Seed: 9, Starts: allStarts(g, 3)}}
	n := uint64(len(jobs[0].Starts))
	ref, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	want := collect(t, ref, jobs)
	for _, slots := range []int{1, 2} {
		t.Run(fmt.Sprintf("slots=%d", slots), func(t *testing.T) {
			e := newEngine(t, g, WithLentChunks(), WithMaxBatchWalks(3000), WithChunkWalks(700), WithBatchSlots(slots))
			var held []walk.Chunk
			var next uint64 // the next walk id: one job's chunks come in order
			runs := map[uint64]bool{}
			got := make([][]uint32, n)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := e.Run(ctx, jobs, func(c walk.Chunk) error {
				last := c.WalkIDs[c.Len()-1]
				if c.WalkIDs[0] != next || c.LentRunEnd <= last || c.LentRunEnd > n {
					return fmt.Errorf("chunk of walks %d..%d (next %d) with LentRunEnd %d", c.WalkIDs[0], last, next, c.LentRunEnd)
				}
				next = last + 1
				runs[c.LentRunEnd] = true
				for k := range c.Len() {
					got[c.WalkIDs[k]] = slices.Clone(c.Walk(k))
				}
				held = append(held, c)
				keep := held[:0]
				for _, h := range held {
					if h.LentRunEnd <= next {
						e.Release(h)
					} else {
						keep = append(keep, h)
					}
				}
				held = keep
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(held) != 0 || next != n || len(runs) < 2 {
				t.Fatalf("%d chunks still held, %d of %d walks, %d runs", len(held), next, n, len(runs))
			}
			for id, w := range want[1] {
				if !slices.Equal(got[id], w) {
					t.Fatalf("walk %d: gpu %v, cpu %v", id, got[id], w)
				}
			}
		})
	}
}
