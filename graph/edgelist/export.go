package edgelist

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
)

// ExportFormat names an edge-list format that Export writes and the
// importers read back.
type ExportFormat string

const (
	// ExportText is ImportText's format: one "src dst [weight] [label]"
	// line per edge, after '#' comment lines that describe the graph and
	// the import command that rebuilds it.
	ExportText ExportFormat = "text"
	// ExportParquet is ImportParquet's format: columns src and dst (INT64),
	// weight (FLOAT) when the graph has weights, label (INT32) when it has
	// labels; the description is in the file's key-value metadata.
	ExportParquet ExportFormat = "parquet"
)

// ParseExportFormat reads "text" or "parquet".
func ParseExportFormat(s string) (ExportFormat, error) {
	switch f := ExportFormat(strings.ToLower(s)); f {
	case ExportText, ExportParquet:
		return f, nil
	}
	return "", fmt.Errorf("unknown export format %q (want text or parquet)", s)
}

// ExportStats say what Export wrote and how to import it back.
type ExportStats struct {
	Edges int64 // edge rows: every directed edge as stored
	// MarkerRows are self-loop rows standing for vertices without any edge,
	// which an edge list cannot otherwise hold: the importer drops
	// self-loops unless told to keep them, but keeps their vertices.
	MarkerRows int64
	// Import are the options that rebuild the graph from the export, and
	// ImportFlags the same as `walkstage graph import` flags.
	Import      ImportOptions
	ImportFlags []string
	// Exact reports whether importing with Import yields the same graph
	// (the same Version); Inexact says why not when it does not.
	Exact   bool
	Inexact string
}

