package extsort

import (
	"cmp"
	"os"
	"slices"
)

// Rec is one directed edge in a run. seq is the position in the run, so
// sorting by (s, d, seq) is a stable sort by (s, d). A timed run keeps
// its times beside the records, times[seq] (32 bytes a record with them
// inside, 40 for every import, cost the untimed imports about 8%), and is
// sorted by (s, d, t, seq), the graph file's edge order.
type Rec struct {
	S, D int64
	W    float32
	Seq  uint32
	L    uint8
}

// TRec is a record with its time (0 untimed), as the merge reads it.
type TRec struct {
	Rec
	T int64
}

func cmpRec(a, b Rec) int {
	if c := cmp.Compare(a.S, b.S); c != 0 {
		return c
	}
	if c := cmp.Compare(a.D, b.D); c != 0 {
		return c
	}
	return cmp.Compare(a.Seq, b.Seq)
}

// cmpTimed is cmpRec for a timed run's records.
func cmpTimed(times []int64) func(a, b Rec) int {
	return func(a, b Rec) int {
		if c := cmp.Compare(a.S, b.S); c != 0 {
			return c
		}
		if c := cmp.Compare(a.D, b.D); c != 0 {
			return c
		}
		if c := cmp.Compare(times[a.Seq], times[b.Seq]); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	}
}

// Run is one sorted run spilled to disk, or (the last one) kept in
// memory.
type Run struct {
	Path    string
	N       int64   // records
	Mem     []Rec   // set when the run was never spilled
	MemT    []int64 // its times, in the same order, when timed
	IDPath  string
	IDMarks []IDMark // a spilled id set's restart points
	IDs     []int64  // set when the id set was never spilled
	Marks   []Mark   // a spilled run's restart points, every markEvery records

	// With string ids: the run's sorted strings (in memory, or spilled to
	// strPath), their count, and once they are merged (MergeStrings) the
	// map from the run's local ids to dense ids.
	Strs    StrSet
	StrPath string
	NStrs   int64
	Remap   []uint32
}

// runIDs returns the sorted set of external ids a run mentions, given its
// sorted distinct sources.
func runIDs(srcs []int64, recs []Rec, dropped []int64, undirected bool) []int64 {
	if undirected && len(dropped) == 0 {
		// Every target is also a source in an undirected run.
		return srcs
	}
	ids := srcs
	if !undirected {
		ids = slices.Grow(ids, len(recs)+len(dropped))
		for i := range recs {
			ids = append(ids, recs[i].D)
		}
	}
	ids = append(ids, dropped...)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// RemoveRuns deletes the runs' files.
func RemoveRuns(runs []Run) {
	for _, r := range runs {
		if r.Path != "" {
			os.Remove(r.Path)
		}
		if r.IDPath != "" {
			os.Remove(r.IDPath)
		}
		if r.StrPath != "" {
			os.Remove(r.StrPath)
		}
	}
}
