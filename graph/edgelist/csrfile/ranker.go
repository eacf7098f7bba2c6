package csrfile

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// ranker maps external ids to dense ids (ranks in the sorted id array):
// through a direct table when the ids span at most 4 V (16 bytes a
// vertex) or the table fits in 512 MiB (SNAP files, mostly), else through
// the bucketed binary search of idIndex.
type ranker struct {
	lo, span uint64
	table    []uint32
	idx      *idIndex
}

func newRanker(ids []int64) *ranker {
	if len(ids) == 0 {
		return &ranker{idx: newIDIndex(ids)}
	}
	lo := uint64(ids[0])
	span := uint64(ids[len(ids)-1]) - lo
	v := uint64(len(ids))
	if span < math.MaxUint32 && (span < 4*v+1<<22 || span < 1<<27) {
		table := make([]uint32, span+1)
		for i := range table {
			table[i] = graph.NoVertex
		}
		for i, id := range ids {
			table[uint64(id)-lo] = uint32(i)
		}
		return &ranker{lo: lo, span: span, table: table}
	}
	return &ranker{idx: newIDIndex(ids)}
}

// all ranks the targets of batch into out.
func (r *ranker) all(batch []extsort.TRec, out []uint32) error {
	bad := -1
	if r.table != nil {
		for i := range batch {
			k := uint64(batch[i].D) - r.lo
			if k > r.span {
				bad = i
				continue
			}
			out[i] = r.table[k]
		}
		for i := range batch {
			if out[i] == graph.NoVertex {
				bad = i
			}
		}
	} else if len(r.idx.ids) > 0 {
		// Two passes so the bucket loads, then the id loads, of the whole
		// batch are independent and overlap in the memory system.
		x := r.idx
		last := uint64(len(x.starts) - 1)
		for i := range batch {
			k := (uint64(batch[i].D) - x.min) >> x.shift
			if k >= last {
				bad, out[i] = i, 0
				continue
			}
			out[i] = uint32(k)
		}
		if bad >= 0 {
			return fmt.Errorf("target %d missing from the id set (internal error)", batch[bad].D)
		}
		for i := range batch {
			k := out[i]
			lo, hi := x.starts[k], x.starts[k+1]
			j, ok := slices.BinarySearch(x.ids[lo:hi], batch[i].D)
			if !ok {
				bad = i
			}
			out[i] = lo + uint32(j)
		}
	} else if len(batch) > 0 {
		bad = 0
	}
	if bad >= 0 {
		return fmt.Errorf("target %d missing from the id set (internal error)", batch[bad].D)
	}
	return nil
}

// idIndex finds an external id's rank in the sorted id array (see
// ranker.all): a bucket table on the id's offset from the minimum narrows
// the binary search to a few entries for evenly spread ids, and degrades to
// log V for skewed ones.
type idIndex struct {
	ids    []int64
	min    uint64
	shift  uint
	starts []uint32
}

func newIDIndex(ids []int64) *idIndex {
	x := &idIndex{ids: ids}
	if len(ids) == 0 {
		return x
	}
	x.min = uint64(ids[0])
	span := uint64(ids[len(ids)-1]) - x.min
	nb := uint64(1) << max(1, bits.Len(uint(len(ids)))) // about 1-2 ids a bucket
	for span>>x.shift >= nb {
		x.shift++
	}
	buckets := span>>x.shift + 1
	x.starts = make([]uint32, buckets+1)
	i := 0
	for b := uint64(0); b <= buckets; b++ {
		for i < len(ids) && (uint64(ids[i])-x.min)>>x.shift < b {
			i++
		}
		x.starts[b] = uint32(i)
	}
	return x
}
