package edgelist

import (
	"sync"

	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// The importers decode their input on several goroutines and commit the
// edges on one, in input order:
//
//	producer ──parts──▶ decoders (Workers) ──batches, per part──▶ committer ──▶ runBuilder
//
// A part is a unit of input a decoder handles alone (a Parquet row group, a
// chunk of text lines). Each part has its own short channel of batches and
// the committer drains the parts in the order they were produced, so the
// run builder sees the edges exactly as a sequential read would: runs,
// positions and with them "first" under graph.DupKeepFirst do not depend on the
// number of decoders.

// edgeBatch is a block of consecutive input edges in columns, decoded and
// validated by a decoder. When the decoder stopped at a bad input row, the
// batch holds the edges before it and err says what is wrong there.
type edgeBatch struct {
	src, dst []int64
	w        []float32 // nil unless weighted
	l        []uint8   // nil unless labelled
	t        []int64   // nil unless timed
	maxID    int64     // largest id in the batch (used with dense ids), -1 when empty

	// With string ids, the decoder stages the ids as the run builder
	// wants them (extsort.Staged: hashed, grouped by dictionary shard) and
	// src and dst hold batch places in stage[0] (sources) and stage[1]
	// (targets; one set a column, so that a Parquet decoder can read the
	// two at once). The decoders run in parallel; the run builder's
	// committer then only copies each shard's bytes (stageBatch).
	stage   [2]extsort.Staged
	prevSrc int64 // the last source staged, -1 for none

	err error // the decoder's error after the batch's edges, if any

	// Where the batch sits in the input, for messages and progress.
	part     int   // Parquet: row group
	firstRow int64 // Parquet: row in the row group of the first edge
	lines    int   // text: lines the batch covers
	bytes    int64 // input bytes consumed up to the batch's end
}

// reset empties b for reuse, keeping its arrays.
func (b *edgeBatch) reset() {
	b.src, b.dst, b.w, b.l, b.t = b.src[:0], b.dst[:0], b.w[:0], b.l[:0], b.t[:0]
	b.stage[0].Reset()
	b.stage[1].Reset()
	b.prevSrc = -1
	b.maxID, b.err = -1, nil
	b.part, b.firstRow, b.lines, b.bytes = 0, 0, 0, 0
}

// batchPool hands out batches and keeps those handed back. The pipeline's
// shape bounds how many are live (see decodeOrdered), so the pool never
// holds more; unlike a sync.Pool it keeps them across garbage collections,
// which would otherwise make each import allocate its batches many times.
type batchPool struct {
	mu   sync.Mutex
	free []*edgeBatch
}

func (p *batchPool) get() *edgeBatch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		b.reset()
		return b
	}
	return &edgeBatch{maxID: -1, prevSrc: -1}
}

func (p *batchPool) put(b *edgeBatch) {
	p.mu.Lock()
	p.free = append(p.free, b)
	p.mu.Unlock()
}

// partDepth is how many finished batches a text part may queue before its
// decoder waits for the committer (a text part is one or two batches).
const partDepth = 2

// maxPartDepth bounds the batches a Parquet part may queue: 512 Ki rows at
// the default batch size, about 11 MB of decoded columns. Larger row groups
// are decoded in parts of at most this many batches (pqParts), so that
// every decoder can queue its whole part.
const maxPartDepth = 8

// decodeOrdered runs produce on a goroutine of its own, decode on workers
// goroutines and commit on the caller's, and returns the first error in
// input order: a commit error (which includes a batch's decode error), else
// produce's. Each part's batches reach commit in the order decode emitted
// them, and parts in the order produce sent them. emit and send report
// false once the pipeline is stopping; decode and produce should return
// then.
//
// Each part may queue depth finished batches before its decoder waits for
// the committer. The committer takes the parts in order, so a decoder that
// is ahead of it waits once its queue is full: with a queue shorter than
// its part, a decoder that finished early sits idle while the committer
// drains the part ahead, and the part after that is left to its decoder
// alone. A queue as long as the part lets every decoder run to the end of
// its part.
//
// Memory: at most workers+2 parts are between the producer and the
// committer, each with at most depth+1 batches, so at most
// (workers+2)*(depth+1)+1 batches are live.
func decodeOrdered[P any](workers, depth int, pool *batchPool,
	produce func(send func(P) bool) error,
	decode func(p P, emit func(*edgeBatch) bool),
	commit func(*edgeBatch) error) error {
	type job struct {
		p   P
		out chan *edgeBatch
	}
	workers = max(workers, 1)
	quit := make(chan struct{})
	jobs := make(chan job)
	order := make(chan chan *edgeBatch, workers)
	var wg sync.WaitGroup
	var prodErr error
	wg.Go(func() {
		defer close(order)
		defer close(jobs)
		prodErr = produce(func(p P) bool {
			j := job{p: p, out: make(chan *edgeBatch, depth)}
			select {
			case order <- j.out:
			case <-quit:
				return false
			}
			select {
			case jobs <- j:
				return true
			case <-quit:
				return false
			}
		})
	})
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				decode(j.p, func(b *edgeBatch) bool {
					select {
					case j.out <- b:
						return true
					case <-quit:
						pool.put(b)
						return false
					}
				})
				close(j.out)
			}
		})
	}
	err := commitInOrder(order, pool, commit)
	close(quit)
	// Unblock a producer waiting to hand a part to a worker that has
	// stopped, then wait for every goroutine before the caller moves on.
	go func() {
		for range jobs {
		}
	}()
	wg.Wait()
	if err == nil {
		err = prodErr
	}
	return err
}

// commitInOrder commits the batches of each part in turn until the
// producer is done or commit fails.
func commitInOrder(order chan chan *edgeBatch, pool *batchPool, commit func(*edgeBatch) error) error {
	for out := range order {
		for b := range out {
			err := commit(b)
			pool.put(b)
			if err != nil {
				return err
			}
		}
	}
	return nil
}
