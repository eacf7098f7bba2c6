package edgelist

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// The final merge in parts must write the bytes of one serial merge: these
// tests import the same inputs with one part and with many and compare the
// files byte for byte.

// mergeInput is a text edge list with duplicates, self-loops and a hub
// vertex; with dense false its ids are scattered over int64.
func mergeInput(dense bool, n int) string {
	rng := rand.New(rand.NewPCG(21, 22))
	var sb strings.Builder
	for i := 0; i < n; i++ {
		s, d := rng.Int64N(3000), rng.Int64N(3000)
		switch {
		case i%11 == 0:
			s = 1234 // a hub, so a part boundary can fall amid one source's records
		case i%13 == 0:
			d = s // a self-loop
		case i%5 == 0 && i > 0:
			s, d = s%40, d%40 // many duplicates
		}
		if !dense {
			s, d = s*1_000_003-7_000_000, d*1_000_003-7_000_000
			if i%17 == 0 {
				s = rng.Int64() // far-apart ids exercise the id index
			}
		}
		fmt.Fprintf(&sb, "%d %d %d %d\n", s, d, rng.IntN(8)+1, rng.IntN(5))
	}
	return sb.String()
}

func TestImportMergePartsSameBytes(t *testing.T) {
	inputs := map[string]string{"dense": mergeInput(true, 30000), "ids": mergeInput(false, 30000)}
	dir := t.TempDir()
	for name, text := range inputs {
		in := filepath.Join(dir, name+".txt")
		if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, dup := range []graph.DuplicatePolicy{graph.DupKeepAll, graph.DupKeepFirst, graph.DupSumWeights, graph.DupError} {
			for _, shape := range []struct {
				undirected, selfLoops bool
				fan                   int
			}{{false, false, 0}, {true, false, 0}, {false, true, 4}, {true, true, 4}} {
				o := ImportOptions{Name: "m", Weighted: true, Labelled: true, DenseIDs: name == "dense", Duplicates: dup,
					Undirected: shape.undirected, SelfLoops: shape.selfLoops, mergeFan: shape.fan, RunEdges: 5000, markEvery: 64}
				t.Run(fmt.Sprintf("%s/%v/undirected=%v/selfloops=%v/fan=%d", name, dup, shape.undirected, shape.selfLoops, shape.fan), func(t *testing.T) {
					var outs [][]byte
					var stats []*ImportStats
					var errs []string
					for _, parts := range []int{1, 7, 40} {
						o := o
						o.mergeParts, o.Workers = parts, min(parts, 3)
						out := filepath.Join(t.TempDir(), "g.wsg")
						st, err := ImportText(context.Background(), in, out, o)
						if err != nil {
							msg := err.Error()
							errs = append(errs, msg[strings.LastIndex(msg, ".wsg: ")+1:]) // the paths differ
							continue
						}
						if parts > 1 && st.mergeParts < 4 {
							t.Fatalf("%d parts asked, %d used", parts, st.mergeParts)
						}
						b, err := os.ReadFile(out)
						if err != nil {
							t.Fatal(err)
						}
						outs, stats = append(outs, b), append(stats, st)
					}
					if dup == graph.DupError {
						if len(errs) != 3 || errs[1] != errs[0] || errs[2] != errs[0] {
							t.Fatalf("errors differ between part counts: %q", errs)
						}
						return
					}
					if len(errs) > 0 {
						t.Fatal(errs)
					}
					for k := 1; k < len(outs); k++ {
						if !bytes.Equal(outs[k], outs[0]) {
							t.Fatalf("output %d (%d bytes) differs from the one-part output (%d bytes)", k, len(outs[k]), len(outs[0]))
						}
						if stats[k].Duplicates != stats[0].Duplicates || stats[k].Edges != stats[0].Edges {
							t.Fatalf("stats %d: %+v, one part: %+v", k, stats[k], stats[0])
						}
					}
				})
			}
		}
	}
}

// TestImportMergePartsEmpty imports inputs with no edge left after
// self-loops are dropped, in many parts.
func TestImportMergePartsEmpty(t *testing.T) {
	for _, text := range []string{"", "5 5\n7 7\n"} {
		var outs [][]byte
		for _, parts := range []int{1, 5} {
			o := ImportOptions{Name: "e", mergeParts: parts, Workers: 2, RunEdges: 2}
			out := filepath.Join(t.TempDir(), "g.wsg")
			if _, err := ImportTextReader(context.Background(), strings.NewReader(text), "in", out, o); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, b)
		}
		if !bytes.Equal(outs[0], outs[1]) {
			t.Fatalf("%q: outputs differ", text)
		}
	}
}

// TestImportMergePartsFirstDuplicate wants the duplicate a serial merge
// meets first reported, though a later part may meet its own first.
func TestImportMergePartsFirstDuplicate(t *testing.T) {
	var sb strings.Builder
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&sb, "%d %d\n", i, i+1)
		if i == 15000 || i == 3000 {
			fmt.Fprintf(&sb, "%d %d\n", i, i+1)
		}
	}
	for _, parts := range []int{1, 8} {
		o := ImportOptions{Name: "d", DenseIDs: true, Duplicates: graph.DupError, mergeParts: parts, Workers: 4, RunEdges: 3000, markEvery: 64}
		out := filepath.Join(t.TempDir(), "g.wsg")
		_, err := ImportTextReader(context.Background(), strings.NewReader(sb.String()), "in", out, o)
		if err == nil || !strings.Contains(err.Error(), "duplicate edge 3000 -> 3001") {
			t.Fatalf("%d parts: %v", parts, err)
		}
	}
}
