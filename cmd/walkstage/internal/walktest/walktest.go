// Package walktest holds what the command's tests share: the small graph
// that walkstage walk's tests and those of the commands reading its outputs
// walk.
package walktest

import (
	"path/filepath"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// TinyGraph saves a small weighted graph with sparse external ids (200
// vertices, ids 0, 10, ..., 1990; three edges each) under t's temporary
// directory and returns its path.
func TinyGraph(t testing.TB) string {
	t.Helper()
	var edges []graph.Edge
	for v := int64(0); v < 200; v++ {
		for _, d := range []int64{1, 7, 31} {
			edges = append(edges, graph.Edge{Src: 10 * v, Dst: 10 * ((v + d) % 200), Weight: float32(d)})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "tiny", Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.wsg")
	if err := graph.Save(path, g); err != nil {
		t.Fatal(err)
	}
	return path
}
