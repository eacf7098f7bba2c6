// Package export writes a loaded graph back out as an edge list, text or
// Parquet, in external ids, with the import options (and the `walkstage
// graph import` flags) that read it back: importing the export with
// edgelist.ImportText or edgelist.ImportParquet rebuilds a file of the same
// Version, unless Stats.Exact says why not. It is the importer's inverse,
// so it knows the importer's options; it knows nothing of walks, Kafka or
// GPUs.
package export

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
)

// Format names an edge-list format that Write writes and the
// importers read back.
type Format string

const (
	// Text is edgelist.ImportText's format: one "src dst [weight] [label]
	// [time]" line per edge, after '#' comment lines that describe the
	// graph and the import command that rebuilds it.
	Text Format = "text"
	// Parquet is edgelist.ImportParquet's format: columns src and dst (INT64,
	// or strings for a graph with string ids), weight (FLOAT) when the
	// graph has weights, label (INT32) when it has labels, time (INT64)
	// when it is timed; the description is in the file's key-value
	// metadata.
	Parquet Format = "parquet"
)

// ParseFormat reads "text" or "parquet".
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case Text, Parquet:
		return f, nil
	}
	return "", fmt.Errorf("unknown export format %q (want text or parquet)", s)
}

// Stats say what Write wrote and how to import it back.
type Stats struct {
	Edges int64 // edge rows: every directed edge as stored
	// MarkerRows are self-loop rows standing for vertices without any edge,
	// which an edge list cannot otherwise hold: the importer drops
	// self-loops unless told to keep them, but keeps their vertices.
	MarkerRows int64
	// Import are the options that rebuild the graph from the export, and
	// ImportFlags the same as `walkstage graph import` flags.
	Import      edgelist.ImportOptions
	ImportFlags []string
	// Exact reports whether importing with Import yields the same graph
	// (the same Version); Inexact says why not when it does not.
	Exact   bool
	Inexact string
}

