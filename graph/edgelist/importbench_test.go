package edgelist_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
	"github.com/walkstage/walkstage/graph/edgelist/export"
)

// BenchmarkImport imports an exported R-MAT graph (scale 18, about 8 M
// directed edges in CSR order) from Parquet and from text, with 1 decoder
// and with one per core, and reports input edges/s. For the figures in the
// README use `walkstage graph import` on a scale-20 export.
func BenchmarkImport(b *testing.B) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 18, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true, Labels: 5})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for _, f := range []export.Format{export.Parquet, export.Text} {
		in := filepath.Join(dir, "edges."+string(f))
		st, err := export.WriteFile(context.Background(), g, in, f)
		if err != nil {
			b.Fatal(err)
		}
		for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("%s/workers=%d", f, workers), func(b *testing.B) {
				o := st.Import
				o.Workers = workers
				out := filepath.Join(dir, "g.wsg")
				var edges int64
				for b.Loop() {
					var ist *edgelist.ImportStats
					if f == export.Parquet {
						ist, err = edgelist.ImportParquet(context.Background(), in, out, o)
					} else {
						ist, err = edgelist.ImportText(context.Background(), in, out, o)
					}
					if err != nil {
						b.Fatal(err)
					}
					edges = ist.InputEdges
				}
				b.ReportMetric(float64(edges)*float64(b.N)/b.Elapsed().Seconds(), "edges/s")
			})
		}
	}
}
