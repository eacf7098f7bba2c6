package edgelist

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"sync/atomic"
)

// maxMergeFan bounds how many run files are open at once; more runs are
// merged in rounds.
const maxMergeFan = 256

// runLess orders run readers by their current record, then run index.
func runLess(a, b *runReader) bool {
	if a.cur.s != b.cur.s {
		return a.cur.s < b.cur.s
	}
	if a.cur.d != b.cur.d {
		return a.cur.d < b.cur.d
	}
	if a.cur.t != b.cur.t {
		return a.cur.t < b.cur.t
	}
	return a.idx < b.idx
}

// siftDown restores the heap order below i.
func siftDown(h []*runReader, i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if c+1 < len(h) && runLess(h[c+1], h[c]) {
			c++
		}
		if !runLess(h[c], h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

// mergeRuns calls emit for every record of runs in (s, d, t, run,
// position) order.
func mergeRuns(ctx context.Context, runs []runFile, cols recCols, emit func(r *trec) error) error {
	files, err := openRunFiles(runs)
	defer closeRunFiles(files)
	if err != nil {
		return err
	}
	rs := make([]*runReader, len(runs))
	for i, rf := range runs {
		rs[i] = newRunReader(i, rf, files[i], runPos{}, rf.n, cols, nil)
	}
	return heapMerge(ctx, rs, emit)
}

// openRunFiles opens the files of the spilled runs (nil for the one in
// memory); on error the ones opened are in the result, to be closed.
func openRunFiles(runs []runFile) ([]*os.File, error) {
	files := make([]*os.File, len(runs))
	for i, rf := range runs {
		if rf.mem != nil || rf.n == 0 {
			continue
		}
		f, err := os.Open(rf.path)
		if err != nil {
			return files, fmt.Errorf("read back run: %w", err)
		}
		files[i] = f
	}
	return files, nil
}

func closeRunFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// heapMerge calls emit for every record of the readers in (s, d, t, run,
// position) order.
func heapMerge(ctx context.Context, rs []*runReader, emit func(r *trec) error) error {
	h := make([]*runReader, 0, len(rs))
	for _, rr := range rs {
		ok, err := rr.next()
		if err != nil {
			return err
		}
		if ok {
			h = append(h, rr)
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	var n int
	for len(h) > 0 {
		top := h[0]
		if err := emit(&top.cur); err != nil {
			return err
		}
		ok, err := top.next()
		if err != nil {
			return err
		}
		if !ok {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		siftDown(h, 0)
		if n++; n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceRuns merges groups of runs into bigger runs until at most
// maxMergeFan remain, so the final merge never holds too many files open.
// Groups are consecutive runs, so input order (and with it "first") is kept.
func (b *runBuilder) reduceRuns(runs []runFile) ([]runFile, error) {
	fan := b.o.mergeFan
	if fan < 2 {
		fan = maxMergeFan
	}
	for len(runs) > fan {
		var next []runFile
		for lo := 0; lo < len(runs); lo += fan {
			group := runs[lo:min(lo+fan, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			merged := runFile{}
			var err error
			merged.path, err = b.spill(func(w *bufio.Writer) error {
				enc := b.newEncoder(w)
				enc.markEvery = int64(b.o.markEvery)
				err := mergeRuns(b.ctx, group, b.o.cols(), func(r *trec) error {
					merged.n++
					return enc.put(&r.rec, r.t)
				})
				if err != nil {
					return err
				}
				merged.marks = enc.marks
				return enc.flush()
			})
			if err == nil && b.o.wantIDSets() {
				var ids []int64
				if ids, err = mergeIDs(b.ctx, group, b.o.Workers); err == nil {
					merged.idPath, merged.idMarks, err = b.spillIDs(ids)
				}
			}
			if err != nil {
				removeRuns(next)
				removeRuns([]runFile{merged})
				return nil, err
			}
			removeRuns(group)
			next = append(next, merged)
		}
		runs = next
	}
	return runs, nil
}

// mergeIDs merges the runs' id sets into the sorted external-id array, on
// up to workers goroutines (mergeIDsPar) when the sets are large.
func mergeIDs(ctx context.Context, runs []runFile, workers int) ([]int64, error) {
	var total int
	for _, rf := range runs {
		total += len(rf.ids) + len(rf.idMarks)*idMarkEvery
	}
	if workers > 1 && len(runs) > 1 && total >= parallelIDsMin {
		return mergeIDsPar(ctx, runs, workers)
	}
	var srcs []*idReader
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	for _, rf := range runs {
		s, err := openIDs(rf)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, s)
	}
	if len(srcs) == 1 && srcs[0].r == nil {
		return slices.Clone(srcs[0].ids), nil
	}
	return mergeIDStreams(ctx, srcs, math.MaxInt64, false)
}

// parallelIDsMin is the fewest ids (about) worth merging in parts.
const parallelIDsMin = 1 << 20

// mergeIDStreams merges the id streams into their sorted union, up to
// (below) hi when bounded.
func mergeIDStreams(ctx context.Context, srcs []*idReader, hi int64, bounded bool) ([]int64, error) {
	var live []*idReader
	for _, s := range srcs {
		ok, err := s.next()
		if err != nil {
			return nil, err
		}
		if ok && (!bounded || s.cur < hi) {
			live = append(live, s)
		}
	}
	var out []int64
	// Id sets are much smaller than edge runs, so a linear scan for the
	// minimum over the live sources is fine.
	for len(live) > 0 {
		m := live[0].cur
		for _, s := range live[1:] {
			m = min(m, s.cur)
		}
		out = append(out, m)
		for i := 0; i < len(live); {
			s := live[i]
			if s.cur != m {
				i++
				continue
			}
			ok, err := s.next()
			if err != nil {
				return nil, err
			}
			if !ok || bounded && s.cur >= hi {
				live = slices.Delete(live, i, i+1)
				continue
			}
			i++
		}
		if len(out)&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return out, nil
}

// mergeIDsPar merges the id sets in parts of the id range, cut from the
// sets' marks so the parts hold about the same number of ids, four a
// worker. Part k merges the ids in [bounds[k-1], bounds[k]) of every set,
// starting a spilled set at its last mark at or before the part's start;
// the parts' unions, one after another, are the whole union.
func mergeIDsPar(ctx context.Context, runs []runFile, workers int) ([]int64, error) {
	files := make([]*os.File, len(runs))
	defer closeRunFiles(files)
	var samples []int64
	for i, rf := range runs {
		if rf.idPath != "" {
			f, err := os.Open(rf.idPath)
			if err != nil {
				return nil, fmt.Errorf("read back id run: %w", err)
			}
			files[i] = f
			for _, m := range rf.idMarks {
				samples = append(samples, m.id)
			}
			continue
		}
		for j := 0; j < len(rf.ids); j += idMarkEvery {
			samples = append(samples, rf.ids[j])
		}
	}
	slices.Sort(samples)
	nparts := 4 * workers
	var bounds []int64 // part k is [bounds[k-1], bounds[k]), the ends open
	for k := 1; k < nparts; k++ {
		b := samples[k*len(samples)/nparts]
		if b > samples[0] && (len(bounds) == 0 || b > bounds[len(bounds)-1]) {
			bounds = append(bounds, b)
		}
	}
	outs := make([][]int64, len(bounds)+1)
	errs := make([]error, len(outs))
	var next atomic.Int64
	parallelFor(min(workers, len(outs)), func(int) {
		for k := int(next.Add(1) - 1); k < len(outs); k = int(next.Add(1) - 1) {
			lo, hi, bounded := int64(math.MinInt64), int64(math.MaxInt64), k < len(bounds)
			if k > 0 {
				lo = bounds[k-1]
			}
			if bounded {
				hi = bounds[k]
			}
			outs[k], errs[k] = mergeIDPart(ctx, runs, files, lo, hi, bounded)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var n int
	for _, o := range outs {
		n += len(o)
	}
	ids := make([]int64, 0, n)
	for _, o := range outs {
		ids = append(ids, o...)
	}
	return ids, nil
}

// mergeIDPart merges the runs' ids in [lo, hi) (hi open when !bounded).
func mergeIDPart(ctx context.Context, runs []runFile, files []*os.File, lo, hi int64, bounded bool) ([]int64, error) {
	var srcs []*idReader
	for i, rf := range runs {
		if files[i] == nil {
			from, _ := slices.BinarySearch(rf.ids, lo)
			srcs = append(srcs, &idReader{ids: rf.ids[from:]})
			continue
		}
		if len(rf.idMarks) == 0 {
			continue // an empty set
		}
		j := max(0, sort.Search(len(rf.idMarks), func(j int) bool { return rf.idMarks[j].id > lo })-1)
		s := openIDsAt(files[i], rf.idMarks[j], 16<<10)
		// Skip the ids before lo (fewer than idMarkEvery): the stream's
		// first id is then its current one.
		for {
			ok, err := s.next()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if s.cur >= lo {
				s.ids, s.pending = nil, true
				srcs = append(srcs, s)
				break
			}
		}
	}
	return mergeIDStreams(ctx, srcs, hi, bounded)
}
