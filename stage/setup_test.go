package stage

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestLoadGraphFromPathAndObjectURL(t *testing.T) {
	ctx := context.Background()
	path, g := testGraph(t, 8)
	outURL, bucket := startS3(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "graphs/rmat.wsg", data, nil); err != nil {
		t.Fatal(err)
	}
	objURL := strings.Replace(outURL, "s3://walks?", "s3://walks/graphs/rmat.wsg?", 1)
	for _, loc := range []string{path, "file://" + path, objURL} {
		got, err := LoadGraph(ctx, loc, t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if got.Version != g.Version || got.NumEdges() != g.NumEdges() {
			t.Errorf("%s: loaded version %s, want %s", loc, got.Version, g.Version)
		}
		got.Close()
	}
	if _, err := LoadGraph(ctx, strings.Replace(objURL, "rmat.wsg", "missing.wsg", 1), ""); err == nil {
		t.Error("a missing object loaded")
	}
}