// Write writes g's edges as an edge list in external ids, with weights
// and labels when g has them, so that other tools can read the graph and
// edgelist.ImportText / ImportParquet with stats.Import rebuild it with the same
// Version. Every stored directed edge is one row, in CSR order (an
// undirected graph's edges appear in both directions and are imported as
// directed edges).
//
// The round trip is exact unless g has both self-loops and vertices
// without edges (the marker rows that keep such vertices would become
// edges), or g's id map is not in ascending order (the importers number
// vertices by external id); stats.Exact says which.
func Write(ctx context.Context, g *graph.Graph, w io.Writer, format Format) (*Stats, error) {
	st := planExport(g, format)
	var err error
	switch format {
	case Text:
		err = exportText(ctx, g, w, st)
	case Parquet:
		if g.Timed() || g.HasStringIDs() {
			err = exportParquetRows(ctx, g, w, st)
		} else {
			err = exportParquet(ctx, g, w, st)
		}
	default:
		_, err = ParseFormat(string(format))
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// WriteFile is Write to the file path, written to a temporary file in the
// same directory and renamed into place once complete.
func WriteFile(ctx context.Context, g *graph.Graph, path string, format Format) (*Stats, error) {
	var st *Stats
	err := graph.WriteFileAtomic(path, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		var err error
		if st, err = Write(ctx, g, bw, format); err != nil {
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
// row: with an id map (or string ids), every vertex no edge mentions; with
// dense ids, only
// the last one (the importer takes V from the largest id, so vertices below
// it exist anyway).
func planExport(g *graph.Graph, format Format) *Stats {
	o := edgelist.ImportOptions{Name: g.Name, Weighted: g.Weighted(), Labelled: g.Labelled(), Duplicates: graph.DupKeepAll,
		DenseIDs: g.IDs == nil && !g.HasStringIDs(), StringIDs: g.HasStringIDs()}
	if g.Timed() {
		// The time is the last column, or the column "time".
		if format == Parquet {
			o.TimeColumnName = "time"
		} else {
			o.TimeColumn = 3 + btoi(o.Weighted) + btoi(o.Labelled)
		}
	}
	st := &Stats{Edges: g.NumEdges(), Exact: true}
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
	if g.HasStringIDs() {
		for v := 1; v < n; v++ {
			if bytes.Compare(stringID(g, uint32(v-1)), stringID(g, uint32(v))) >= 0 {
				st.Exact, st.Inexact = false, "the graph's dense ids are not in string order; the import numbers vertices by string id"
				break
			}
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
	if g.IDs == nil && !g.HasStringIDs() {
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

func importFlags(o edgelist.ImportOptions) []string {
	var f []string
	for _, x := range []struct {
		on   bool
		flag string
	}{{o.Weighted, "--weighted"}, {o.Labelled, "--labelled"}, {o.SelfLoops, "--self-loops"}, {o.DenseIDs, "--dense-ids"}} {
		if x.on {
			f = append(f, x.flag)
		}
	}
	if o.StringIDs {
		f = append(f, "--id-type", "string")
	}
	if o.TimeColumn > 0 {
		f = append(f, "--time-column", strconv.Itoa(o.TimeColumn))
	}
	if o.TimeColumnName != "" {
		f = append(f, "--time-column", o.TimeColumnName)
	}
	return append(f, "--duplicates", o.Duplicates.String())
}

// stringID is vertex v's string id in a graph that has them.
func stringID(g *graph.Graph, v uint32) []byte { return g.StrBytes[g.StrOffsets[v]:g.StrOffsets[v+1]] }

// exportRowFunc takes one exported row in dense ids: a vertex without
// edges is a self-loop of weight 1, label 0 and time 0.
type exportRowFunc func(s, d uint32, w float32, l uint8, t int64) error

// forEachRow calls row for every exported row in dense-vertex order: a
// vertex's out-edges, or its marker self-loop. It checks ctx every 64 Ki
// vertices.
func forEachRow(ctx context.Context, g *graph.Graph, st *Stats, row exportRowFunc) error {
	n := g.NumVertices()
	var mentioned func(uint32) bool
	if st.MarkerRows > 0 {
		mentioned = isMentioned(g)
	}
	var times []int64 // a timed vertex's edge times in edge order
	for v := range n {
		if v%(1<<16) == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		s := uint32(v)
		if mentioned != nil && !mentioned(s) && (g.IDs != nil || g.HasStringIDs() || v == n-1) {
			if err := row(s, s, 1, 0, 0); err != nil {
				return err
			}
			continue
		}
		lo, hi := g.Offsets[v], g.Offsets[v+1]
		if g.Timed() {
			// times is in time order, bytime says which edge each is.
			times = slices.Grow(times[:0], int(hi-lo))[:hi-lo]
			for k, j := range g.ByTime[lo:hi] {
				times[j] = g.Times[lo+uint64(k)]
			}
		}
		for e := lo; e < hi; e++ {
			w, l, t := float32(1), uint8(0), int64(0)
			if g.Weights != nil {
				w = g.Weights[e]
			}
			if g.Labels != nil {
				l = g.Labels[e]
			}
			if times != nil {
				t = times[e-lo]
			}
			if err := row(s, g.Targets[e], w, l, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendID appends vertex v's external id as text.
func appendID(buf []byte, g *graph.Graph, v uint32) []byte {
	if g.HasStringIDs() {
		return append(buf, stringID(g, v)...)
	}
	return strconv.AppendInt(buf, g.ExternalID(v), 10)
}

// exportHeader describes the export in lines for a text header and
// Parquet metadata.
func exportHeader(g *graph.Graph, st *Stats, format Format) []string {
	cols := "src dst"
	if g.Weighted() {
		cols += " weight"
	}
	if g.Labelled() {
		cols += " label"
	}
	if g.Timed() {
		cols += " time"
	}
	ids := "external vertex ids"
	if g.HasStringIDs() {
		ids = "string vertex ids"
	}
	h := []string{
		fmt.Sprintf("walkstage graph export of %q, version %s: %d vertices, %d directed edges", g.Name, g.Version, g.NumVertices(), g.NumEdges()),
		"columns: " + cols + " (" + ids + ")",
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

func exportText(ctx context.Context, g *graph.Graph, w io.Writer, st *Stats) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	for _, l := range exportHeader(g, st, Text) {
		fmt.Fprintf(bw, "# %s\n", l)
	}
	buf := make([]byte, 0, 64)
	err := forEachRow(ctx, g, st, func(s, d uint32, wt float32, l uint8, t int64) error {
		buf = appendID(buf[:0], g, s)
		buf = append(buf, ' ')
		buf = appendID(buf, g, d)
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
		if g.Timed() {
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, t, 10)
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

// exportOptions are the Parquet writer's options: compression, row groups
// and the description in the key-value metadata.
func exportOptions(g *graph.Graph, st *Stats) []parquet.WriterOption {
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(1 << 20)}
	for i, l := range exportHeader(g, st, Parquet) {
		opts = append(opts, parquet.KeyValueMetadata(fmt.Sprintf("walkstage.export.%d", i), l))
	}
	return append(opts, parquet.KeyValueMetadata("walkstage.graph", g.Name), parquet.KeyValueMetadata("walkstage.graph_version", g.Version))
}

// exportParquetRows writes a timed graph or one with string ids: a schema
// built for its columns (src and dst as strings with string ids, time as
// INT64), rows written as values.
func exportParquetRows(ctx context.Context, g *graph.Graph, w io.Writer, st *Stats) error {
	idNode := parquet.Leaf(parquet.Int64Type)
	if g.HasStringIDs() {
		idNode = parquet.String()
	}
	fields := parquet.Group{"src": idNode, "dst": idNode}
	if g.Weighted() {
		fields["weight"] = parquet.Leaf(parquet.FloatType)
	}
	if g.Labelled() {
		fields["label"] = parquet.Leaf(parquet.Int32Type)
	}
	if g.Timed() {
		fields["time"] = parquet.Leaf(parquet.Int64Type)
	}
	schema := parquet.NewSchema("edge", fields)
	col := map[string]int{}
	for i, p := range schema.Columns() {
		col[p[0]] = i
	}
	pw := parquet.NewWriter(w, append(exportOptions(g, st), schema)...)
	id := func(v uint32, c int) parquet.Value {
		if g.HasStringIDs() {
			return parquet.ByteArrayValue(stringID(g, v)).Level(0, 0, c)
		}
		return parquet.Int64Value(g.ExternalID(v)).Level(0, 0, c)
	}
	rows := make([]parquet.Row, 0, 4096)
	flush := func() error {
		_, err := pw.WriteRows(rows)
		rows = rows[:0]
		return err
	}
	err := forEachRow(ctx, g, st, func(s, d uint32, wt float32, l uint8, t int64) error {
		r := make(parquet.Row, len(col))
		r[col["src"]], r[col["dst"]] = id(s, col["src"]), id(d, col["dst"])
		if c, ok := col["weight"]; ok {
			r[c] = parquet.FloatValue(wt).Level(0, 0, c)
		}
		if c, ok := col["label"]; ok {
			r[c] = parquet.Int32Value(int32(l)).Level(0, 0, c)
		}
		if c, ok := col["time"]; ok {
			r[c] = parquet.Int64Value(t).Level(0, 0, c)
		}
		if rows = append(rows, r); len(rows) == cap(rows) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if cerr := pw.Close(); err == nil {
		err = cerr
	}
	return err
}

func exportParquet(ctx context.Context, g *graph.Graph, w io.Writer, st *Stats) error {
	opts := exportOptions(g, st)
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
func writeRows[T any](ctx context.Context, g *graph.Graph, st *Stats, w io.Writer, opts []parquet.WriterOption,
	mk func(s, d int64, w float32, l uint8) T) error {
	pw := parquet.NewGenericWriter[T](w, opts...)
	buf := make([]T, 0, min(1<<16, max(1, g.NumEdges()+st.MarkerRows)))
	flush := func() error {
		_, err := pw.Write(buf)
		buf = buf[:0]
		return err
	}
	err := forEachRow(ctx, g, st, func(s, d uint32, wt float32, l uint8, _ int64) error {
		buf = append(buf, mk(g.ExternalID(s), g.ExternalID(d), wt, l))
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
