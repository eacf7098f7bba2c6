package output

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/store"
)

func fileBucket(t testing.TB) (*blob.Bucket, string) {
	dir := t.TempDir()
	b, err := store.OpenBucket(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, dir
}

func TestTidyOrphansRefusesBadArguments(t *testing.T) {
	b, _ := fileBucket(t)
	for _, c := range []struct {
		prefix string
		age    time.Duration
		opts   []store.Option
	}{
		{"walks", -time.Second, nil},
		{"a/../b", time.Hour, nil},
		{"a//b", time.Hour, nil},
		{"walks", time.Hour, []store.Option{store.WithCallTimeout(0)}},
	} {
		if _, err := TidyOrphans(context.Background(), b, c.prefix, c.age, c.opts...); err == nil {
			t.Errorf("prefix %q, age %v: no error", c.prefix, c.age)
		}
	}
}

func TestSplitBatchKey(t *testing.T) {
	for _, c := range []struct {
		prefix, key string
		dir, kind   string
		ok          bool
	}{
		{"walks/", "walks/kind=walks/graph=g/algorithm=a/batch=b/part-0.parquet", "walks/kind=walks/graph=g/algorithm=a/batch=b", "walks", true},
		{"walks/", "walks/kind=samples/graph=g/algorithm=a/batch=b/_SUCCESS", "walks/kind=samples/graph=g/algorithm=a/batch=b", "samples", true},
		{"walks/", "walks/graph=g/algorithm=a/batch=b/part-0.parquet", "walks/graph=g/algorithm=a/batch=b", "", true},
		{"", "graph=g/algorithm=a/batch=b/x", "graph=g/algorithm=a/batch=b", "", true},
		{"walks/", "walks/kind=rows/graph=g/algorithm=a/batch=b/x", "", "", false},
		{"walks/", "walks/kind=walks/graph=g/algorithm=a/batch=b/sub/x", "", "", false},
		{"walks/", "walks/kind=walks/graph=g/algorithm=a/batch=b/", "", "", false},
		{"walks/", "walks/kind=walks/algorithm=a/graph=g/batch=b/x", "", "", false},
		{"walks/", "other/kind=walks/graph=g/algorithm=a/batch=b/x", "", "", false},
		{"walks/", "walks/.walkstage-tmp/x", "", "", false},
	} {
		d, ok := splitBatchKey(c.prefix, c.key)
		if ok != c.ok || d.dir != c.dir || d.kind != c.kind {
			t.Errorf("splitBatchKey(%q, %q) = %+v, %v", c.prefix, c.key, d, ok)
		}
	}
}

// bigTree fills a file:// bucket with n written-looking batch directories
// (a part and a _SUCCESS each) under one graph and algorithm, as a stage
// leaves after n batches, and returns the bucket and its directory.
func bigTree(t testing.TB, n int) (*blob.Bucket, string) {
	t.Helper()
	b, root := fileBucket(t)
	dir := filepath.Join(root, "walks", "kind=walks", "graph=g", "algorithm=deepwalk")
	for i := range n {
		d := filepath.Join(dir, "batch=old-"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"part-00000-0123456789ab.parquet", SuccessName} {
			if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b, root
}

// writeComplete writes a complete batch of one one-byte part under graph
// g, as a writer would leave it.
func writeComplete(t *testing.T, b *blob.Bucket, g, batchID string) {
	t.Helper()
	l, err := BatchLayout("walks", KindWalks, g, "deepwalk", batchID)
	if err != nil {
		t.Fatal(err)
	}
	part := l.AttemptPartKey(0, "0123456789ab")
	m := &Manifest{Version: ManifestVersion, BatchID: batchID, Graph: g, Algorithm: AlgorithmMeta{Name: "deepwalk"}, Walks: 1, Bytes: 1,
		Fingerprint: "fp", Files: []File{{Key: part, Rows: 1, RowGroups: 1, Bytes: 1}}}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.WriteAll(ctx, part, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAll(ctx, l.SuccessKey(), data, nil); err != nil {
		t.Fatal(err)
	}
}

// On a local bucket the search for a batch id reads the prefix's and each
// graph's directory, never the algorithm directories that hold every
// earlier batch, and still finds a batch under any graph and algorithm.
func TestFindBatchesLocalReadsOnlyTheLevelsAbove(t *testing.T) {
	b, _ := bigTree(t, 50)
	writeComplete(t, b, "other", "l")
	var read []string
	readDir = func(dir string) ([]os.DirEntry, error) {
		read = append(read, dir)
		return os.ReadDir(dir)
	}
	t.Cleanup(func() { readDir = os.ReadDir })
	found, err := FindBatches(context.Background(), b, "walks", "l")
	if err != nil || len(found) != 1 || found[0].BatchID != "l" {
		t.Fatalf("FindBatches = %v, %v; want batch l", found, err)
	}
	if len(read) != 4 {
		t.Fatalf("read %d directories %v; want walks/, walks/kind=walks/, walks/kind=walks/graph=g/, walks/kind=walks/graph=other/", len(read), read)
	}
	for _, d := range read {
		if strings.Contains(filepath.Base(d), "algorithm=") {
			t.Errorf("read %s, which holds whole batches", d)
		}
	}
	if found, err := FindBatches(context.Background(), b, "walks", "absent"); len(found) != 0 || err != nil {
		t.Errorf("FindBatches of an absent batch = %v, %v", found, err)
	}
}
