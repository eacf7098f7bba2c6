package edgelist

// The importers share one streaming pipeline, an external sort:
//
//  1. Decoders (text chunks or Parquet row groups, one goroutine per core)
//     parse and validate the input into batches of edges in external ids;
//     the batches reach a runBuilder in input order (batch.go), which fills
//     a fixed-size in-memory run (adding the reverse edge for undirected
//     graphs and dropping self-loops), a batch's blocks on Workers
//     goroutines at once.
//  2. A full run is sorted by (src, dst, input position) by the sorter (by
//     (src, dst, time, input position) when timed; with string ids the
//     sorter first turns the run's strings into run-local ranks, see
//     doc.go and extsort's strdict.go), a goroutine that spreads the radix
//     sort and the encoding over Workers goroutines (extsort.Sorter,
//     extsort.EncodeRun), and spilled to a temporary file,
//     delta- and varint-coded, together with the sorted set of external ids
//     it mentions; the run builder meanwhile fills the other buffer. Memory
//     is two runs and the sort's scratch, plus about 15 MB a worker,
//     whatever the input size.
//  3. The id sets are merged into the sorted external-id array: dense id =
//     rank of the external id, the same numbering graph.FromEdges uses
//     (string sets: into the string table and a map per run from its local
//     ids to dense ids, extsort.MergeStrings).
//  4. The edge runs are k-way merged (ties broken by run, so "first" means
//     first in the input), duplicates are resolved by the policy, and the
//     CSR sections are written straight into the output file, which is
//     renamed into place only when complete. The merge runs in parts of the
//     source range on Workers goroutines, each part writing its own slice
//     of the sections (csrfile.Write); the bytes do not depend on the count.

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist/csrfile"
	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// ImportOptions configure the text and Parquet importers.
type ImportOptions struct {
	// Name is stored in the graph file (default: the input file's base name).
	Name string
	// Undirected adds the reverse of every edge.
	Undirected bool
	// Weighted reads a weight column (third); weights must be finite and > 0.
	Weighted bool
	// Labelled reads a label column (after the weight, if any), 0..255.
	Labelled bool
	// SelfLoops keeps u -> u edges; they are dropped (and counted) otherwise.
	SelfLoops bool
	// Duplicates says what to do with repeated (src, dst) pairs. With
	// times, a duplicate is a repeated (src, dst, time): the same pair at
	// two times is two edges whatever the policy, as in graph.FromEdges.
	Duplicates graph.DuplicatePolicy
	// DenseIDs says the input ids are already 0..V-1: no id map is stored,
	// V is the largest id + 1 and ids that never appear are isolated
	// vertices. Without it ids may be any int64 and dense ids are their
	// ranks.
	DenseIDs bool
	// StringIDs says the input ids are strings (text: any field without
	// separators; Parquet: BYTE_ARRAY src and dst columns), valid UTF-8 of
	// 1..maxStringIDBytes bytes. The file keeps the string id map, and
	// dense ids are the strings' ranks in bytewise order, as int64 ids are
	// numbered by value. It excludes DenseIDs. A run then also holds its
	// ids' bytes, 10 bytes more each, once per edge end (a source repeated
	// on consecutive lines once): a run is cut at 48 bytes of them a run
	// edge, so peak memory grows by up to about 100 bytes a run edge.
	StringIDs bool
	// TimeColumn is the text importer's time column, counted from 1 like
	// the other columns (src is 1, dst 2): an integer per edge (Unix
	// milliseconds, say), stored as the graph's edge times. The weight and
	// label, if read, take the other columns after dst in their order, so
	// "src dst weight time" is TimeColumn 4 with Weighted. 0: untimed.
	TimeColumn int
	// TimeColumnName is the Parquet importer's time column (INT32 or
	// INT64); "": untimed.
	TimeColumnName string
	// TempDir holds the spilled runs (default: the output file's directory,
	// which has room for the output anyway).
	TempDir string
	// RunEdges is the number of directed edges sorted in memory at a time
	// (default 4Mi). Peak memory is about 150 bytes per run edge (two run
	// buffers, sort scratch) plus 16-24 bytes per vertex, whatever the
	// input size.
	RunEdges int
	// Workers is how many goroutines decode the input, sort and encode the
	// runs and merge them into the graph file (default GOMAXPROCS). Edges
	// reach the sort in input order, and the file has the same bytes,
	// whatever the number.
	// Each adds about 15 MB to peak memory (measured at scale 20): up to
	// three decoded batches of 64Ki edges waiting for the run builder, a
	// 2 MiB text chunk or a row group's read buffers and current pages,
	// and a spill encoder's slab. A Parquet decoder may queue its whole part
	// of a row group instead, up to 8 batches (about 1.4 MB each with
	// weights and labels), so that it never waits on the run builder
	// mid-part.
	Workers int
	// Progress, if set, is called (from one goroutine at a time) at most
	// every ProgressInterval (default 2s), and once at the end of each phase.
	Progress         func(Progress)
	ProgressInterval time.Duration

	timed    bool         // set by the importer from TimeColumn or TimeColumnName
	hashSeed maphash.Seed // for the strings' hashes (string ids)

	mergeFan   int // tests lower it to exercise merging in rounds
	mergeParts int // parts of the final merge (default: see mergePartCount); tests set it
	markEvery  int // records between a run's marks (default 4096); tests lower it
	batchRows  int // tests lower it to exercise many Parquet batches
}

