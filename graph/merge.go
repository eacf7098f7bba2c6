package graph

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
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

// mergeRuns calls emit for every record of runs in (s, d, run, position)
// order.
func mergeRuns(ctx context.Context, runs []runFile, weighted, labelled bool, emit func(r *rec) error) error {
	files, err := openRunFiles(runs)
	defer closeRunFiles(files)
	if err != nil {
		return err
	}
	rs := make([]*runReader, len(runs))
	for i, rf := range runs {
		rs[i] = newRunReader(i, rf, files[i], runPos{}, rf.n, weighted, labelled, nil)
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

// heapMerge calls emit for every record of the readers in (s, d, run,
// position) order.
func heapMerge(ctx context.Context, rs []*runReader, emit func(r *rec) error) error {
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
				err := mergeRuns(b.ctx, group, b.o.Weighted, b.o.Labelled, func(r *rec) error {
					merged.n++
					return enc.put(r)
				})
				if err != nil {
					return err
				}
				merged.marks = enc.marks
				return enc.flush()
			})
			if err == nil && !b.o.DenseIDs {
				var ids []int64
				if ids, err = mergeIDs(b.ctx, group); err == nil {
					merged.idPath, err = b.spillIDs(ids)
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

// mergeIDs merges the runs' id sets into the sorted external-id array.
func mergeIDs(ctx context.Context, runs []runFile) ([]int64, error) {
	var srcs []*idReader
	defer func() {
		for _, s := range srcs {
			s.close()
		}
	}()
	var live []*idReader
	for _, rf := range runs {
		s, err := openIDs(rf)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, s)
		ok, err := s.next()
		if err != nil {
			return nil, err
		}
		if ok {
			live = append(live, s)
		}
	}
	var out []int64
	if len(live) == 1 && live[0].r == nil {
		return append([]int64{live[0].cur}, live[0].ids...), nil
	}
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
			if !ok {
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
