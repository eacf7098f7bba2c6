package graph

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/parquet-go/parquet-go"
)

// ImportParquet imports a Parquet edge list into the graph file out.
//
// Columns are found by name: src and dst (INT32 or INT64, required), weight
// (FLOAT or DOUBLE, read when o.Weighted) and label (INT32 or INT64 in
// 0..255, read when o.Labelled). Other columns are ignored. Row groups are
// streamed column by column in lockstep, so memory does not grow with the
// file; edges go through the same external sort as ImportText. Errors name
// the file, row group and row.
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
	cols := []string{"src", "dst"}
	if o.Weighted {
		cols = append(cols, "weight")
	}
	if o.Labelled {
		cols = append(cols, "label")
	}
	idx := make([]int, len(cols))
	for i, name := range cols {
		leaf, ok := pf.Schema().Lookup(name)
		if !ok {
			return nil, fmt.Errorf("import %s: no column %q (have %s)", in, name, columnList(pf.Schema()))
		}
		if leaf.MaxRepetitionLevel > 0 {
			return nil, fmt.Errorf("import %s: column %q is repeated, want one value a row", in, name)
		}
		kind := leaf.Node.Type().Kind()
		okKind := kind == parquet.Int32 || kind == parquet.Int64
		if name == "weight" {
			okKind = kind == parquet.Float || kind == parquet.Double
		}
		if !okKind {
			return nil, fmt.Errorf("import %s: column %q has type %v, want %s", in, name, kind, wantKind(name))
		}
		idx[i] = leaf.ColumnIndex
	}
	if o.Name == "" {
		o.Name = baseName(in)
		o.Name = o.Name[:len(o.Name)-len(extOf(o.Name))]
	}
	total := pf.NumRows()
	return importInto(ctx, in, out, o, st.Size(), func(b *runBuilder) error {
		var done int64
		for gi, rg := range pf.RowGroups() {
			if err := readRowGroup(rg, gi, idx, cols, o, b); err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				return fmt.Errorf("import %s: %w", in, err)
			}
			done += rg.NumRows()
			if total > 0 {
				// Progress in bytes is estimated from rows: Parquet pages
				// are compressed, so exact bytes read are not meaningful.
				b.bytes = int64(float64(st.Size()) * float64(done) / float64(total))
			}
		}
		b.bytes = st.Size()
		return nil
	})
}

func wantKind(col string) string {
	if col == "weight" {
		return "FLOAT or DOUBLE"
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

// colReader reads one column chunk's values across page boundaries.
type colReader struct {
	pages parquet.Pages
	page  parquet.Page
	vals  parquet.ValueReader
}

func (c *colReader) close() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	if c.pages != nil {
		c.pages.Close()
	}
}

// read fills buf as far as it can; it returns io.EOF only with n == 0.
func (c *colReader) read(buf []parquet.Value) (int, error) {
	n := 0
	for n < len(buf) {
		if c.vals == nil {
			if c.page != nil {
				parquet.Release(c.page)
				c.page = nil
			}
			p, err := c.pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				return n, err
			}
			c.page, c.vals = p, p.Values()
		}
		k, err := c.vals.ReadValues(buf[n:])
		n += k
		if err == io.EOF {
			c.vals = nil
			continue
		}
		if err != nil {
			return n, err
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func readRowGroup(rg parquet.RowGroup, gi int, idx []int, cols []string, o ImportOptions, b *runBuilder) error {
	chunks := rg.ColumnChunks()
	readers := make([]*colReader, len(idx))
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.close()
			}
		}
	}()
	for i, ci := range idx {
		readers[i] = &colReader{pages: chunks[ci].Pages()}
	}
	const batch = 4096
	bufs := make([][]parquet.Value, len(idx))
	for i := range bufs {
		bufs[i] = make([]parquet.Value, batch)
	}
	var row int64
	for {
		n := -1
		for i, r := range readers {
			k, err := r.read(bufs[i])
			if err == io.EOF {
				k = 0
			} else if err != nil {
				return fmt.Errorf("row group %d column %q near row %d: %w", gi, cols[i], row, err)
			}
			if n >= 0 && k != n {
				return fmt.Errorf("row group %d near row %d: columns %q and %q have different lengths", gi, row, cols[0], cols[i])
			}
			n = k
		}
		if n == 0 {
			return nil
		}
		for j := 0; j < n; j++ {
			if err := addParquetEdge(b, bufs, j, o, cols); err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				return fmt.Errorf("row group %d row %d: %w", gi, row+int64(j), err)
			}
		}
		row += int64(n)
	}
}

func addParquetEdge(b *runBuilder, bufs [][]parquet.Value, j int, o ImportOptions, cols []string) error {
	intOf := func(i int) (int64, error) {
		v := bufs[i][j]
		switch {
		case v.IsNull():
			return 0, fmt.Errorf("null %s", cols[i])
		case v.Kind() == parquet.Int32:
			return int64(v.Int32()), nil
		case v.Kind() == parquet.Int64:
			return v.Int64(), nil
		}
		return 0, fmt.Errorf("%s has type %v", cols[i], v.Kind())
	}
	s, err := intOf(0)
	if err != nil {
		return err
	}
	d, err := intOf(1)
	if err != nil {
		return err
	}
	w, l, i := float32(1), uint8(0), 2
	if o.Weighted {
		v := bufs[i][j]
		var x float64
		switch {
		case v.IsNull():
			return errors.New("null weight")
		case v.Kind() == parquet.Float:
			x = float64(v.Float())
		case v.Kind() == parquet.Double:
			x = v.Double()
		default:
			return fmt.Errorf("weight has type %v", v.Kind())
		}
		if !(x > 0) || x > math.MaxFloat32 {
			return fmt.Errorf("bad weight %v (want a finite number > 0)", x)
		}
		w = float32(x)
		i++
	}
	if o.Labelled {
		x, err := intOf(i)
		if err != nil {
			return err
		}
		if x < 0 || x > 255 {
			return fmt.Errorf("bad label %d (want an integer in [0, 255])", x)
		}
		l = uint8(x)
	}
	return b.add(s, d, w, l)
}
