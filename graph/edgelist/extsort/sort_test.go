package extsort

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestRunSorterKeepsSortedRuns checks the sorted-input shortcut: a run in
// (src, dst) order, duplicates included, is left as it is, and one pair out
// of order is enough to sort.
func TestRunSorterKeepsSortedRuns(t *testing.T) {
	recs := make([]Rec, 5000)
	for i := range recs {
		recs[i] = Rec{S: int64(i / 7), D: int64(i % 7 / 2), Seq: uint32(i)}
	}
	var rs Sorter
	if order := rs.Sort(slices.Clone(recs), nil); order != nil {
		t.Fatal("a sorted run was sorted again")
	}
	recs[4999].D = -1
	want := slices.Clone(recs)
	slices.SortFunc(want, cmpRec)
	order := rs.Sort(recs, nil)
	if order == nil && recs[4999].D == -1 {
		t.Fatal("a run out of order was taken as sorted")
	}
	for i := range want {
		if *at(recs, order, i) != want[i] {
			t.Fatalf("position %d is %+v, want %+v", i, *at(recs, order, i), want[i])
		}
	}
}

// TestRunSorterParallelMatchesComparisonSort sorts runs big enough to be
// split over several goroutines, with blocks of uneven length.
func TestRunSorterParallelMatchesComparisonSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, span := range [][2]int64{{1 << 20, 1 << 20}, {1 << 40, 1 << 40}, {5, 1 << 62}, {3, 3}} {
		recs := make([]Rec, 3*parallelRadixMin+7)
		for i := range recs {
			recs[i] = Rec{S: rng.Int64N(span[0]) - span[0]/2, D: rng.Int64N(span[1]) - span[1]/3, Seq: uint32(i)}
			if i%3 != 0 {
				// A hub: one source with more records than a bucket
				// sorted in cache holds.
				recs[i].S = 0
			}
		}
		want := slices.Clone(recs)
		slices.SortFunc(want, cmpRec)
		rs := Sorter{Par: 3}
		order := rs.Sort(recs, nil)
		for i := range want {
			if *at(recs, order, i) != want[i] {
				t.Fatalf("span %d: position %d is %+v, want %+v", span, i, *at(recs, order, i), want[i])
			}
		}
	}
}

// TestEncodeRunSlabsMatchOneEncoder encodes a run of several slabs on
// several goroutines and wants the bytes and sources of one encoder.
func TestEncodeRunSlabsMatchOneEncoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	recs := make([]Rec, 5*spillSlab/2)
	for i := range recs {
		recs[i] = Rec{S: rng.Int64N(1000), D: rng.Int64N(1 << 40), W: float32(i), L: uint8(i), Seq: uint32(i)}
	}
	var rs Sorter
	order := rs.Sort(recs, nil)
	var want bytes.Buffer
	bw := bufio.NewWriter(&want)
	enc := &Encoder{W: bw, Cols: Cols{Weighted: true, Labelled: true}, MarkEvery: 1000}
	var wantSrcs []int64
	for i := range recs {
		r := at(recs, order, i)
		if len(wantSrcs) == 0 || wantSrcs[len(wantSrcs)-1] != r.S {
			wantSrcs = append(wantSrcs, r.S)
		}
		if err := enc.Put(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	enc.Flush()
	bw.Flush()
	for _, par := range []int{1, 2, 4} {
		var got bytes.Buffer
		srcs, marks, err := EncodeRun(&got, recs, order, nil, Cols{Weighted: true, Labelled: true}, true, 1000, make([]SlabCoder, par))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) || !slices.Equal(srcs, wantSrcs) {
			t.Fatalf("par %d: %d bytes and %d sources, want %d and %d", par, got.Len(), len(srcs), want.Len(), len(wantSrcs))
		}
		if !slices.Equal(marks, enc.Marks) {
			t.Fatalf("par %d: %d marks differ from the serial encoder's %d", par, len(marks), len(enc.Marks))
		}
		// A file is written with WriteAt, the slabs at once.
		f, err := os.Create(filepath.Join(t.TempDir(), "run"))
		if err != nil {
			t.Fatal(err)
		}
		_, fmarks, err := EncodeRun(f, recs, order, nil, Cols{Weighted: true, Labelled: true}, true, 1000, make([]SlabCoder, par))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(f.Name()); !bytes.Equal(b, want.Bytes()) || !slices.Equal(fmarks, enc.Marks) {
			t.Fatalf("par %d: the file's %d bytes differ from the serial encoder's %d", par, len(b), want.Len())
		}
	}
}

