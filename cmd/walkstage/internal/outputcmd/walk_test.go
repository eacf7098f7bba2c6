package outputcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/walkcmd"
	"github.com/walkstage/walkstage/graph"
)

// The outputs these tests read are written by walkstage walk, as a user's
// would be; walkTestGraph is walkcmd's test graph.

// walkTestGraph saves a small graph with sparse external ids.
func walkTestGraph(t *testing.T) string {
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

func runWalk(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := walkcmd.Command("dev")(context.Background(), args, &out, &errb)
	return out.String() + errb.String(), err
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
