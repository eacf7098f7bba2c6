package edgelist

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// runBuilder accumulates edges into runs; it is fed by a reader and owns
// the sorter, the worker that sorts and spills each full run while the
// reader fills the other buffer.
type runBuilder struct {
	ctx   context.Context
	o     ImportOptions
	input string // for messages

	cur     []extsort.Rec
	curT    []int64            // timed: cur's times, by position
	dropped []int64            // ids seen only on dropped self-loops in cur
	free    chan []extsort.Rec // run buffers the sorter is done with
	freeT   chan []int64
	sorter  *extsort.Worker[sortJob]
	runs    []extsort.Run // appended to by the sorter; read after finish
	tmpDir  string
	maxID   int64 // DenseIDs: largest id seen
	stats   ImportStats
	lastRep time.Time
	bytes   int64 // set by the reader for progress
	total   int64
	group   int // Parquet: set by the reader for progress
	groups  int
	radix   extsort.Sorter // the sorter's radix buffers, used only by it
	// sortBusy is the time the sorter spent sorting and spilling runs;
	// read after finish.
	sortBusy time.Duration
	// waitInput and waitSorter are the times the committer waited for the
	// decoders' next batch and for the sorter to hand back a run buffer:
	// the one that dominates is what limits the read phase.
	waitInput, waitSorter time.Duration
	lastAdd               time.Time
	coders                []extsort.SlabCoder // the sorter's spill encoders, one a worker

	// With string ids, the current run's strings (staging arenas, see
	// stageBatch); the sorter hands the other arenas back through
	// freeArenas once it has interned them. dict is the sorter's.
	arena       *extsort.Staged
	freeArenas  chan *extsort.Staged
	arenaLimit  int // arena bytes at which a run is flushed
	arenaBytes  int // bytes staged in arena
	stagedBatch *edgeBatch
	stagedBase  [2][extsort.DictShards]int64
	dict        *extsort.Dict
}

// sortJob is one run handed to the sorter: spill it, or (the last run) keep
// it in memory.
type sortJob struct {
	recs    []extsort.Rec
	times   []int64 // timed
	dropped []int64
	arena   *extsort.Staged // with string ids
	spill   bool
}

func newRunBuilder(ctx context.Context, input, tmpDir string, o ImportOptions) *runBuilder {
	b := &runBuilder{ctx: ctx, o: o, input: input, tmpDir: tmpDir, maxID: -1,
		free: make(chan []extsort.Rec, 2), lastRep: time.Now()}
	b.free <- make([]extsort.Rec, 0, o.RunEdges)
	b.free <- nil // allocated on first use, so small inputs hold one buffer
	b.cur = <-b.free
	if o.timed {
		b.freeT = make(chan []int64, 2)
		b.freeT <- nil
		b.curT = make([]int64, 0, o.RunEdges)
	}
	b.radix.Par = o.Workers
	b.coders = make([]extsort.SlabCoder, max(1, o.Workers))
	if o.StringIDs {
		// The staged strings take memory beside the run's records: a run
		// is cut at 48 bytes of them a record too (two ids of 14 bytes
		// with their heads fit). A dictionary shard's offsets are 32 bits.
		b.arenaLimit = min(max(1<<20, 48*o.RunEdges), 1<<32)
		b.freeArenas = make(chan *extsort.Staged, 2)
		b.freeArenas <- nil // allocated on first use, as the run buffers
		b.arena = extsort.NewStaged(b.arenaLimit)
		b.dict = extsort.NewDict(extsort.DictShards)
	}
	b.sorter = extsort.StartWorker(1, b.sortRun, func(job sortJob) {
		if job.spill {
			b.free <- job.recs[:0]
			if b.freeT != nil {
				b.freeT <- job.times[:0]
			}
			if b.freeArenas != nil {
				job.arena.Reset()
				b.freeArenas <- job.arena
			}
		}
	})
	return b
}

// addBatch takes a batch of decoded, validated input edges, in input
// order. It returns an error only for a cancelled context or a failed
// spill.
func (b *runBuilder) addBatch(e *edgeBatch) error {
	if !b.lastAdd.IsZero() {
		b.waitInput += time.Since(b.lastAdd)
	}
	defer func() { b.lastAdd = time.Now() }()
	if b.o.DenseIDs {
		b.maxID = max(b.maxID, e.maxID)
	}
	for i := 0; i < len(e.src); {
		// An edge takes at most two slots of the run (itself and its
		// reverse); a dropped self-loop's id takes one.
		room := b.o.RunEdges - len(b.cur) - len(b.dropped)
		if room < 2 || b.o.StringIDs && len(b.cur) > 0 && b.arenaBytes >= b.arenaLimit {
			if err := b.flush(true); err != nil {
				return err
			}
			continue
		}
		j := min(len(e.src), i+room/2)
		if b.o.StringIDs {
			// The edges' ids become places in this run's arenas.
			if b.stagedBatch != e {
				b.stageBatch(e)
			}
			b.placeRange(e, i, j)
		}
		b.appendEdges(e, i, j)
		i = j
	}
	b.stagedBatch = nil // batches are reused: the next one at this address is another
	b.stats.InputEdges += int64(len(e.src))
	if err := b.ctx.Err(); err != nil {
		return err
	}
	b.report(false)
	return nil
}

