package edgelist

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// maxLineBytes bounds one text line; longer lines are an error, not a
// reason to grow the buffer without limit.
const maxLineBytes = 1 << 20

// ImportText imports a SNAP-style text edge list into the graph file out.
//
// One edge per line: "src dst [weight] [label]", fields separated by
// whitespace and/or commas; the weight column is read when o.Weighted, the
// label column (after the weight, if any) when o.Labelled, and any other
// column count is an error. Lines starting with '#' or '%' and blank lines
// are skipped; in a Matrix Market file (first line "%%MatrixMarket") the
// size line after the comments is skipped too. A path ending in .gz is
// decompressed; "-" reads stdin.
// Errors name the file and line.
func ImportText(ctx context.Context, in, out string, o ImportOptions) (*ImportStats, error) {
	var r io.Reader = os.Stdin
	var size int64
	if in != "-" {
		f, err := os.Open(in)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", in, err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		r = f
	}
	return importText(ctx, r, in, size, out, o)
}

// ImportTextReader is ImportText reading from r; name is used in messages
// and as the default graph name.
func ImportTextReader(ctx context.Context, r io.Reader, name, out string, o ImportOptions) (*ImportStats, error) {
	return importText(ctx, r, name, 0, out, o)
}

func importText(ctx context.Context, r io.Reader, name string, size int64, out string, o ImportOptions) (*ImportStats, error) {
	cr := &countingReader{r: r}
	r = cr
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(bufio.NewReaderSize(cr, 1<<20))
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", name, err)
		}
		defer zr.Close()
		r = zr
	}
	if o.TimeColumn != 0 {
		// The time column is one of the line's columns after dst.
		if want := 3 + btoi(o.Weighted) + btoi(o.Labelled); o.TimeColumn < 3 || o.TimeColumn > want {
			return nil, fmt.Errorf("import %s: time column %d: want a column from 3 to %d (after src and dst, among %s)", name, o.TimeColumn, want, columnNames(o))
		}
		o.timed = true
	}
	if o.Name == "" && name == "-" {
		o.Name = "stdin"
	}
	if o.Name == "" {
		o.Name = strings.TrimSuffix(strings.TrimSuffix(baseName(name), ".gz"), extOf(strings.TrimSuffix(baseName(name), ".gz")))
	}
	return importInto(ctx, name, out, o, size, func(b *runBuilder) error {
		return readText(r, name, b, cr)
	})
}

// splitFields splits a line on whitespace and commas into at most
// len(out) fields; extra reports more fields than that.
func splitFields(line []byte, out [][]byte) (n int, extra bool) {
	i := 0
	for {
		for i < len(line) && isSep(line[i]) {
			i++
		}
		if i == len(line) {
			return n, false
		}
		j := i
		for j < len(line) && !isSep(line[j]) {
			j++
		}
		if n == len(out) {
			return n, true
		}
		out[n] = line[i:j]
		n++
		i = j
	}
}

func isSep(c byte) bool { return sepBytes[c] }

// sepBytes marks the field separators: a table lookup is one load where
// seven comparisons were a chain of branches, in the parser's inner loop.
var sepBytes = [256]bool{' ': true, '\t': true, ',': true, '\n': true, '\r': true, '\v': true, '\f': true}

func countFields(line []byte) string {
	n := len(bytes.FieldsFunc(line, func(r rune) bool { return r < 0x80 && isSep(byte(r)) }))
	if n == 1 {
		return "1 field"
	}
	return fmt.Sprintf("%d fields", n)
}

func columnNames(o ImportOptions) string {
	cols := []string{"src", "dst"}
	if o.Weighted {
		cols = append(cols, "weight")
	}
	if o.Labelled {
		cols = append(cols, "label")
	}
	if o.TimeColumn > 0 && o.TimeColumn <= len(cols)+1 {
		cols = slices.Insert(cols, o.TimeColumn-1, "time")
	}
	return strings.Join(cols, " ")
}

func columnHint(got, want int, firstLine bool) string {
	switch {
	case got > want:
		return "; pass --weighted or --labelled to read more columns"
	case firstLine:
		return "; a header line must start with #"
	}
	return ""
}

// parseID parses a decimal int64 without allocating.
func parseID(b []byte) (int64, error) {
	if len(b) == 0 {
		return 0, strconv.ErrSyntax
	}
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, strconv.ErrSyntax
	}
	var x uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, strconv.ErrSyntax
		}
		x = x*10 + uint64(c-'0')
	}
	if neg {
		if x > 1<<63 {
			return 0, strconv.ErrRange
		}
		return -int64(x), nil
	}
	if x > math.MaxInt64 {
		return 0, strconv.ErrRange
	}
	return int64(x), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

func extOf(p string) string {
	if i := strings.LastIndexByte(p, '.'); i > 0 {
		return p[i:]
	}
	return ""
}