// BenchmarkRunSorter sorts a default-sized run (4Mi records) of random
// 20-bit sources and targets, as a shuffled scale-20 edge list gives, on
// one goroutine and on one per core, and reports records/s.
func BenchmarkRunSorter(b *testing.B) {
	rng := rand.New(rand.NewPCG(17, 18))
	recs := make([]Rec, 4<<20) // the importer's default run
	for i := range recs {
		recs[i] = Rec{S: rng.Int64N(1 << 20), D: rng.Int64N(1 << 20), Seq: uint32(i)}
	}
	for _, par := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("par=%d", par), func(b *testing.B) {
			rs := Sorter{Par: par}
			for b.Loop() {
				rs.Sort(recs, nil)
			}
			b.ReportMetric(float64(len(recs))*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// The sorter's radix id sets must equal the comparison-sorted ones, for
// directed and undirected runs, with dropped self-loops, negative and
// widely spread ids.
func TestRunSorterIDsMatchSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, spread := range []int64{1000, 1 << 40, math.MaxInt64} {
		for _, undirected := range []bool{false, true} {
			recs := make([]Rec, 100000)
			for i := range recs {
				recs[i] = Rec{S: rng.Int64N(spread) - spread/2, D: rng.Int64N(spread) - spread/2}
			}
			slices.SortFunc(recs, cmpRec)
			var srcs []int64
			for i := range recs {
				if i == 0 || recs[i-1].S != recs[i].S {
					srcs = append(srcs, recs[i].S)
				}
			}
			dropped := make([]int64, 70000)
			for i := range dropped {
				dropped[i] = rng.Int64N(spread) - spread/2
			}
			want := runIDs(slices.Clone(srcs), recs, dropped, undirected)
			rs := Sorter{Par: 3}
			if got := rs.RunIDs(srcs, recs, dropped, undirected); !slices.Equal(got, want) {
				t.Fatalf("spread %d undirected %v: %d ids, want %d", spread, undirected, len(got), len(want))
			}
		}
	}
}

// Merging the id sets in parts of the id range must give the serial
// merge's array: sets spilled and in memory, overlapping and disjoint,
// negative ids, parts that start between marks.
func TestMergeIDsInPartsMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	var runs []Run
	for r := range 6 {
		set := map[int64]bool{}
		for range 30000 + r*7000 {
			x := rng.Int64N(200000) - 50000
			if r == 5 {
				x = 1<<40 + rng.Int64N(1000000) // far from the others
			}
			set[x] = true
		}
		ids := make([]int64, 0, len(set))
		for x := range set {
			ids = append(ids, x)
		}
		slices.Sort(ids)
		if r == 2 {
			runs = append(runs, Run{IDs: ids})
			continue
		}
		path, marks, err := spillIDs(dir, ids)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, Run{IDPath: path, IDMarks: marks})
	}
	runs = append(runs, Run{}) // an empty last run
	want, err := MergeIDs(context.Background(), runs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, workers := range []int{2, 3, 16} {
		got, err := mergeIDsPar(context.Background(), runs, workers)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d workers: %d ids, want %d", workers, len(got), len(want))
		}
	}
}

