package graph_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

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
