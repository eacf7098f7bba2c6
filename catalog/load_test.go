package catalog

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/internal/fakes3"
	"github.com/walkstage/walkstage/store"
)

func TestLoadGraphFromPathAndObjectURL(t *testing.T) {
	ctx := context.Background()
	path, version := graphFile(t, 8)
	bucketURL := fakes3.Bucket(t, "walks", nil)
	bucket, err := store.OpenBucket(ctx, bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "graphs/rmat.wsg", data, nil); err != nil {
		t.Fatal(err)
	}
	objURL := strings.Replace(bucketURL, "s3://walks?", "s3://walks/graphs/rmat.wsg?", 1)
	for _, loc := range []string{path, "file://" + path, objURL} {
		got, err := LoadGraph(ctx, loc, t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", loc, err)
		}
		if got.Version != version {
			t.Errorf("%s: loaded version %s, want %s", loc, got.Version, version)
		}
		got.Close()
	}
	if _, err := LoadGraph(ctx, strings.Replace(objURL, "rmat.wsg", "missing.wsg", 1), ""); err == nil {
		t.Error("a missing object loaded")
	}
}