// Progress reports how far a long import has got.
type Progress struct {
	Phase      string // "read" or "write"
	EdgesRead  int64  // input edges (lines or rows) accepted so far
	BytesRead  int64  // input bytes consumed so far (read phase)
	TotalBytes int64  // input size, 0 if unknown
	EdgesOut   int64  // CSR edges written so far (write phase)
	EdgesTotal int64  // directed edges to merge (write phase)
	RowGroup   int    // Parquet: the row group being read, from 0 (read phase)
	RowGroups  int    // Parquet: row groups in the file; 0 for text
}

// ImportStats summarise a finished import.
type ImportStats struct {
	InputEdges       int64 // edges read from the input
	SelfLoopsDropped int64
	Duplicates       int64 // repeated (src, dst) pairs merged or dropped
	Vertices         int
	Edges            int64 // directed edges in the output
	Runs             int   // sorted runs the external sort used
	Bytes            int64 // input bytes read
	OutputBytes      int64
	Version          string
	// Phases is where the time went, in order: decode (reading and
	// decoding the input while runs are sorted and spilled beside it),
	// within it the time the run builder waited for input and for the
	// sorter, sort runs (the sorter's busy time, overlapping decode),
	// sort tail (the wait for the last run), ids (merging the id or string
	// sets, and the runs when there are too many to merge at once),
	// merge (the parallel merge into the sections) and write (ids,
	// compaction and checksum).
	Phases []PhaseTime

	mergeParts int // parts of the final merge
}

// PhaseTime is one phase of an import: its name, wall time and the edges it
// handled (input edges for decode, directed edges after it; 0 where a rate
// in edges says nothing: the waits, the sort's tail, the id merge).
type PhaseTime struct {
	Name     string
	Duration time.Duration
	Edges    int64
	// Overlap says the phase ran beside or within the one before it, so
	// its time is not added to the total.
	Overlap bool
}

// defaultMarkEvery is ImportOptions.markEvery's default: records between
// a run's marks, so a part of the final merge (graph/edgelist/csrfile)
// skips about 2048 records a run to its start.
const defaultMarkEvery = 4096

// defaultRunEdges is ImportOptions.RunEdges's default.
const defaultRunEdges = 4 << 20