// TestRunSorterTimedMatchesComparisonSort: timed runs are sorted by
// (source, target, time, position) whichever path the sorter takes: pairs
// whose ids fit one key finished by time (timeTies), or ids too wide for
// one key sorted field by field (sortTimed), on one goroutine or several.
func TestRunSorterTimedMatchesComparisonSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct {
		ids, times int64
		par        int
	}{
		{50, 4, 1}, {50, 1 << 62, 1}, {1 << 20, 1000, 3}, {1 << 40, 1 << 40, 3}, {1 << 62, 3, 1}, {1 << 62, 1 << 62, 3},
	} {
		for _, n := range []int{1000, 2*parallelRadixMin + 11} {
			recs := make([]Rec, n)
			times := make([]int64, n)
			for i := range recs {
				recs[i] = Rec{S: rng.Int64N(c.ids) - c.ids/2, D: rng.Int64N(c.ids) - c.ids/3, Seq: uint32(i)}
				times[i] = rng.Int64N(c.times) - c.times/2
				if i%4 == 0 && i > 0 {
					recs[i].S, recs[i].D = recs[i-1].S, recs[i-1].D // a pair at several times
				}
			}
			want := slices.Clone(recs)
			slices.SortFunc(want, func(a, b Rec) int {
				return cmp.Or(cmp.Compare(a.S, b.S), cmp.Compare(a.D, b.D), cmp.Compare(times[a.Seq], times[b.Seq]), cmp.Compare(a.Seq, b.Seq))
			})
			rs := Sorter{Par: c.par}
			order := rs.Sort(recs, times)
			for i := range want {
				if *at(recs, order, i) != want[i] {
					t.Fatalf("%+v n=%d: position %d is %+v, want %+v", c, n, i, *at(recs, order, i), want[i])
				}
			}
		}
	}
}

func TestRunSorterMatchesComparisonSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, span := range [][2]int64{{1, 1}, {3, 3}, {1 << 20, 1 << 20}, {1 << 40, 1 << 40}, {5, 1 << 62}, {1 << 62, 7}} {
		recs := make([]Rec, 5000)
		for i := range recs {
			recs[i] = Rec{S: rng.Int64N(span[0]) - span[0]/2, D: rng.Int64N(span[1]) - span[1]/3, Seq: uint32(i)}
			if i%3 == 0 {
				recs[i].S = math.MinInt64 + int64(i%2) // extremes
			}
		}
		want := slices.Clone(recs)
		slices.SortFunc(want, cmpRec)
		var rs Sorter
		order := rs.Sort(recs, nil)
		for i := range want {
			if *at(recs, order, i) != want[i] {
				t.Fatalf("span %d: position %d is %+v, want %+v", span, i, *at(recs, order, i), want[i])
			}
		}
	}
}

func TestRunReaderRejectsTruncatedRun(t *testing.T) {
	dir := t.TempDir()
	recs := []Rec{{S: 1, D: 2, W: 1.5, L: 3}, {S: 1, D: 300000, W: 2, L: 1}, {S: 1 << 40, D: -5, W: 3, L: 0}}
	path, err := spill(dir, func(w *bufio.Writer) error {
		enc := Encoder{W: w, Cols: Cols{Weighted: true, Labelled: true}}
		for i := range recs {
			if err := enc.Put(&recs[i], 0); err != nil {
				return err
			}
		}
		return enc.Flush()
	})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := os.ReadFile(path)
	for cut := 0; cut <= len(full); cut++ {
		os.WriteFile(path, full[:cut], 0o644)
		var got []Rec
		err := MergeRuns(context.Background(), []Run{{Path: path, N: int64(len(recs))}}, Cols{Weighted: true, Labelled: true}, func(r *TRec) error {
			got = append(got, r.Rec)
			return nil
		})
		if cut == len(full) {
			if err != nil || len(got) != len(recs) {
				t.Fatalf("full run: %v, %d records", err, len(got))
			}
			for i := range recs {
				if got[i].S != recs[i].S || got[i].D != recs[i].D || got[i].W != recs[i].W || got[i].L != recs[i].L {
					t.Fatalf("record %d = %+v, want %+v", i, got[i], recs[i])
				}
			}
		} else if err == nil || !strings.Contains(err.Error(), "truncated or corrupt") {
			t.Fatalf("cut at %d: got %v", cut, err)
		}
	}
}

// spill writes a temporary file in dir through write, as the importer
// spills a run, and returns its path.
func spill(dir string, write func(*bufio.Writer) error) (string, error) {
	f, err := os.CreateTemp(dir, "run-*")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// spillIDs writes an id set to a temporary file in dir and returns its
// path and marks.
func spillIDs(dir string, ids []int64) (path string, marks []IDMark, err error) {
	path, err = spill(dir, func(w *bufio.Writer) error {
		marks, err = EncodeIDs(w, ids)
		return err
	})
	return path, marks, err
}
