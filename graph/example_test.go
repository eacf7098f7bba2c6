package graph_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/walkstage/walkstage/graph"
)

// Generate a small R-MAT graph, save it and map it back.
func ExampleGenerateRMAT() {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 1, Undirected: true, Weighted: true, Name: "demo"})
	if err != nil {
		log.Fatal(err)
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "demo.wsg")
	if err := graph.Save(path, g); err != nil {
		log.Fatal(err)
	}
	loaded, err := graph.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	defer loaded.Close()
	fmt.Println(loaded.NumVertices(), loaded.NumEdges() == g.NumEdges(), loaded.Version == g.Version)
	// Output: 1024 true true
}

// Import a text edge list with external ids and look vertices up.
func ExampleImportTextReader() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "g.wsg")
	text := "# src dst weight\n1001 2002 0.5\n2002,3003,2\n3003 1001 1\n"
	st, err := graph.ImportTextReader(context.Background(), strings.NewReader(text), "edges.txt", out,
		graph.ImportOptions{Weighted: true, Undirected: true})
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
