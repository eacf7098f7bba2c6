package edgelist

import (
	"context"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// FuzzTextImport feeds arbitrary text to the text importer. It must never
// panic, and whatever it accepts must equal what FromEdges builds from a
// plain reference parse of the same text.
func FuzzTextImport(f *testing.F) {
	f.Add("# c\n1 2\n2,3\n3 1\n", uint8(0))
	f.Add("1 2 0.5 1\n1 2 2 0\n5 5 1 0\n-3 9223372036854775807 1e-3 2\n", uint8(1|2|4|8))
	f.Add("% mm\n\n 7\t8 ,\r\n8 7\n", uint8(4|16))
	f.Add("1 2 3\n", uint8(1))
	f.Add("0 1\n1 0\n0 1\n", uint8(32+64))
	f.Fuzz(func(t *testing.T, text string, flags uint8) {
		o := ImportOptions{Name: "f", Weighted: flags&1 != 0, Labelled: flags&2 != 0, Undirected: flags&4 != 0,
			SelfLoops: flags&8 != 0, DenseIDs: flags&16 != 0, Duplicates: graph.DuplicatePolicy(flags >> 5 & 3), RunEdges: 3 + int(flags>>7)*100}
		out := filepath.Join(t.TempDir(), "g.wsg")
		st, err := ImportTextReader(context.Background(), strings.NewReader(text), "fuzz.txt", out, o)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "import fuzz.txt") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		g, err := graph.LoadWith(out, graph.LoadOptions{VerifyChecksum: true})
		if err != nil {
			t.Fatalf("import wrote a file Load rejects: %v", err)
		}
		defer g.Close()
		edges, ok := referenceParse(text, o)
		if !ok {
			t.Fatalf("import accepted text the reference parser rejects")
		}
		want, err := graph.FromEdges(edges, buildOpts(o))
		if err != nil {
			t.Fatalf("import accepted edges FromEdges rejects: %v", err)
		}
		sameGraph(t, g, want)
		if st.Edges != g.NumEdges() {
			t.Fatalf("stats say %d edges, file has %d", st.Edges, g.NumEdges())
		}
	})
}

func referenceParse(text string, o ImportOptions) ([]graph.Edge, bool) {
	var edges []graph.Edge
	for _, line := range strings.Split(text, "\n") {
		f := strings.FieldsFunc(line, func(r rune) bool { return r < 0x80 && isSep(byte(r)) })
		if len(f) == 0 || f[0][0] == '#' || f[0][0] == '%' {
			continue
		}
		if len(f) != 2+btoi(o.Weighted)+btoi(o.Labelled) {
			return nil, false
		}
		s, err1 := strconv.ParseInt(f[0], 10, 64)
		d, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		e := graph.Edge{Src: s, Dst: d, Weight: 1}
		i := 2
		if o.Weighted {
			w, err := strconv.ParseFloat(f[i], 32)
			if err != nil || !(w > 0) || w > math.MaxFloat32 {
				return nil, false
			}
			e.Weight = float32(w)
			i++
		}
		if o.Labelled {
			l, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || l < 0 || l > 255 {
				return nil, false
			}
			e.Label = uint8(l)
		}
		edges = append(edges, e)
	}
	return edges, true
}

// FuzzTextImportStringIDs is FuzzTextImport for string ids, with and
// without a time column: whatever the importer accepts must equal what
// FromStringEdges builds from a plain parse, and its errors name the input.
func FuzzTextImportStringIDs(f *testing.F) {
	f.Add("a b\nb,c\n日本 a\n", uint8(0))
	f.Add("user:1 user:10 5\nuser:10 user:1 5\nuser:1 user:10 5\nx x 0\n", uint8(1|2))
	f.Add("a b -9223372036854775808\na b 9223372036854775807\n", uint8(1|4|8))
	f.Add("a \xff\n", uint8(0))
	f.Fuzz(func(t *testing.T, text string, flags uint8) {
		o := ImportOptions{Name: "f", StringIDs: true, Undirected: flags&2 != 0, SelfLoops: flags&4 != 0,
			Duplicates: graph.DuplicatePolicy(flags >> 3 & 3), RunEdges: 3 + int(flags>>5)*50}
		if flags&1 != 0 {
			o.TimeColumn = 3
		}
		out := filepath.Join(t.TempDir(), "g.wsg")
		st, err := ImportTextReader(context.Background(), strings.NewReader(text), "fuzz.txt", out, o)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "import fuzz.txt") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		g, err := graph.LoadWith(out, graph.LoadOptions{VerifyChecksum: true})
		if err != nil {
			t.Fatalf("import wrote a file Load rejects: %v", err)
		}
		defer g.Close()
		var edges []graph.StringEdge
		for _, line := range strings.Split(text, "\n") {
			fs := strings.FieldsFunc(line, func(r rune) bool { return r < 0x80 && isSep(byte(r)) })
			if len(fs) == 0 || fs[0][0] == '#' || fs[0][0] == '%' {
				continue
			}
			if len(fs) != 2+btoi(o.TimeColumn > 0) {
				t.Fatalf("import accepted line %q", line)
			}
			e := graph.StringEdge{Src: fs[0], Dst: fs[1], Weight: 1}
			if o.TimeColumn > 0 {
				if e.Time, err = strconv.ParseInt(fs[2], 10, 64); err != nil {
					t.Fatalf("import accepted time %q", fs[2])
				}
			}
			edges = append(edges, e)
		}
		b := buildOpts(o)
		b.Timed = o.TimeColumn > 0
		want, err := graph.FromStringEdges(edges, b)
		if err != nil {
			t.Fatalf("import accepted edges FromStringEdges rejects: %v", err)
		}
		sameGraph(t, g, want)
		if st.Edges != g.NumEdges() {
			t.Fatalf("stats say %d edges, file has %d", st.Edges, g.NumEdges())
		}
	})
}
