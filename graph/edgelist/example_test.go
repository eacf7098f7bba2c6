package edgelist_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
)

// Import a text edge list with external ids and look vertices up.
func ExampleImportTextReader() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "g.wsg")
	text := "# src dst weight\n1001 2002 0.5\n2002,3003,2\n3003 1001 1\n"
	st, err := edgelist.ImportTextReader(context.Background(), strings.NewReader(text), "edges.txt", out,
		edgelist.ImportOptions{Weighted: true, Undirected: true})
	if err != nil {
		log.Fatal(err)
	}
	g, err := graph.Load(out)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	v, _ := g.DenseID(2002)
	for _, u := range g.Neighbors(v) {
		fmt.Print(g.ExternalID(u), " ")
	}
	fmt.Println(st.Vertices, st.Edges)
	// Output: 1001 3003 3 6
}