// appendEdges appends edges i..j of e to the current run, which has room
// for them: with their reverses when undirected, self-loops dropped (their
// ids kept) unless SelfLoops. A long range is spread over the Workers
// goroutines (appendBlocks), so the one goroutine that commits the batches
// in input order does little more than hand them out.
func (b *runBuilder) appendEdges(e *edgeBatch, i, j int) {
	if b.o.Workers < 2 || j-i < parallelAppendMin {
		b.appendSerial(e, i, j)
		return
	}
	b.appendBlocks(e, i, j)
}

// parallelAppendMin is the fewest edges worth spreading over goroutines.
const parallelAppendMin = 8 << 10

// appendSerial is appendEdges on the calling goroutine.
func (b *runBuilder) appendSerial(e *edgeBatch, i, j int) {
	cur, curT := b.cur, b.curT
	for k := i; k < j; k++ {
		s, d := e.src[k], e.dst[k]
		w, l, t := float32(1), uint8(0), int64(0)
		if e.w != nil {
			w = e.w[k]
		}
		if e.l != nil {
			l = e.l[k]
		}
		if e.t != nil {
			t = e.t[k]
		}
		if s == d && !b.o.SelfLoops {
			b.stats.SelfLoopsDropped++
			if !b.o.DenseIDs {
				// Their ids still name vertices (as in graph.FromEdges); they
				// count against the run so a file of self-loops stays
				// bounded too.
				b.dropped = append(b.dropped, s)
			}
			continue
		}
		cur = append(cur, extsort.Rec{S: s, D: d, W: w, L: l, Seq: uint32(len(cur))})
		if b.o.timed {
			curT = append(curT, t)
		}
		if b.o.Undirected && s != d {
			cur = append(cur, extsort.Rec{S: d, D: s, W: w, L: l, Seq: uint32(len(cur))})
			if b.o.timed {
				curT = append(curT, t)
			}
		}
	}
	b.cur, b.curT = cur, curT
}

// appendBlocks is appendEdges in blocks, one goroutine each: a first pass
// counts each block's self-loops, which fixes where its records go, and a
// second writes them there. The run holds the same records, in the same
// places, as appendSerial would write.
func (b *runBuilder) appendBlocks(e *edgeBatch, i, j int) {
	par := max(1, min(b.o.Workers, (j-i)/(parallelAppendMin/2)))
	span := (j - i + par - 1) / par
	loops := make([]int, par)
	extsort.ParallelFor(par, func(t int) {
		lo, hi := min(j, i+t*span), min(j, i+(t+1)*span)
		src, dst := e.src[lo:hi], e.dst[lo:hi]
		n := 0
		for k := range src {
			if src[k] == dst[k] {
				n++
			}
		}
		loops[t] = n
	})
	base := len(b.cur)
	starts := make([]int, par+1)
	starts[0] = base
	for t := range par {
		n := min(j, i+(t+1)*span) - min(j, i+t*span)
		recs := n - loops[t] // edges that are not self-loops, then their reverses
		if b.o.Undirected {
			recs *= 2
		}
		if b.o.SelfLoops {
			recs += loops[t]
		} else {
			b.stats.SelfLoopsDropped += int64(loops[t])
		}
		starts[t+1] = starts[t] + recs
	}
	cur := b.cur[:starts[par]]
	var curT []int64
	if b.o.timed {
		curT = b.curT[:starts[par]]
	}
	extsort.ParallelFor(par, func(t int) {
		lo, hi := min(j, i+t*span), min(j, i+(t+1)*span)
		o := starts[t]
		for k := lo; k < hi; k++ {
			s, d := e.src[k], e.dst[k]
			if s == d && !b.o.SelfLoops {
				continue
			}
			w, l, tm := float32(1), uint8(0), int64(0)
			if e.w != nil {
				w = e.w[k]
			}
			if e.l != nil {
				l = e.l[k]
			}
			if e.t != nil {
				tm = e.t[k]
			}
			cur[o] = extsort.Rec{S: s, D: d, W: w, L: l, Seq: uint32(o)}
			if curT != nil {
				curT[o] = tm
			}
			o++
			if b.o.Undirected && s != d {
				cur[o] = extsort.Rec{S: d, D: s, W: w, L: l, Seq: uint32(o)}
				if curT != nil {
					curT[o] = tm
				}
				o++
			}
		}
	})
	b.cur = cur
	if curT != nil {
		b.curT = curT
	}
	if !b.o.SelfLoops && !b.o.DenseIDs {
		for t := range par {
			if loops[t] == 0 {
				continue
			}
			for k := min(j, i+t*span); k < min(j, i+(t+1)*span); k++ {
				if e.src[k] == e.dst[k] {
					b.dropped = append(b.dropped, e.src[k])
				}
			}
		}
	}
}