// importInto runs the whole pipeline: read feeds the run builder, then the
// output file is written atomically at out.
func importInto(ctx context.Context, input, out string, o ImportOptions, totalBytes int64, read func(b *runBuilder) error) (*ImportStats, error) {
	o, err := o.withDefaults(input)
	if err != nil {
		return nil, err
	}
	tmpDir := o.TempDir
	if tmpDir == "" {
		tmpDir = filepath.Dir(out)
	}
	b := newRunBuilder(ctx, input, tmpDir, o)
	b.total = totalBytes
	t0 := time.Now()
	readErr := read(b)
	t1 := time.Now()
	runs, finErr := b.finish()
	defer func() { extsort.RemoveRuns(runs) }()
	if readErr != nil && !errors.Is(readErr, errSorterFailed) {
		return nil, readErr
	}
	if finErr != nil {
		return nil, fmt.Errorf("import %s: %w", input, finErr)
	}
	sortedRuns := len(runs)
	t3 := time.Now()
	var strs *extsort.StringTable
	if o.StringIDs {
		// The runs hold run-local ids until the string sets are merged,
		// so this comes before any merge of runs.
		if strs, err = extsort.MergeStrings(ctx, runs, tmpDir); err != nil {
			return nil, fmt.Errorf("import %s: %w", input, err)
		}
		defer os.Remove(strs.Path)
	}
	if runs, err = b.reduceRuns(runs); err != nil {
		return nil, fmt.Errorf("import %s: %w", input, err)
	}
	b.report(true)
	st := b.stats
	st.Runs = sortedRuns
	st.Bytes = b.bytes
	ids, n, err := vertexIDs(ctx, b, runs, strs)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", input, err)
	}
	t4 := time.Now()
	var total int64
	for _, r := range runs {
		total += r.N
	}
	wo := csrfile.Options{Name: o.Name, Weighted: o.Weighted, Labelled: o.Labelled, Timed: o.timed, Duplicates: o.Duplicates,
		Workers: o.Workers, MergeParts: o.mergeParts, MarkEvery: o.markEvery, ProgressInterval: o.ProgressInterval}
	if o.Progress != nil {
		wo.Progress = func(out, total int64) {
			o.Progress(Progress{Phase: "write", EdgesOut: out, EdgesTotal: total, EdgesRead: st.InputEdges})
		}
	}
	var ws csrfile.Stats
	err = graph.WriteFileAtomic(out, func(f *os.File) error {
		var err error
		ws, err = csrfile.Write(ctx, f, runs, ids, strs, n, total, wo)
		return err
	})
	st.Vertices, st.Edges, st.Duplicates, st.OutputBytes, st.Version = ws.Vertices, ws.Edges, ws.Duplicates, ws.OutputBytes, ws.Version
	st.mergeParts = ws.MergeParts
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", input, err)
	}
	t5 := time.Now()
	// The sort phase is the sorter's busy time during decode plus the
	// wait for the last run (and the merging of runs in rounds, if any).
	st.Phases = []PhaseTime{
		{Name: "decode", Duration: t1.Sub(t0), Edges: st.InputEdges},
		{Name: "waiting for input", Duration: b.waitInput, Overlap: true},
		{Name: "waiting for the sorter", Duration: b.waitSorter, Overlap: true},
		{Name: "sort runs busy", Duration: b.sortBusy, Edges: total, Overlap: true},
		{Name: "sort tail", Duration: t3.Sub(t1)},
		{Name: "ids", Duration: t4.Sub(t3)},
		{Name: "merge", Duration: ws.MergeTime, Edges: total},
		{Name: "write", Duration: t5.Sub(t4) - ws.MergeTime, Edges: total},
	}
	return &st, nil
}

// withDefaults returns o with its defaults filled in for input, or the
// error for a name or duplicate policy it cannot take.
func (o ImportOptions) withDefaults(input string) (ImportOptions, error) {
	if o.RunEdges <= 0 {
		o.RunEdges = defaultRunEdges
	}
	o.RunEdges = min(max(o.RunEdges, 2), 1<<30) // positions in a run are uint32
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.markEvery <= 0 {
		o.markEvery = defaultMarkEvery
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = 2 * time.Second
	}
	if o.Name == "" {
		o.Name = strings.TrimSuffix(filepath.Base(input), filepath.Ext(input))
	}
	if len(o.Name) > graph.MaxNameBytes {
		return o, fmt.Errorf("import %s: graph name is %d bytes, limit %d", input, len(o.Name), graph.MaxNameBytes)
	}
	if !o.Duplicates.Valid() {
		return o, fmt.Errorf("import %s: %v", input, o.Duplicates)
	}
	o.hashSeed = maphash.MakeSeed()
	if o.StringIDs && o.DenseIDs {
		return o, fmt.Errorf("import %s: string ids cannot be dense ids (drop --dense-ids or --id-type string)", input)
	}
	return o, nil
}

// cols are the optional fields the import's runs carry.
func (o ImportOptions) cols() extsort.Cols {
	return extsort.Cols{Weighted: o.Weighted, Labelled: o.Labelled, Timed: o.timed}
}

// wantIDSets says whether each run keeps the sorted set of int64 ids it
// mentions: with an int64 id map. Dense ids need none, and string runs
// keep their strings instead.
func (o ImportOptions) wantIDSets() bool { return !o.DenseIDs && !o.StringIDs }

// vertexIDs returns the sorted external ids of the runs (nil with dense
// or string ids) and the vertex count.
func vertexIDs(ctx context.Context, b *runBuilder, runs []extsort.Run, strs *extsort.StringTable) (ids []int64, n int, err error) {
	switch {
	case strs != nil:
		n = len(strs.Offs) - 1
	case b.o.DenseIDs:
		n = int(b.maxID + 1)
	default:
		if ids, err = extsort.MergeIDs(ctx, runs, b.o.Workers); err != nil {
			return nil, 0, err
		}
		if ids == nil {
			ids = []int64{} // an id map with no entries, as graph.FromEdges builds
		}
		n = len(ids)
	}
	if n > graph.MaxVertices {
		return nil, 0, fmt.Errorf("%d vertices exceeds the limit %d", n, graph.MaxVertices)
	}
	return ids, n, nil
}
