package sink

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/walkstage/walkstage/sink/output"
)

// TestManifestSeedsCurrent keeps the fuzz seed corpus in the current format
// by writing a real batch's manifest next to it when it is missing.
func TestManifestSeedsCurrent(t *testing.T) {
	g := testGraph(t)
	const n = 500
	chunks := runEngine(t, g, testAlgo, n, 3)
	b, _ := fileBucket(t)
	m := writeBatch(t, b, fpMeta("seed", n, "8f14e45fceea167a5a36dedd4bea2543"), g, chunks, WithRowGroupRows(100), WithFileBytes(1))
	data, err := b.ReadAll(context.Background(), "walks/kind=walks/graph=test%20graph%2F1/algorithm=node2vec/batch=seed/_SUCCESS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := output.DecodeManifest(data); err != nil {
		t.Fatalf("written manifest rejected: %v", err)
	}
	// Version 1 (node2vec-5parts.json) must keep decoding; the current
	// version's file is written when missing.
	if _, err := output.DecodeManifest(mustRead(t, "output/testdata/manifests/node2vec-5parts.json")); err != nil {
		t.Fatalf("version 1 manifest no longer decodes: %v", err)
	}
	p := "output/testdata/manifests/node2vec-5parts-v2.json"
	if old, err := os.ReadFile(p); err == nil {
		if _, err := output.DecodeManifest(old); err != nil {
			t.Fatalf("%s no longer decodes: %v", p, err)
		}
		return
	}
	if len(m.Files) != 5 {
		t.Fatalf("%d parts", len(m.Files))
	}
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
