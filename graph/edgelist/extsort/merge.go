package extsort

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"sync/atomic"
)

// runLess orders run readers by their current record, then run index.
func runLess(a, b *Reader) bool {
	if a.Cur.S != b.Cur.S {
		return a.Cur.S < b.Cur.S
	}
	if a.Cur.D != b.Cur.D {
		return a.Cur.D < b.Cur.D
	}
	if a.Cur.T != b.Cur.T {
		return a.Cur.T < b.Cur.T
	}
	return a.idx < b.idx
}

// siftDown restores the heap order below i.
func siftDown(h []*Reader, i int) {
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

// MergeRuns calls emit for every record of runs in (s, d, t, run,
// position) order.
func MergeRuns(ctx context.Context, runs []Run, cols Cols, emit func(r *TRec) error) error {
	files, err := OpenRunFiles(runs)
	defer CloseRunFiles(files)
	if err != nil {
		return err
	}
	rs := make([]*Reader, len(runs))
	for i, rf := range runs {
		rs[i] = NewReader(i, rf, files[i], Pos{}, rf.N, cols, nil)
	}
	return HeapMerge(ctx, rs, emit)
}

// OpenRunFiles opens the files of the spilled runs (nil for the one in
// memory); on error the ones opened are in the result, to be closed.
func OpenRunFiles(runs []Run) ([]*os.File, error) {
	files := make([]*os.File, len(runs))
	for i, rf := range runs {
		if rf.Mem != nil || rf.N == 0 {
			continue
		}
		f, err := os.Open(rf.Path)
		if err != nil {
			return files, fmt.Errorf("read back run: %w", err)
		}
		files[i] = f
	}
	return files, nil
}

func CloseRunFiles(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// HeapMerge calls emit for every record of the readers in (s, d, t, run,
// position) order.
func HeapMerge(ctx context.Context, rs []*Reader, emit func(r *TRec) error) error {
	h := make([]*Reader, 0, len(rs))
	for _, rr := range rs {
		ok, err := rr.Next()
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
		if err := emit(&top.Cur); err != nil {
			return err
		}
		ok, err := top.Next()
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

// MergeIDs merges the runs' id sets into the sorted external-id array, on
// up to workers goroutines (mergeIDsPar) when the sets are large.
func MergeIDs(ctx context.Context, runs []Run, workers int) ([]int64, error) {
	var total int
	for _, rf := range runs {
		total += len(rf.IDs) + len(rf.IDMarks)*idMarkEvery
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
func mergeIDsPar(ctx context.Context, runs []Run, workers int) ([]int64, error) {
	files := make([]*os.File, len(runs))
	defer CloseRunFiles(files)
	var samples []int64
	for i, rf := range runs {
		if rf.IDPath != "" {
			f, err := os.Open(rf.IDPath)
			if err != nil {
				return nil, fmt.Errorf("read back id run: %w", err)
			}
			files[i] = f
			for _, m := range rf.IDMarks {
				samples = append(samples, m.id)
			}
			continue
		}
		for j := 0; j < len(rf.IDs); j += idMarkEvery {
			samples = append(samples, rf.IDs[j])
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
	ParallelFor(min(workers, len(outs)), func(int) {
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
func mergeIDPart(ctx context.Context, runs []Run, files []*os.File, lo, hi int64, bounded bool) ([]int64, error) {
	var srcs []*idReader
	for i, rf := range runs {
		if files[i] == nil {
			from, _ := slices.BinarySearch(rf.IDs, lo)
			srcs = append(srcs, &idReader{ids: rf.IDs[from:]})
			continue
		}
		if len(rf.IDMarks) == 0 {
			continue // an empty set
		}
		j := max(0, sort.Search(len(rf.IDMarks), func(j int) bool { return rf.IDMarks[j].id > lo })-1)
		s := openIDsAt(files[i], rf.IDMarks[j], 16<<10)
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
