package csrfile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// The final merge runs in parts. The source-id range is cut at boundaries
// b1 < b2 < ... chosen from the runs' marks so that the parts hold about
// the same number of records; part k takes the records with
// b(k) <= s < b(k+1) from every run. A source's edges, and so every
// duplicate pair, fall in one part, and a part's merged stream is exactly
// the serial merge's stream restricted to its sources: ties still go to
// the earlier run. Each part starts decoding a spilled run at the last
// mark before its boundary and skips the few records before it.
//
// Each part writes its own slice of the sections: the offsets of its
// vertex range and the targets, weights and labels of its edges, at the
// file offsets of its first vertex and first edge, placed as if no
// duplicate were dropped (the record counts before it, known from the
// boundaries). When a part drops duplicates, compact then slides the later
// parts' edges down, zeroes what they leave behind and lowers their
// offsets (compact.go), so the bytes are those of a serial merge whatever
// the number of parts. Under keep-all nothing moves.
//
// Memory: at most Workers parts run at once, each worker with buffers it
// reuses from part to part: a read buffer per spilled run (64 MiB in all,
// or 16 KiB a buffer when Workers x runs exceeds 4096; see readBufSize), a
// batch of batchLen records and the sections' write buffers (about 1.4 MiB
// with those). The marks add about 40 bytes per MarkEvery records
// of the runs. Nothing grows with the input but the marks.

// mergePart is one part of the final merge.
type mergePart struct {
	from, to []extsort.Pos // per run: its segment of the part
	recs     int64         // records in the segments
	vlo, vhi int           // the vertices whose offsets it writes
	kept     int64         // edges it wrote
	e0       int64         // its first edge's index, were no duplicate dropped
	dups     int64
	maxLabel int
}

// errPartStopped stops a part after an earlier part failed.
var errPartStopped = errors.New("merge part stopped")

// mergePartCount is the number of parts for total records: 1 when there is
// one worker or little to merge, else four a worker so a part that is
// slow (skew) does not leave the other cores idle.
func (w *csrWriter) mergePartCount() int {
	if w.o.MergeParts > 0 {
		return w.o.MergeParts
	}
	if w.o.Workers <= 1 {
		return 1
	}
	return int(min(int64(4*w.o.Workers), max(1, w.total>>20)))
}

// readBufSize is a run reader's buffer: 64 MiB across the readers of the
// parts that run at once, 16-256 KiB each.
func readBufSize(workers, runs int) int {
	return min(256<<10, max(16<<10, (64<<20)/max(1, workers*runs)))
}