// Export writes g's edges as an edge list in external ids, with weights
// and labels when g has them, so that other tools can read the graph and
// ImportText / ImportParquet with stats.Import rebuild it with the same
// Version. Every stored directed edge is one row, in CSR order (an
// undirected graph's edges appear in both directions and are imported as
// directed edges).
//
// The round trip is exact unless g has both self-loops and vertices
// without edges (the marker rows that keep such vertices would become
// edges), or g's id map is not in ascending order (the importers number
// vertices by external id); stats.Exact says which.
func Export(ctx context.Context, g *graph.Graph, w io.Writer, format ExportFormat) (*ExportStats, error) {
	st := planExport(g)
	var err error
	switch format {
	case ExportText:
		err = exportText(ctx, g, w, st)
	case ExportParquet:
		err = exportParquet(ctx, g, w, st)
	default:
		_, err = ParseExportFormat(string(format))
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// ExportFile is Export to the file path, written to a temporary file in the
// same directory and renamed into place once complete.
func ExportFile(ctx context.Context, g *graph.Graph, path string, format ExportFormat) (*ExportStats, error) {
	var st *ExportStats
	err := graph.WriteFileAtomic(path, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		var err error
		if st, err = Export(ctx, g, bw, format); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return nil, fmt.Errorf("export %s to %s: %w", g.Name, filepath.Clean(path), err)
	}
	return st, nil
}

// planExport decides the import options and which vertices need a marker
// row: with an id map, every vertex no edge mentions; with dense ids, only
// the last one (the importer takes V from the largest id, so vertices below
// it exist anyway).
func planExport(g *graph.Graph) *ExportStats {
	o := ImportOptions{Name: g.Name, Weighted: g.Weighted(), Labelled: g.Labelled(), Duplicates: graph.DupKeepAll,
		DenseIDs: g.IDs == nil}
	st := &ExportStats{Edges: g.NumEdges(), Exact: true}
	n := g.NumVertices()
	selfLoops := false
	for v := range n {
		if g.HasEdge(uint32(v), uint32(v)) {
			selfLoops = true
			break
		}
	}
	o.SelfLoops = selfLoops
	markers := exportMarkers(g)
	if markers > 0 && selfLoops {
		st.Exact, st.Inexact = false, fmt.Sprintf("the graph has self-loops and %d vertices without edges, which an edge list with self-loops cannot hold", markers)
	} else {
		st.MarkerRows = markers
	}
	for i := 1; i < len(g.IDs); i++ {
		if g.IDs[i] <= g.IDs[i-1] {
			st.Exact, st.Inexact = false, "the graph's dense ids are not in external-id order; the import numbers vertices by external id"
			break
		}
	}
	st.Import = o
	st.ImportFlags = importFlags(o)
	return st
}

// exportMarkers counts the vertices that need a marker row (see planExport).
func exportMarkers(g *graph.Graph) int64 {
	n := g.NumVertices()
	if n == 0 {
		return 0
	}
	mentioned := isMentioned(g)
	if g.IDs == nil {
		if mentioned(uint32(n - 1)) {
			return 0
		}
		return 1
	}
	var k int64
	for v := range n {
		if !mentioned(uint32(v)) {
			k++
		}
	}
	return k
}

// isMentioned reports whether a vertex has an out- or in-edge.
func isMentioned(g *graph.Graph) func(v uint32) bool {
	in := make([]uint64, (g.NumVertices()+63)/64)
	for _, t := range g.Targets {
		in[t/64] |= 1 << (t % 64)
	}
	return func(v uint32) bool { return g.Degree(v) > 0 || in[v/64]&(1<<(v%64)) != 0 }
}

func importFlags(o ImportOptions) []string {
	var f []string
	for _, x := range []struct {
		on   bool
		flag string
	}{{o.Weighted, "--weighted"}, {o.Labelled, "--labelled"}, {o.SelfLoops, "--self-loops"}, {o.DenseIDs, "--dense-ids"}} {
		if x.on {
			f = append(f, x.flag)
		}
	}
	return append(f, "--duplicates", o.Duplicates.String())
}

// forEachRow calls row for every exported row in dense-vertex order: a
// vertex's out-edges, or its marker self-loop. It checks ctx every 64 Ki
// vertices.
func forEachRow(ctx context.Context, g *graph.Graph, st *ExportStats, row func(s, d int64, w float32, l uint8) error) error {
	n := g.NumVertices()
	var mentioned func(uint32) bool
	if st.MarkerRows > 0 {
		mentioned = isMentioned(g)
	}
	for v := range n {
		if v%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		s := g.ExternalID(uint32(v))
		if mentioned != nil && !mentioned(uint32(v)) && (g.IDs != nil || v == n-1) {
			if err := row(s, s, 1, 0); err != nil {
				return err
			}
			continue
		}
		for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
			w, l := float32(1), uint8(0)
			if g.Weights != nil {
				w = g.Weights[e]
			}
			if g.Labels != nil {
				l = g.Labels[e]
			}
			if err := row(s, g.ExternalID(g.Targets[e]), w, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// exportHeader describes the export in lines for a text header and
// Parquet metadata.
func exportHeader(g *graph.Graph, st *ExportStats, format ExportFormat) []string {
	cols := "src dst"
	if g.Weighted() {
		cols += " weight"
	}
	if g.Labelled() {
		cols += " label"
	}
	h := []string{
		fmt.Sprintf("walkstage graph export of %q, version %s: %d vertices, %d directed edges", g.Name, g.Version, g.NumVertices(), g.NumEdges()),
		"columns: " + cols + " (external vertex ids)",
		fmt.Sprintf("rebuild: walkstage graph import --format %s %s --name %q FILE --out GRAPH.wsg", format, strings.Join(st.ImportFlags, " "), g.Name),
	}
	if st.MarkerRows > 0 {
		h = append(h, fmt.Sprintf("%d self-loop rows stand for vertices without edges; the import drops them and keeps the vertices", st.MarkerRows))
	}
	if !st.Exact {
		h = append(h, "not an exact copy: "+st.Inexact)
	}
	return h
}

func exportText(ctx context.Context, g *graph.Graph, w io.Writer, st *ExportStats) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	for _, l := range exportHeader(g, st, ExportText) {
		fmt.Fprintf(bw, "# %s\n", l)
	}
	buf := make([]byte, 0, 64)
	err := forEachRow(ctx, g, st, func(s, d int64, wt float32, l uint8) error {
		buf = strconv.AppendInt(buf[:0], s, 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, d, 10)
		if g.Weights != nil {
			// The shortest text that parses back (at 32 bits, as ImportText
			// does) to the same float32.
			buf = append(buf, ' ')
			buf = strconv.AppendFloat(buf, float64(wt), 'g', -1, 32)
		}
		if g.Labels != nil {
			buf = append(buf, ' ')
			buf = strconv.AppendUint(buf, uint64(l), 10)
		}
		buf = append(buf, '\n')
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// Row types of the Parquet export, one per combination of columns.
type (
	exportRow struct {
		Src int64 `parquet:"src"`
		Dst int64 `parquet:"dst"`
	}
	exportRowW struct {
		Src    int64   `parquet:"src"`
		Dst    int64   `parquet:"dst"`
		Weight float32 `parquet:"weight"`
	}
	exportRowL struct {
		Src   int64 `parquet:"src"`
		Dst   int64 `parquet:"dst"`
		Label int32 `parquet:"label"`
	}
	exportRowWL struct {
		Src    int64   `parquet:"src"`
		Dst    int64   `parquet:"dst"`
		Weight float32 `parquet:"weight"`
		Label  int32   `parquet:"label"`
	}
)

func exportParquet(ctx context.Context, g *graph.Graph, w io.Writer, st *ExportStats) error {
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(1 << 20)}
	for i, l := range exportHeader(g, st, ExportParquet) {
		opts = append(opts, parquet.KeyValueMetadata(fmt.Sprintf("walkstage.export.%d", i), l))
	}
	opts = append(opts, parquet.KeyValueMetadata("walkstage.graph", g.Name), parquet.KeyValueMetadata("walkstage.graph_version", g.Version))
	switch {
	case g.Weighted() && g.Labelled():
		return writeRows(ctx, g, st, w, opts, func(s, d int64, wt float32, l uint8) exportRowWL {
			return exportRowWL{s, d, wt, int32(l)}
		})
	case g.Weighted():
		return writeRows(ctx, g, st, w, opts, func(s, d int64, wt float32, _ uint8) exportRowW { return exportRowW{s, d, wt} })
	case g.Labelled():
		return writeRows(ctx, g, st, w, opts, func(s, d int64, _ float32, l uint8) exportRowL { return exportRowL{s, d, int32(l)} })
	}
	return writeRows(ctx, g, st, w, opts, func(s, d int64, _ float32, _ uint8) exportRow { return exportRow{s, d} })
}

// writeRows streams the rows through a buffer of 64 Ki rows.
func writeRows[T any](ctx context.Context, g *graph.Graph, st *ExportStats, w io.Writer, opts []parquet.WriterOption,
	mk func(s, d int64, w float32, l uint8) T) error {
	pw := parquet.NewGenericWriter[T](w, opts...)
	buf := make([]T, 0, min(1<<16, max(1, g.NumEdges()+st.MarkerRows)))
	flush := func() error {
		_, err := pw.Write(buf)
		buf = buf[:0]
		return err
	}
	err := forEachRow(ctx, g, st, func(s, d int64, wt float32, l uint8) error {
		buf = append(buf, mk(s, d, wt, l))
		if len(buf) == cap(buf) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		pw.Close()
		return err
	}
	return pw.Close()
}
