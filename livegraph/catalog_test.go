package livegraph

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/graph"
)

// TestCompactPublishesThroughCatalog saves a compacted snapshot and
// publishes it in a graph catalog, as the stage's graph follower reads
// versions: the catalog's current version is the compacted graph.
func TestCompactPublishesThroughCatalog(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(4, 4))
	m, base := newModel(t, variants[1], 50, 300, rng)
	l, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := l.Apply(0, int64(i), m.randomRecord(rng)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := Compact(ctx, l.Publish())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "compacted.wsg")
	if err := graph.Save(file, g); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Open(ctx, "file://"+filepath.Join(dir, "catalog"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Publish(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := c.Current(ctx)
	if err != nil || cur.Version != g.Version || p.Version != g.Version {
		t.Fatalf("current %+v (%v), published %+v, want version %s", cur, err, p, g.Version)
	}
	loaded, err := c.Load(ctx, cur, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	if loaded.Checksum() != m.build(t, "base").Checksum() {
		t.Fatal("the catalog's version is not the graph rebuilt from the same edges")
	}
}