// report calls Progress at most every ProgressInterval, or now with force.
func (b *runBuilder) report(force bool) {
	if b.o.Progress == nil {
		return
	}
	if !force && time.Since(b.lastRep) < b.o.ProgressInterval {
		return
	}
	b.lastRep = time.Now()
	b.o.Progress(Progress{Phase: "read", EdgesRead: b.stats.InputEdges, BytesRead: b.bytes, TotalBytes: b.total,
		RowGroup: b.group, RowGroups: b.groups})
}

// flush hands the current run to the sorter; a spilled run's buffer comes
// back through free once written, and the reader takes the other one.
func (b *runBuilder) flush(spill bool) error {
	if b.sorter.HasFailed() {
		return errSorterFailed
	}
	if len(b.cur) == 0 && len(b.dropped) == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { b.waitSorter += time.Since(t0) }()
	b.sorter.Send(sortJob{recs: b.cur, times: b.curT, dropped: b.dropped, arena: b.arena, spill: spill})
	b.cur, b.curT, b.dropped, b.arena, b.arenaBytes, b.stagedBatch = nil, nil, nil, nil, 0, nil
	if !spill {
		return nil
	}
	if b.freeArenas != nil {
		if b.arena = <-b.freeArenas; b.arena == nil {
			b.arena = extsort.NewStaged(b.arenaLimit)
		}
	}
	b.cur = <-b.free
	if b.cur == nil {
		b.cur = make([]extsort.Rec, 0, b.o.RunEdges)
	}
	b.cur = b.cur[:0]
	if b.freeT != nil {
		if b.curT = <-b.freeT; b.curT == nil {
			b.curT = make([]int64, 0, b.o.RunEdges)
		}
		b.curT = b.curT[:0]
	}
	return nil
}

// finish sorts the last run (kept in memory), waits for the sorter and
// lets go of the run buffers before the merge.
func (b *runBuilder) finish() ([]extsort.Run, error) {
	err := b.flush(false)
	if cerr := b.sorter.Wait(); cerr != nil {
		err = cerr
	}
	b.cur, b.curT = nil, nil
	for len(b.free) > 0 {
		<-b.free
	}
	for b.freeT != nil && len(b.freeT) > 0 {
		<-b.freeT
	}
	return b.runs, err
}

// sortRun sorts a run and spills it, or keeps the last one in memory, with
// its id set unless the ids are dense.
func (b *runBuilder) sortRun(job sortJob) error {
	t0 := time.Now()
	defer func() { b.sortBusy += time.Since(t0) }()
	var strs extsort.StrSet
	if b.o.StringIDs {
		// Local ids from here on: the records' places in the arena
		// become provisional ids, then their strings' ranks in the run.
		b.dict.Reset()
		b.dict.InternRun(job.recs, job.arena, b.radix.Par)
		var rank []uint32
		strs, rank = b.dict.SortedStrings(&b.radix)
		recs := job.recs
		b.radix.ForBlocks(len(recs), func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				recs[i].S, recs[i].D = int64(rank[recs[i].S]), int64(rank[recs[i].D])
			}
		})
	}
	order := b.radix.Sort(job.recs, job.times)
	if !job.spill {
		b.keepRun(job, order, strs)
		return nil
	}
	return b.spillRun(job, order, strs)
}

