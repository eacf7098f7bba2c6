package sink

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk"
)

// A PPR walks batch and a PPR visits batch of one graph, and a samples
// batch, land under kind=walks, kind=visits and kind=samples: a glob over
// one kind's directory finds parts of that kind's schema only, which
// DuckDB and Spark need to read a kind as one table.
func TestKindsHaveTheirOwnDirectories(t *testing.T) {
	b, root := fileBucket(t)
	g := testGraph(t)
	ppr := walk.Algorithm{Kind: walk.PPR, Length: 20, StopProb: 0.2}
	meta := fpMeta("w", 300, "fp-w")
	meta.Algorithm = ppr
	writeBatch(t, b, meta, g, runEngine(t, g, ppr, 300, 3))
	ids, res := countVisits(t, g, 40)
	writeVisits(t, b, visitMeta("v", 40), g, ids, res, 16)
	wg := weightedTestGraph(t)
	seeds, edges := runSample(t, wg, sampleParams, 20)
	writeSamples(t, b, sampleMeta("s", sampleParams, len(edges), false), wg, seeds, edges, 8)

	byKind := map[string]int{}
	err := filepath.WalkDir(filepath.Join(root, "walks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return err
		}
		var schemaKind string
		switch first := f.Schema().Fields()[0].Name(); first {
		case "walk_id":
			schemaKind = output.KindWalks
		case "query_id":
			schemaKind = output.KindVisits
		case "instance_id":
			schemaKind = output.KindSamples
		default:
			t.Errorf("%s: unknown schema starting with %s", p, first)
		}
		rel, _ := filepath.Rel(root, p)
		if want := "walks/kind=" + schemaKind + "/"; !strings.HasPrefix(filepath.ToSlash(rel), want) {
			t.Errorf("part %s of %s schema is not under %s", rel, schemaKind, want)
		}
		byKind[schemaKind]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{output.KindWalks, output.KindVisits, output.KindSamples} {
		if byKind[k] == 0 {
			t.Errorf("no %s part written", k)
		}
	}
}

// toEarlierLayout moves a batch written under kind=... to where versions
// before kinds wrote it ({prefix}/graph=...), manifest keys included, and
// returns the manifest's new key.
func toEarlierLayout(t *testing.T, b *blob.Bucket, m *output.Manifest, kind string) string {
	t.Helper()
	ctx := context.Background()
	l, err := m.Layout("walks")
	if err != nil {
		t.Fatal(err)
	}
	old := func(key string) string { return strings.Replace(key, "/kind="+kind+"/", "/", 1) }
	data, err := b.ReadAll(ctx, l.SuccessKey())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if err := b.Copy(ctx, old(f.Key), f.Key, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, f.Key); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, l.SuccessKey()); err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("/kind="+kind+"/"), []byte("/"))
	if err := b.WriteAll(ctx, old(l.SuccessKey()), data, nil); err != nil {
		t.Fatal(err)
	}
	return old(l.SuccessKey())
}

// A batch written before output kinds had directories of their own is
// still found by Lookup (a redelivery is answered from it, a different
// request is a conflict), and its manifest's Layout is where it is.
func TestLookupFindsEarlierLayout(t *testing.T) {
	g := testGraph(t)
	const n = 500
	chunks := runEngine(t, g, testAlgo, n, 9)
	ctx := context.Background()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			m := writeBatch(t, b, fpMeta("old", n, "fp"), g, chunks, WithRowGroupRows(200), WithFileBytes(1))
			key := toEarlierLayout(t, b, m, output.KindWalks)
			if !strings.HasPrefix(key, "walks/graph=") {
				t.Fatalf("moved to %s", key)
			}
			found, err := Lookup(ctx, b, "walks", "old", "fp")
			if err != nil || found == nil {
				t.Fatalf("Lookup = %v, %v; want the batch of the earlier layout", found, err)
			}
			l, err := found.Layout("walks")
			if err != nil || l.SuccessKey() != key {
				t.Fatalf("found manifest's layout %s, %v; want %s", l.SuccessKey(), err, key)
			}
			if _, err := Lookup(ctx, b, "walks", "old", "other"); !errors.Is(err, ErrBatchConflict) {
				t.Fatalf("Lookup with another fingerprint = %v, want ErrBatchConflict", err)
			}
		})
	}
}

// FindBatches finds a batch id's outputs under every kind and the earlier
// layout, fingerprint or not; DeleteBatch removes one, manifest and parts.
func TestFindAndDeleteBatches(t *testing.T) {
	g := testGraph(t)
	ctx := context.Background()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			old := writeBatch(t, b, fpMeta("x", 200, ""), g, runEngine(t, g, testAlgo, 200, 1), WithFileBytes(1))
			toEarlierLayout(t, b, old, output.KindWalks)
			ids, res := countVisits(t, g, 10)
			meta := visitMeta("x", 10)
			writeVisits(t, b, meta, g, ids, res, 4)
			found, err := output.FindBatches(ctx, b, "walks", "x")
			if err != nil || len(found) != 2 {
				t.Fatalf("FindBatches = %d manifests, %v; want 2", len(found), err)
			}
			for _, m := range found {
				if err := output.DeleteBatch(ctx, b, m); err != nil {
					t.Fatal(err)
				}
				for _, f := range m.Files {
					if ok, _ := b.Exists(ctx, f.Key); ok {
						t.Errorf("part %s left", f.Key)
					}
				}
			}
			if found, err := output.FindBatches(ctx, b, "walks", "x"); err != nil || len(found) != 0 {
				t.Fatalf("after output.DeleteBatch: %d manifests, %v", len(found), err)
			}
			if err := output.DeleteBatch(ctx, b, &output.Manifest{BatchID: "x"}); err == nil {
				t.Error("DeleteBatch of a manifest not read from the store succeeded")
			}
		})
	}
}