// planParts cuts the source range into at most nparts parts.
func (w *csrWriter) planParts(runs []extsort.Run, files []*os.File, nparts int) ([]mergePart, error) {
	bounds := partBounds(runs, nparts, w.total, w.o.MarkEvery)
	// pos[i][k] is where run i's records with s >= bounds[k] start.
	pos := make([][]extsort.Pos, len(runs))
	for i := range pos {
		pos[i] = make([]extsort.Pos, len(bounds))
	}
	errs := make([]error, len(runs))
	var next atomic.Int64
	extsort.ParallelFor(min(max(1, w.o.Workers), len(runs)), func(int) {
		for i := int(next.Add(1) - 1); i < len(runs); i = int(next.Add(1) - 1) {
			for k, b := range bounds {
				if pos[i][k], errs[i] = locate(runs[i], files[i], b, w.o); errs[i] != nil {
					break
				}
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	parts := make([]mergePart, len(bounds)+1)
	for k := range parts {
		p := &parts[k]
		p.maxLabel = -1
		p.from, p.to = make([]extsort.Pos, len(runs)), make([]extsort.Pos, len(runs))
		for i, rf := range runs {
			if k > 0 {
				p.from[i] = pos[i][k-1]
			}
			p.to[i] = extsort.Pos{N: rf.N}
			if k < len(bounds) {
				p.to[i] = pos[i][k]
			}
			p.recs += p.to[i].N - p.from[i].N
		}
		p.vhi = w.n + 1
		if k > 0 {
			p.vlo = w.vertexOf(bounds[k-1])
			parts[k-1].vhi = p.vlo
		}
	}
	return parts, nil
}

// vertexOf returns the dense id of the first vertex with external id >= s.
func (w *csrWriter) vertexOf(s int64) int {
	if w.ids == nil {
		return int(min(max(s, 0), int64(w.n)))
	}
	v, _ := slices.BinarySearch(w.ids, s)
	return v
}

// partBounds picks up to nparts-1 increasing source ids that cut the runs'
// records into parts of about total/nparts, from a sample of a source
// every markEvery records of each run (the marks of the spilled runs).
func partBounds(runs []extsort.Run, nparts int, total int64, markEvery int) []int64 {
	if nparts <= 1 || total == 0 {
		return nil
	}
	type sample struct{ s, recs int64 }
	var samples []sample
	for _, rf := range runs {
		if rf.Mem != nil {
			for i := 0; i < len(rf.Mem); i += markEvery {
				samples = append(samples, sample{rf.Mem[i].S, int64(min(markEvery, len(rf.Mem)-i))})
			}
			continue
		}
		for j, m := range rf.Marks {
			end := rf.N
			if j+1 < len(rf.Marks) {
				end = rf.Marks[j+1].N
			}
			samples = append(samples, sample{m.S, end - m.N})
		}
	}
	slices.SortFunc(samples, func(a, b sample) int { return cmpInt64(a.s, b.s) })
	var bounds []int64
	var before int64 // records of the samples so far
	for _, sm := range samples {
		k := int64(len(bounds) + 1)
		if k == int64(nparts) {
			break
		}
		if before >= k*total/int64(nparts) && sm.s > samples[0].s && (len(bounds) == 0 || sm.s > bounds[len(bounds)-1]) {
			bounds = append(bounds, sm.s)
		}
		before += sm.recs
	}
	return bounds
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// locate returns the position of run rf's first record with s >= b (the
// run's end when there is none), decoding from the last mark before it.
func locate(rf extsort.Run, f *os.File, b int64, o Options) (extsort.Pos, error) {
	if rf.Mem != nil {
		return extsort.Pos{N: int64(sort.Search(len(rf.Mem), func(i int) bool { return rf.Mem[i].S >= b }))}, nil
	}
	j := sort.Search(len(rf.Marks), func(i int) bool { return rf.Marks[i].S >= b }) - 1
	if j < 0 {
		return extsort.Pos{}, nil
	}
	m := rf.Marks[j]
	rr := extsort.NewReader(0, rf, f, extsort.Pos{Off: m.Off, N: m.N, PS: m.PS, PD: m.PD, PT: m.PT}, rf.N-m.N, o.cols(), make([]byte, 16<<10))
	for n := m.N; ; n++ {
		p := rr.Tell(n)
		ok, err := rr.Next()
		if err != nil {
			return extsort.Pos{}, err
		}
		if !ok {
			return extsort.Pos{N: rf.N}, nil
		}
		if rr.Cur.S >= b {
			return p, nil
		}
	}
}

// writeEdges merges the runs in parts and writes the edge-sized sections.
func (w *csrWriter) writeEdges(ctx context.Context, f *os.File, h *graph.FileLayout, runs []extsort.Run) error {
	files, err := extsort.OpenRunFiles(runs)
	defer extsort.CloseRunFiles(files)
	if err != nil {
		return err
	}
	parts, err := w.planParts(runs, files, w.mergePartCount())
	if err != nil {
		return err
	}
	w.stats.MergeParts = len(parts)
	if w.ids != nil {
		w.rank = newRanker(w.ids)
	}
	workers := min(max(1, w.o.Workers), len(parts))
	scratch := make([]partScratch, workers)
	for t := range scratch {
		scratch[t].bufs = make([][]byte, len(runs))
		for i := range runs {
			if files[i] != nil {
				scratch[t].bufs[i] = make([]byte, readBufSize(workers, len(runs)))
			}
		}
	}
	var e int64
	for k := range parts {
		parts[k].e0 = e
		e += parts[k].recs
	}
	err = w.runParts(ctx, parts, func(p *mergePart, t int, stop func() bool) error {
		return w.writePart(ctx, f, h, runs, files, p, &scratch[t], stop)
	})
	if err != nil {
		return err
	}
	w.maxLabel = -1
	w.stats.Duplicates = 0
	for _, p := range parts {
		w.stats.Duplicates += p.dups
		w.maxLabel = max(w.maxLabel, p.maxLabel)
	}
	kept, err := w.compact(f, h, parts)
	w.e = uint64(kept)
	return err
}

// runParts calls do for every part on up to Workers goroutines, reporting
// progress meanwhile. After a part fails the later ones stop, the earlier
// ones finish, and the error returned is the earliest part's: the one a
// serial merge would have met first.
func (w *csrWriter) runParts(ctx context.Context, parts []mergePart, do func(p *mergePart, t int, stop func() bool) error) error {
	errs := make([]error, len(parts))
	var next, failed atomic.Int64
	failed.Store(int64(len(parts)))
	run := func() {
		extsort.ParallelFor(min(max(1, w.o.Workers), len(parts)), func(t int) {
			for {
				k := next.Add(1) - 1
				if k >= int64(len(parts)) || k > failed.Load() {
					return
				}
				err := do(&parts[k], t, func() bool { return failed.Load() < k })
				if err == nil {
					continue
				}
				errs[k] = err
				for f := failed.Load(); k < f && !failed.CompareAndSwap(f, k); f = failed.Load() {
				}
			}
		})
	}
	if w.o.Progress == nil {
		run()
	} else {
		done := make(chan struct{})
		go func() { run(); close(done) }()
		t := time.NewTicker(w.o.ProgressInterval)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-t.C:
				w.progress()
			}
		}
		t.Stop()
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, errPartStopped) {
			return err
		}
	}
	return nil
}

// mergeSegments merges the part's segments of the runs and calls emit for the
// edges the duplicate policy keeps (with summed weights under
// graph.DupSumWeights), counting the duplicates in p.dups.
func mergeSegments(ctx context.Context, runs []extsort.Run, files []*os.File, p *mergePart, o Options, bufs [][]byte, emit func(r *extsort.TRec) error) error {
	var rs []*extsort.Reader
	for i, rf := range runs {
		if n := p.to[i].N - p.from[i].N; n > 0 {
			rs = append(rs, extsort.NewReader(i, rf, files[i], p.from[i], n, o.cols(), bufs[i]))
		}
	}
	var pending extsort.TRec
	have := false
	err := extsort.HeapMerge(ctx, rs, func(r *extsort.TRec) error {
		// With times a duplicate is the same (s, d, t), as in
		// graph.FromEdges: the same pair at another time is another edge
		// (an untimed t is always 0).
		if have && r.S == pending.S && r.D == pending.D && r.T == pending.T {
			p.dups++
			switch o.Duplicates {
			case graph.DupKeepFirst:
				return nil
			case graph.DupSumWeights:
				pending.W += r.W
				return nil
			case graph.DupError:
				return &dupEdgeError{s: r.S, d: r.D, t: r.T}
			}
		}
		if have {
			if err := emit(&pending); err != nil {
				return err
			}
		}
		pending, have = *r, true
		return nil
	})
	if err == nil && have {
		err = emit(&pending)
	}
	return err
}

// dupEdgeError is a duplicate under graph.DupError, in the merge's ids;
// writePart names the vertices.
type dupEdgeError struct{ s, d, t int64 }

func (e *dupEdgeError) Error() string { return fmt.Sprintf("duplicate edge %d -> %d", e.s, e.d) }

// partWriter writes one part's slice of the sections.
type partWriter struct {
	w     *csrWriter
	p     *mergePart
	offs  *secWriter[uint64]
	tgts  *secWriter[uint32]
	wts   *secWriter[float32]
	lbls  *secWriter[uint8]
	tms   *secWriter[int64]  // timed: each vertex's times in time order
	byt   *secWriter[uint32] // and the order's local edge indices
	vt    []int64            // timed: the current vertex's times, in edge order
	vord  []uint32           // scratch for its time order
	tv    int                // the vertex whose times vt holds
	dense []uint32           // the batch's targets as dense ids
	e     uint64             // the next edge's index
	nextV int                // next vertex whose offset is unwritten
	src   int                // rank cursor for the (sorted) sources
}

// partScratch is one worker's buffers, reused from part to part: a read
// buffer per spilled run, the batch and the sections' write buffers.
type partScratch struct {
	bufs  [][]byte
	batch []extsort.TRec
	dense []uint32
	offs  []uint64
	tgts  []uint32
	wts   []float32
	lbls  []uint8
	tms   []int64
	byt   []uint32
	vt    []int64
	vord  []uint32
}

// writePart merges part p and writes its offsets, targets, weights and
// labels.
func (w *csrWriter) writePart(ctx context.Context, f *os.File, h *graph.FileLayout, runs []extsort.Run, files []*os.File, p *mergePart, sc *partScratch, stop func() bool) error {
	if sc.batch == nil {
		sc.batch, sc.dense = make([]extsort.TRec, 0, batchLen), make([]uint32, batchLen)
	}
	pw := &partWriter{w: w, p: p, e: uint64(p.e0), nextV: p.vlo, src: p.vlo, dense: sc.dense,
		offs: newSecWriter(f, offsetOf(h, graph.SectionOffsets)+8*uint64(p.vlo), sc.offs),
		tgts: newSecWriter(f, offsetOf(h, graph.SectionTargets)+4*uint64(p.e0), sc.tgts)}
	sc.offs, sc.tgts = pw.offs.buf, pw.tgts.buf
	if w.o.Weighted {
		pw.wts = newSecWriter(f, offsetOf(h, graph.SectionWeights)+4*uint64(p.e0), sc.wts)
		sc.wts = pw.wts.buf
	}
	if w.o.Labelled {
		pw.lbls = newSecWriter(f, offsetOf(h, graph.SectionLabels)+uint64(p.e0), sc.lbls)
		sc.lbls = pw.lbls.buf
	}
	if w.o.Timed {
		pw.tms = newSecWriter(f, offsetOf(h, graph.SectionTimes)+8*uint64(p.e0), sc.tms)
		pw.byt = newSecWriter(f, offsetOf(h, graph.SectionByTime)+4*uint64(p.e0), sc.byt)
		sc.tms, sc.byt = pw.tms.buf, pw.byt.buf
		pw.vt, pw.vord, pw.tv = sc.vt[:0], sc.vord[:0], -1
		defer func() { sc.vt, sc.vord = pw.vt, pw.vord }()
	}
	p.dups, p.maxLabel = 0, -1
	batch := sc.batch[:0]
	err := mergeSegments(ctx, runs, files, p, w.o, sc.bufs, func(r *extsort.TRec) error {
		batch = append(batch, *r)
		if len(batch) < batchLen {
			return nil
		}
		if stop() {
			return errPartStopped
		}
		err := pw.writeBatch(batch)
		batch = batch[:0]
		return err
	})
	if err == nil {
		err = pw.writeBatch(batch)
	}
	if de := (*dupEdgeError)(nil); errors.As(err, &de) {
		at := ""
		if w.o.Timed {
			at = fmt.Sprintf(" at time %d", de.t)
		}
		err = fmt.Errorf("%w %s -> %s%s (use --duplicates keep-first, sum or keep-all to accept it)", graph.ErrDuplicate,
			w.idString(de.s), w.idString(de.d), at)
	}
	if err != nil {
		return err
	}
	return pw.close()
}

// writeBatch ranks the batch's targets and appends the batch to the
// sections, writing the offsets of the sources it reaches.
func (pw *partWriter) writeBatch(batch []extsort.TRec) error {
	w := pw.w
	dense := pw.dense[:len(batch)]
	if w.rank != nil {
		if err := w.rank.all(batch, dense); err != nil {
			return err
		}
	} else {
		for i := range batch {
			dense[i] = uint32(batch[i].D)
		}
	}
	for i := range batch {
		r := &batch[i]
		var s uint32
		if w.rank == nil {
			s = uint32(r.S)
		} else {
			for w.ids[pw.src] < r.S {
				pw.src++
			}
			s = uint32(pw.src)
		}
		for ; pw.nextV <= int(s); pw.nextV++ {
			if err := pw.offs.put(pw.e); err != nil {
				return err
			}
		}
		if err := pw.tgts.put(dense[i]); err != nil {
			return err
		}
		if pw.wts != nil {
			if math.IsInf(float64(r.W), 0) {
				return fmt.Errorf("summed weight of duplicate edges %d -> %d overflows float32", r.S, r.D)
			}
			if err := pw.wts.put(r.W); err != nil {
				return err
			}
		}
		if pw.lbls != nil {
			pw.p.maxLabel = max(pw.p.maxLabel, int(r.L))
			if err := pw.lbls.put(r.L); err != nil {
				return err
			}
		}
		if pw.tms != nil {
			if int(s) != pw.tv {
				if err := pw.flushTimes(); err != nil {
					return err
				}
				pw.tv = int(s)
			}
			pw.vt = append(pw.vt, r.T)
		}
		pw.e++
	}
	w.out.Add(int64(len(batch)))
	return nil
}

// flushTimes writes the current vertex's times in time order and the
// order itself: its edges' local indices, equal times in index order (the
// edges are in (target, time) order, so a stable sort by time). It holds a
// vertex's times at once, 12 bytes an edge of the largest degree.
func (pw *partWriter) flushTimes() error {
	vt := pw.vt
	if len(vt) == 0 {
		return nil
	}
	ord := pw.vord[:0]
	sorted := true
	for j := range vt {
		ord = append(ord, uint32(j))
		sorted = sorted && (j == 0 || vt[j-1] <= vt[j])
	}
	if !sorted {
		slices.SortStableFunc(ord, func(a, b uint32) int { return cmp.Compare(vt[a], vt[b]) })
	}
	for _, j := range ord {
		if err := pw.tms.put(vt[j]); err != nil {
			return err
		}
		if err := pw.byt.put(j); err != nil {
			return err
		}
	}
	pw.vt, pw.vord = vt[:0], ord
	return nil
}

// close writes the offsets of the part's vertices after its last source
// and flushes the sections.
func (pw *partWriter) close() error {
	if pw.tms != nil {
		if err := pw.flushTimes(); err != nil {
			return err
		}
		for _, s := range []interface{ flush() error }{pw.tms, pw.byt} {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	pw.p.kept = int64(pw.e) - pw.p.e0
	if pw.p.kept > pw.p.recs || (pw.w.o.Duplicates == graph.DupKeepAll && pw.p.kept != pw.p.recs) {
		return fmt.Errorf("merge part wrote %d edges of %d records (internal error)", pw.p.kept, pw.p.recs)
	}
	for ; pw.nextV < pw.p.vhi; pw.nextV++ {
		if err := pw.offs.put(pw.e); err != nil {
			return err
		}
	}
	for _, s := range []interface{ flush() error }{pw.offs, pw.tgts} {
		if err := s.flush(); err != nil {
			return err
		}
	}
	if pw.wts != nil {
		if err := pw.wts.flush(); err != nil {
			return err
		}
	}
	if pw.lbls != nil {
		return pw.lbls.flush()
	}
	return nil
}
