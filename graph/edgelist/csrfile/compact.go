package csrfile

import (
	"errors"
	"os"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// compact closes the gaps that dropped duplicates left after each part's
// edges and returns the edge count. Part k wrote its kept edges from index
// e0 (the records before it); they move down to the edges kept before it,
// part by part in order, so a move never overwrites edges still to move.
// The section tails the edges leave are zeroed, as a serial writer leaves
// them, and the offsets of a moved part are lowered by its shift. The
// edge-sized sections move side by side, then the parts' offsets.
func (w *csrWriter) compact(f *os.File, h *graph.FileLayout, parts []mergePart) (int64, error) {
	final := make([]int64, len(parts))
	var kept, total int64
	for k, p := range parts {
		final[k] = kept
		kept += p.kept
		total += p.recs
	}
	if kept == total {
		return kept, nil
	}
	type section struct {
		off  uint64
		size int64
	}
	secs := []section{{offsetOf(h, graph.SectionTargets), 4}}
	if w.o.Weighted {
		secs = append(secs, section{offsetOf(h, graph.SectionWeights), 4})
	}
	if w.o.Labelled {
		secs = append(secs, section{offsetOf(h, graph.SectionLabels), 1})
	}
	if w.o.Timed {
		// A vertex's time order holds local indices, which a move keeps.
		secs = append(secs, section{offsetOf(h, graph.SectionTimes), 8}, section{offsetOf(h, graph.SectionByTime), 4})
	}
	errs := make([]error, len(secs)+len(parts))
	extsort.ParallelFor(len(secs), func(i int) {
		s := secs[i]
		base := int64(s.off)
		for k, p := range parts {
			if err := moveWithin(f, base+p.e0*s.size, base+final[k]*s.size, p.kept*s.size); err != nil {
				errs[i] = err
				return
			}
		}
		errs[i] = zeroRange(f, base+kept*s.size, (total-kept)*s.size)
	})
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	extsort.ParallelFor(min(max(1, w.o.Workers), len(parts)), func(t int) {
		for k := t; k < len(parts); k += max(1, w.o.Workers) {
			if shift := parts[k].e0 - final[k]; shift > 0 {
				errs[len(secs)+k] = lowerOffsets(f, int64(offsetOf(h, graph.SectionOffsets)), parts[k].vlo, parts[k].vhi, uint64(shift))
			}
		}
	})
	return kept, errors.Join(errs...)
}

// zeroRange writes n zero bytes at off.
func zeroRange(f *os.File, off, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for done := int64(0); done < n; {
		k := min(int64(len(buf)), n-done)
		if _, err := f.WriteAt(buf[:k], off+done); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// lowerOffsets subtracts shift from the offsets of vertices lo..hi-1 in
// the offsets section at secOff.
func lowerOffsets(f *os.File, secOff int64, lo, hi int, shift uint64) error {
	buf := make([]uint64, min(hi-lo, 64<<10))
	for v := lo; v < hi; v += len(buf) {
		b := buf[:min(len(buf), hi-v)]
		at := secOff + 8*int64(v)
		if _, err := f.ReadAt(bytesOf(b), at); err != nil {
			return err
		}
		for i := range b {
			b[i] -= shift
		}
		if _, err := f.WriteAt(bytesOf(b), at); err != nil {
			return err
		}
	}
	return nil
}
