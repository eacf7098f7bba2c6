package edgelist

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/parquet-go/parquet-go"
)

// ImportParquet imports a Parquet edge list into the graph file out.
//
// Columns are found by name: src and dst (INT32 or INT64, required;
// BYTE_ARRAY strings with o.StringIDs), weight (FLOAT or DOUBLE, read when
// o.Weighted), label (INT32 or INT64 in 0..255, read when o.Labelled) and
// the time column o.TimeColumnName (INT32 or INT64). Other columns are
// ignored. Row groups are
// decoded in parallel (o.Workers), each streamed column by column in
// lockstep, batchRows rows at a time, so memory does not grow with the file
// or its row groups; a file with fewer row groups than twice the workers
// is read in row ranges of its row groups (pqParts). The edges reach the
// same external sort as ImportText in file order. Errors name the file,
// row group and row.
func ImportParquet(ctx context.Context, in, out string, o ImportOptions) (*ImportStats, error) {
	f, err := os.Open(in)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", in, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", in, err)
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true), parquet.ReadBufferSize(1<<20))
	if err != nil {
		return nil, fmt.Errorf("import %s: not a readable Parquet file: %w", in, err)
	}
	cols, err := parquetColumns(pf.Schema(), o)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", in, err)
	}
	o.timed = o.TimeColumnName != ""
	if o.Name == "" {
		o.Name = baseName(in)
		o.Name = o.Name[:len(o.Name)-len(extOf(o.Name))]
	}
	return importInto(ctx, in, out, o, st.Size(), func(b *runBuilder) error {
		return readParquet(pf, cols, in, st.Size(), b)
	})
}

// pqCol is a column the importer reads: its name, its leaf index in the
// file, its physical type and its maximum definition level (1 when
// optional: rows below it are null).
type pqCol struct {
	name   string
	index  int
	kind   parquet.Kind
	maxDef byte
}

// parquetColumns finds src, dst and, as o asks, weight and label in s.
func parquetColumns(s *parquet.Schema, o ImportOptions) ([]pqCol, error) {
	names := []string{"src", "dst"}
	if o.Weighted {
		names = append(names, "weight")
	}
	if o.Labelled {
		names = append(names, "label")
	}
	if o.TimeColumnName != "" {
		if slices.Contains(names, o.TimeColumnName) {
			return nil, fmt.Errorf("time column %q is also the %s column", o.TimeColumnName, o.TimeColumnName)
		}
		names = append(names, o.TimeColumnName)
	}
	cols := make([]pqCol, len(names))
	for i, name := range names {
		leaf, ok := s.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("no column %q (have %s)", name, columnList(s))
		}
		if leaf.MaxRepetitionLevel > 0 {
			return nil, fmt.Errorf("column %q is repeated, want one value a row", name)
		}
		kind := leaf.Node.Type().Kind()
		okKind := kind == parquet.Int32 || kind == parquet.Int64
		isTime := o.TimeColumnName != "" && i == len(names)-1
		switch {
		case isTime:
		case name == "weight":
			okKind = kind == parquet.Float || kind == parquet.Double
		case i < 2 && o.StringIDs:
			okKind = kind == parquet.ByteArray
		}
		if !okKind {
			return nil, fmt.Errorf("column %q has type %v, want %s", name, kind, wantKind(name, i, isTime, o))
		}
		cols[i] = pqCol{name: name, index: leaf.ColumnIndex, kind: kind, maxDef: byte(leaf.MaxDefinitionLevel)}
	}
	return cols, nil
}

// readParquet decodes the row groups of pf on b.o.Workers goroutines and
// adds their edges to b in file order.
func readParquet(pf *parquet.File, cols []pqCol, in string, size int64, b *runBuilder) error {
	var pool batchPool
	d := &pqDecoder{cols: cols, o: b.o, pool: &pool, rows: b.o.batchRows}
	if d.rows <= 0 {
		d.rows = defaultBatchRows
	}
	total := pf.NumRows()
	b.groups = len(pf.RowGroups())
	parts := pqParts(pf.RowGroups(), cols, b.o.Workers, d.rows)
	d.columnsAtOnce = len(parts) < b.o.Workers
	// A decoder queues all of its part's batches (up to maxPartDepth: a
	// row group without an offset index is not cut), so it never waits on
	// the committer mid-part.
	depth := partDepth
	for _, p := range parts {
		rows := p.to - p.from
		if p.to < 0 {
			rows = p.rg.NumRows() - p.from
		}
		depth = max(depth, int(min((rows+int64(d.rows)-1)/int64(d.rows), maxPartDepth)))
	}
	var done int64
	err := decodeOrdered(b.o.Workers, depth, &pool,
		func(send func(pqPart) bool) error {
			for _, p := range parts {
				if !send(p) {
					break
				}
			}
			return nil
		},
		d.decode,
		func(e *edgeBatch) error {
			b.group = e.part
			if err := b.addBatch(e); err != nil {
				return err
			}
			if done += int64(len(e.src)); total > 0 {
				// Progress in bytes is estimated from rows: Parquet pages
				// are compressed, so exact bytes read are not meaningful.
				b.bytes = int64(float64(size) * float64(done) / float64(total))
			}
			if e.err != nil {
				return fmt.Errorf("import %s: %w", in, e.err)
			}
			return nil
		})
	if err == nil {
		b.bytes = size
	}
	return err
}

// pqParts cuts the row groups into the parts the decoders take: row
// ranges of at most maxPartDepth batches, so that a decoder can queue its
// whole part (see decodeOrdered) with bounded memory, and, when there are
// fewer row groups than twice the workers, ranges of at least two batches
// making about 2 x workers parts in all, so that a file of a few large row
// groups still keeps every decoder busy. A part starts at its first row by
// the offset index (a seek to the page holding it); a row group whose
// columns lack one is not cut.
func pqParts(groups []parquet.RowGroup, cols []pqCol, workers, batchRows int) []pqPart {
	var parts []pqPart
	want := 2 * workers
	for gi, rg := range groups {
		n := rg.NumRows()
		most := int64(maxPartDepth * batchRows)
		k := (n + most - 1) / most
		if len(groups) < want {
			k = max(k, min(int64((want+len(groups)-1)/len(groups)), n/int64(2*batchRows)))
		}
		if k > 1 {
			chunks := rg.ColumnChunks()
			for _, c := range cols {
				if _, err := chunks[c.index].OffsetIndex(); err != nil {
					k = 1
					break
				}
			}
		}
		if k <= 1 {
			parts = append(parts, pqPart{gi: gi, rg: rg, to: -1})
			continue
		}
		for j := range k {
			p := pqPart{gi: gi, rg: rg, from: j * n / k, to: (j + 1) * n / k}
			if j == k-1 {
				p.to = -1 // the last part reads to the group's end, as an uncut group does
			}
			parts = append(parts, p)
		}
	}
	return parts
}

func wantKind(col string, i int, isTime bool, o ImportOptions) string {
	switch {
	case isTime:
		return "INT32 or INT64 (times)"
	case col == "weight":
		return "FLOAT or DOUBLE"
	case i < 2 && o.StringIDs:
		return "BYTE_ARRAY (string ids; --id-type string)"
	case i < 2:
		return "INT32 or INT64 (or BYTE_ARRAY with --id-type string)"
	}
	return "INT32 or INT64"
}

func columnList(s *parquet.Schema) string {
	var out string
	for i, p := range s.Columns() {
		if i > 0 {
			out += ", "
		}
		for j, n := range p {
			if j > 0 {
				out += "."
			}
			out += n
		}
	}
	return out
}
