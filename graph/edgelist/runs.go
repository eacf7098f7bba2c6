package edgelist

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// rec is one directed edge in a run. seq is the position in the run, so
// sorting by (s, d, seq) is a stable sort by (s, d). A timed run keeps
// its times beside the records, times[seq] (32 bytes a record with them
// inside, 40 for every import, cost the untimed imports about 8%), and is
// sorted by (s, d, t, seq), the graph file's edge order.
type rec struct {
	s, d int64
	w    float32
	seq  uint32
	l    uint8
}

// trec is a record with its time (0 untimed), as the merge reads it.
type trec struct {
	rec
	t int64
}

func cmpRec(a, b rec) int {
	if c := cmp.Compare(a.s, b.s); c != 0 {
		return c
	}
	if c := cmp.Compare(a.d, b.d); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// cmpTimed is cmpRec for a timed run's records.
func cmpTimed(times []int64) func(a, b rec) int {
	return func(a, b rec) int {
		if c := cmp.Compare(a.s, b.s); c != 0 {
			return c
		}
		if c := cmp.Compare(a.d, b.d); c != 0 {
			return c
		}
		if c := cmp.Compare(times[a.seq], times[b.seq]); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	}
}

// runFile is one sorted run spilled to disk, or (the last one) kept in
// memory.
type runFile struct {
	path    string
	n       int64   // records
	mem     []rec   // set when the run was never spilled
	memT    []int64 // its times, in the same order, when timed
	idPath  string
	idMarks []idMark  // a spilled id set's restart points
	ids     []int64   // set when the id set was never spilled
	marks   []runMark // a spilled run's restart points, every markEvery records

	// With string ids: the run's sorted strings (in memory, or spilled to
	// strPath), their count, and once they are merged (mergeStrings) the
	// map from the run's local ids to dense ids.
	strs    strSet
	strPath string
	nstrs   int64
	remap   []uint32
}

// runBuilder accumulates edges into runs; it is fed by a reader and owns
// the sorter, the worker that sorts and spills each full run while the
// reader fills the other buffer.
type runBuilder struct {
	ctx   context.Context
	o     ImportOptions
	input string // for messages

	cur     []rec
	curT    []int64    // timed: cur's times, by position
	dropped []int64    // ids seen only on dropped self-loops in cur
	free    chan []rec // run buffers the sorter is done with
	freeT   chan []int64
	sorter  *worker[sortJob]
	runs    []runFile // appended to by the sorter; read after finish
	tmpDir  string
	maxID   int64 // DenseIDs: largest id seen
	stats   ImportStats
	lastRep time.Time
	bytes   int64 // set by the reader for progress
	total   int64
	group   int // Parquet: set by the reader for progress
	groups  int
	radix   runSorter // the sorter's radix buffers, used only by it
	// sortBusy is the time the sorter spent sorting and spilling runs;
	// read after finish.
	sortBusy time.Duration
	// waitInput and waitSorter are the times the committer waited for the
	// decoders' next batch and for the sorter to hand back a run buffer:
	// the one that dominates is what limits the read phase.
	waitInput, waitSorter time.Duration
	lastAdd               time.Time
	coders                []slabCoder // the sorter's spill encoders, one a worker

	// With string ids, the current run's strings (staging arenas, see
	// stageBatch); the sorter hands the other arenas back through
	// freeArenas once it has interned them. dict is the sorter's.
	arena       *stagedStrings
	freeArenas  chan *stagedStrings
	arenaLimit  int // arena bytes at which a run is flushed
	arenaBytes  int // bytes staged in arena
	stagedBatch *edgeBatch
	stagedBase  [2][dictShards]int64
	dict        *runDict
}

// sortJob is one run handed to the sorter: spill it, or (the last run) keep
// it in memory.
type sortJob struct {
	recs    []rec
	times   []int64 // timed
	dropped []int64
	arena   *stagedStrings // with string ids
	spill   bool
}

func newRunBuilder(ctx context.Context, input, tmpDir string, o ImportOptions) *runBuilder {
	b := &runBuilder{ctx: ctx, o: o, input: input, tmpDir: tmpDir, maxID: -1,
		free: make(chan []rec, 2), lastRep: time.Now()}
	b.free <- make([]rec, 0, o.RunEdges)
	b.free <- nil // allocated on first use, so small inputs hold one buffer
	b.cur = <-b.free
	if o.timed {
		b.freeT = make(chan []int64, 2)
		b.freeT <- nil
		b.curT = make([]int64, 0, o.RunEdges)
	}
	b.radix.par = o.Workers
	b.coders = make([]slabCoder, max(1, o.Workers))
	if o.StringIDs {
		// The staged strings take memory beside the run's records: a run
		// is cut at 48 bytes of them a record too (two ids of 14 bytes
		// with their heads fit). A dictionary shard's offsets are 32 bits.
		b.arenaLimit = min(max(1<<20, 48*o.RunEdges), 1<<32)
		b.freeArenas = make(chan *stagedStrings, 2)
		b.freeArenas <- nil // allocated on first use, as the run buffers
		b.arena = newStagedStrings(b.arenaLimit)
		b.dict = newRunDict(dictShards)
	}
	b.sorter = startWorker(1, b.sortRun, func(job sortJob) {
		if job.spill {
			b.free <- job.recs[:0]
			if b.freeT != nil {
				b.freeT <- job.times[:0]
			}
			if b.freeArenas != nil {
				job.arena.reset()
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
		cur = append(cur, rec{s: s, d: d, w: w, l: l, seq: uint32(len(cur))})
		if b.o.timed {
			curT = append(curT, t)
		}
		if b.o.Undirected && s != d {
			cur = append(cur, rec{s: d, d: s, w: w, l: l, seq: uint32(len(cur))})
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
	parallelFor(par, func(t int) {
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
	parallelFor(par, func(t int) {
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
			cur[o] = rec{s: s, d: d, w: w, l: l, seq: uint32(o)}
			if curT != nil {
				curT[o] = tm
			}
			o++
			if b.o.Undirected && s != d {
				cur[o] = rec{s: d, d: s, w: w, l: l, seq: uint32(o)}
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
	if b.sorter.hasFailed() {
		return errSorterFailed
	}
	if len(b.cur) == 0 && len(b.dropped) == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { b.waitSorter += time.Since(t0) }()
	b.sorter.send(sortJob{recs: b.cur, times: b.curT, dropped: b.dropped, arena: b.arena, spill: spill})
	b.cur, b.curT, b.dropped, b.arena, b.arenaBytes, b.stagedBatch = nil, nil, nil, nil, 0, nil
	if !spill {
		return nil
	}
	if b.freeArenas != nil {
		if b.arena = <-b.freeArenas; b.arena == nil {
			b.arena = newStagedStrings(b.arenaLimit)
		}
	}
	b.cur = <-b.free
	if b.cur == nil {
		b.cur = make([]rec, 0, b.o.RunEdges)
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
func (b *runBuilder) finish() ([]runFile, error) {
	err := b.flush(false)
	if cerr := b.sorter.wait(); cerr != nil {
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
	var strs strSet
	if b.o.StringIDs {
		// Local ids from here on: the records' places in the arena
		// become provisional ids, then their strings' ranks in the run.
		b.dict.reset()
		b.dict.internRun(job.recs, job.arena, b.radix.par)
		var rank []uint32
		strs, rank = b.dict.sortedStrings(&b.radix)
		recs := job.recs
		b.radix.forBlocks(len(recs), func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				recs[i].s, recs[i].d = int64(rank[recs[i].s]), int64(rank[recs[i].d])
			}
		})
	}
	order := b.radix.sort(job.recs, job.times)
	if !job.spill {
		b.keepRun(job, order, strs)
		return nil
	}
	return b.spillRun(job, order, strs)
}

// keepRun keeps the last run in memory, in sorted order.
func (b *runBuilder) keepRun(job sortJob, order []kv, strs strSet) {
	recs := job.recs
	r := runFile{n: int64(len(recs)), strs: strs, nstrs: int64(len(strs.refs))}
	if order != nil {
		sorted := make([]rec, len(recs))
		b.radix.forBlocks(len(sorted), func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				sorted[i] = recs[order[i].idx]
			}
		})
		recs = sorted
	}
	r.mem = recs
	if job.times != nil {
		r.memT = make([]int64, len(recs))
		for i := range recs {
			r.memT[i] = job.times[recs[i].seq]
		}
	}
	if b.o.wantIDSets() {
		var srcs []int64
		for i := range recs {
			if i == 0 || recs[i-1].s != recs[i].s {
				srcs = append(srcs, recs[i].s)
			}
		}
		r.ids = b.radix.runIDs(srcs, recs, job.dropped, b.o.Undirected)
	}
	b.radix, b.coders = runSorter{}, nil // release the sorter's buffers before the merge
	b.runs = append(b.runs, r)
}

// spillRun writes a run to a temporary file in sorted order, and its id set
// to another.
func (b *runBuilder) spillRun(job sortJob, order []kv, strs strSet) error {
	recs := job.recs
	r := runFile{n: int64(len(recs)), nstrs: int64(len(strs.refs))}
	var srcs []int64
	var err error
	r.path, err = b.spillFile(func(f *os.File) error {
		srcs, r.marks, err = encodeRun(f, recs, order, job.times, b.o.cols(), b.o.wantIDSets(), int64(b.o.markEvery), b.coders)
		return err
	})
	if err != nil {
		return err
	}
	if b.o.wantIDSets() {
		if r.idPath, r.idMarks, err = b.spillIDs(b.radix.runIDs(srcs, recs, job.dropped, b.o.Undirected)); err != nil {
			os.Remove(r.path)
			return err
		}
	}
	if b.o.StringIDs {
		if r.strPath, err = b.spill(func(w *bufio.Writer) error { return encodeStrings(w, strs) }); err != nil {
			os.Remove(r.path)
			return err
		}
	}
	b.runs = append(b.runs, r)
	return nil
}

// newEncoder returns an encoder of the import's records onto w.
func (b *runBuilder) newEncoder(w *bufio.Writer) *runEncoder {
	return &runEncoder{w: w, recCols: b.o.cols()}
}

// spillIDs writes an id set to a temporary file and returns its path and
// marks.
func (b *runBuilder) spillIDs(ids []int64) (path string, marks []idMark, err error) {
	path, err = b.spill(func(w *bufio.Writer) error {
		marks, err = encodeIDs(w, ids)
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

// runIDs returns the sorted set of external ids a run mentions, given its
// sorted distinct sources.
func runIDs(srcs []int64, recs []rec, dropped []int64, undirected bool) []int64 {
	if undirected && len(dropped) == 0 {
		// Every target is also a source in an undirected run.
		return srcs
	}
	ids := srcs
	if !undirected {
		ids = slices.Grow(ids, len(recs)+len(dropped))
		for i := range recs {
			ids = append(ids, recs[i].d)
		}
	}
	ids = append(ids, dropped...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// removeRuns deletes the runs' files.
func removeRuns(runs []runFile) {
	for _, r := range runs {
		if r.path != "" {
			os.Remove(r.path)
		}
		if r.idPath != "" {
			os.Remove(r.idPath)
		}
		if r.strPath != "" {
			os.Remove(r.strPath)
		}
	}
}