// keepRun keeps the last run in memory, in sorted order.
func (b *runBuilder) keepRun(job sortJob, order []extsort.KV, strs extsort.StrSet) {
	recs := job.recs
	r := extsort.Run{N: int64(len(recs)), Strs: strs, NStrs: int64(len(strs.Refs))}
	if order != nil {
		sorted := make([]extsort.Rec, len(recs))
		b.radix.ForBlocks(len(sorted), func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				sorted[i] = recs[order[i].Idx]
			}
		})
		recs = sorted
	}
	r.Mem = recs
	if job.times != nil {
		r.MemT = make([]int64, len(recs))
		for i := range recs {
			r.MemT[i] = job.times[recs[i].Seq]
		}
	}
	if b.o.wantIDSets() {
		var srcs []int64
		for i := range recs {
			if i == 0 || recs[i-1].S != recs[i].S {
				srcs = append(srcs, recs[i].S)
			}
		}
		r.IDs = b.radix.RunIDs(srcs, recs, job.dropped, b.o.Undirected)
	}
	b.radix, b.coders = extsort.Sorter{}, nil // release the sorter's buffers before the merge
	b.runs = append(b.runs, r)
}

// spillRun writes a run to a temporary file in sorted order, and its id set
// to another.
func (b *runBuilder) spillRun(job sortJob, order []extsort.KV, strs extsort.StrSet) error {
	recs := job.recs
	r := extsort.Run{N: int64(len(recs)), NStrs: int64(len(strs.Refs))}
	var srcs []int64
	var err error
	r.Path, err = b.spillFile(func(f *os.File) error {
		srcs, r.Marks, err = extsort.EncodeRun(f, recs, order, job.times, b.o.cols(), b.o.wantIDSets(), int64(b.o.markEvery), b.coders)
		return err
	})
	if err != nil {
		return err
	}
	if b.o.wantIDSets() {
		if r.IDPath, r.IDMarks, err = b.spillIDs(b.radix.RunIDs(srcs, recs, job.dropped, b.o.Undirected)); err != nil {
			os.Remove(r.Path)
			return err
		}
	}
	if b.o.StringIDs {
		if r.StrPath, err = b.spill(func(w *bufio.Writer) error { return extsort.EncodeStrings(w, strs) }); err != nil {
			os.Remove(r.Path)
			return err
		}
	}
	b.runs = append(b.runs, r)
	return nil
}

// newEncoder returns an encoder of the import's records onto w.
func (b *runBuilder) newEncoder(w *bufio.Writer) *extsort.Encoder {
	return &extsort.Encoder{W: w, Cols: b.o.cols()}
}

// spillIDs writes an id set to a temporary file and returns its path and
// marks.
func (b *runBuilder) spillIDs(ids []int64) (path string, marks []extsort.IDMark, err error) {
	path, err = b.spill(func(w *bufio.Writer) error {
		marks, err = extsort.EncodeIDs(w, ids)
		return err
	})
	return path, marks, err
}

// spill writes a temporary file in tmpDir through write and returns its
// path; on failure nothing is left behind.
func (b *runBuilder) spill(write func(*bufio.Writer) error) (string, error) {
	return b.spillFile(func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
}

// spillFile is spill for a writer of the file itself.
func (b *runBuilder) spillFile(write func(*os.File) error) (string, error) {
	f, err := os.CreateTemp(b.tmpDir, "walkstage-run-*")
	if err != nil {
		return "", fmt.Errorf("spill run: %w", err)
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("spill run to %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}

// maxMergeFan bounds how many run files are open at once; more runs are
// merged in rounds.
const maxMergeFan = 256

// reduceRuns merges groups of runs into bigger runs until at most
// maxMergeFan remain, so the final merge never holds too many files open.
// Groups are consecutive runs, so input order (and with it "first") is kept.
func (b *runBuilder) reduceRuns(runs []extsort.Run) ([]extsort.Run, error) {
	fan := b.o.mergeFan
	if fan < 2 {
		fan = maxMergeFan
	}
	for len(runs) > fan {
		var next []extsort.Run
		for lo := 0; lo < len(runs); lo += fan {
			group := runs[lo:min(lo+fan, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			merged := extsort.Run{}
			var err error
			merged.Path, err = b.spill(func(w *bufio.Writer) error {
				enc := b.newEncoder(w)
				enc.MarkEvery = int64(b.o.markEvery)
				err := extsort.MergeRuns(b.ctx, group, b.o.cols(), func(r *extsort.TRec) error {
					merged.N++
					return enc.Put(&r.Rec, r.T)
				})
				if err != nil {
					return err
				}
				merged.Marks = enc.Marks
				return enc.Flush()
			})
			if err == nil && b.o.wantIDSets() {
				var ids []int64
				if ids, err = extsort.MergeIDs(b.ctx, group, b.o.Workers); err == nil {
					merged.IDPath, merged.IDMarks, err = b.spillIDs(ids)
				}
			}
			if err != nil {
				extsort.RemoveRuns(next)
				extsort.RemoveRuns([]extsort.Run{merged})
				return nil, err
			}
			extsort.RemoveRuns(group)
			next = append(next, merged)
		}
		runs = next
	}
	return runs, nil
}
