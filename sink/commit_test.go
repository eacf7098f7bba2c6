package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// stores are the buckets the commit protocol is tested on: a local
// directory (written directly, manifest by hard link), gofakes3 over TCP
// and versitygw (If-None-Match: * on the manifest put; both honour it
// atomically, gofakes3 since v1.2.0, though versitygw's refusal can come
// before a read sees the manifest: TestRefusedCreateUnreadableManifestKeepsWinner).
// The versitygw cases skip without its binary (see versityGW).
func stores(t *testing.T) map[string]func(t *testing.T) *blob.Bucket {
	return map[string]func(t *testing.T) *blob.Bucket{
		"file":      func(t *testing.T) *blob.Bucket { b, _ := fileBucket(t); return b },
		"gofakes3":  func(t *testing.T) *blob.Bucket { return openS3(t, fakeS3(t)) },
		"versitygw": func(t *testing.T) *blob.Bucket { return openS3(t, versityGW(t)) },
	}
}

func fpMeta(id string, n int, fp string) BatchMeta {
	m := testMeta(id, n)
	m.Fingerprint = fp
	return m
}

// batchKeys lists the batch directory's objects.
func batchKeys(t testing.TB, b *blob.Bucket, dir string) []string {
	t.Helper()
	keys := listPrefix(t, b, dir+"/")
	slices.Sort(keys)
	return keys
}

// manifestKeys is what a batch directory must hold for m: its parts and
// _SUCCESS, nothing else.
func manifestKeys(m *output.Manifest, dir string) []string {
	keys := []string{dir + "/" + output.SuccessName}
	for _, f := range m.Files {
		keys = append(keys, f.Key)
	}
	slices.Sort(keys)
	return keys
}

// writeAll starts a writer and hands it every chunk, without committing.
func writeAll(t testing.TB, b *blob.Bucket, meta BatchMeta, chunks []walk.Chunk, opts ...Option) *BatchWriter {
	t.Helper()
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", meta, testGraph(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if err := w.Write(ctx, cloneChunk(c)); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// Two replicas writing one batch id at once end with exactly one output
// set: with the same fingerprint both report it; with different ones one
// wins and the other gets ErrBatchConflict. Never a mix of parts.
func TestConcurrentCommitOneOutputSet(t *testing.T) {
	g := testGraph(t)
	const n = 3000
	walksA := runEngine(t, g, testAlgo, n, 51)
	walksB := runEngine(t, g, testAlgo, n, 52) // other walks: a mix would show
	for name, open := range stores(t) {
		for _, tc := range []struct {
			name     string
			fpA, fpB string
		}{
			{"same fingerprint", "fp-same", "fp-same"},
			{"different fingerprints", "fp-a", "fp-b"},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				b := open(t)
				opts := []Option{WithRowGroupRows(300), WithFileBytes(20 << 10)}
				wa := writeAll(t, b, fpMeta("twin", n, tc.fpA), walksA, opts...)
				chunksB := walksA
				if tc.fpA != tc.fpB {
					chunksB = walksB
				}
				wb := writeAll(t, b, fpMeta("twin", n, tc.fpB), chunksB, opts...)
				var ms [2]*output.Manifest
				var errs [2]error
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, w := range []*BatchWriter{wa, wb} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						ms[i], errs[i] = w.Commit(context.Background())
					}()
				}
				close(start)
				wg.Wait()
				dir := wa.Layout().Dir
				stored, err := output.ReadManifest(context.Background(), b, wa.Layout().SuccessKey())
				if err != nil {
					t.Fatal(err)
				}
				if got, want := batchKeys(t, b, dir), manifestKeys(stored, dir); !slices.Equal(got, want) {
					t.Fatalf("batch directory holds\n%v\nmanifest lists\n%v", got, want)
				}
				winner := walksA
				if stored.Fingerprint == "fp-b" {
					winner = walksB
				}
				compareRows(t, readBatch(t, b, stored), expectedRows(g, winner, n))
				if tc.fpA == tc.fpB {
					for i := range 2 {
						if errs[i] != nil || !sameFiles(ms[i], stored) {
							t.Errorf("writer %d: %v; its manifest differs from the stored one", i, errs[i])
						}
					}
					return
				}
				wins := 0
				for i := range 2 {
					switch {
					case errs[i] == nil:
						wins++
						if !sameFiles(ms[i], stored) {
							t.Errorf("writer %d won with a manifest that is not the stored one", i)
						}
					case !errors.Is(errs[i], ErrBatchConflict) || !IsRequestError(errs[i]):
						t.Errorf("writer %d: %v, want ErrBatchConflict", i, errs[i])
					case !strings.Contains(errs[i].Error(), "twin") || !strings.Contains(errs[i].Error(), "fp-a") || !strings.Contains(errs[i].Error(), "fp-b"):
						t.Errorf("conflict error does not name batch and fingerprints: %v", errs[i])
					}
				}
				if wins != 1 {
					t.Fatalf("%d writers succeeded: %v", wins, errs)
				}
			})
		}
	}
}

// A store may refuse a create because the manifest exists and still answer
// the read that follows with NoSuchKey (versitygw did, under load, while
// the winner's put was landing). The loser must not take that for "no
// manifest" and replace it: that raced the winner's create, and each
// writer deleted the other's parts. The read is hidden here for the first
// two tries; the loser must still end with ErrBatchConflict and the
// winner's output untouched.
func TestRefusedCreateUnreadableManifestKeepsWinner(t *testing.T) {
	g := testGraph(t)
	const n = 2000
	walksA := runEngine(t, g, testAlgo, n, 71)
	walksB := runEngine(t, g, testAlgo, n, 72)
	var hide atomic.Int32
	u := serveFakeS3(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+output.SuccessName) && hide.Add(-1) >= 0 {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
				return
			}
			faker.ServeHTTP(w, r)
		})
	})
	b := openS3(t, u)
	opts := []Option{WithRowGroupRows(300), WithFileBytes(20 << 10)}
	wa := writeAll(t, b, fpMeta("twin", n, "fp-a"), walksA, opts...)
	wb := writeAll(t, b, fpMeta("twin", n, "fp-b"), walksB, opts...)
	ma, err := wa.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hide.Store(2)
	if _, err := wb.Commit(context.Background()); !errors.Is(err, ErrBatchConflict) {
		t.Fatalf("second writer: %v, want ErrBatchConflict", err)
	}
	if left := hide.Load(); left >= 0 {
		t.Fatalf("%d hidden reads left: the second writer did not read the manifest twice", left+1)
	}
	dir := wa.Layout().Dir
	stored, err := output.ReadManifest(context.Background(), b, wa.Layout().SuccessKey())
	if err != nil {
		t.Fatal(err)
	}
	if stored.Fingerprint != "fp-a" || !sameFiles(stored, ma) {
		t.Fatalf("stored manifest %q is not the first writer's", stored.Fingerprint)
	}
	if got, want := batchKeys(t, b, dir), manifestKeys(stored, dir); !slices.Equal(got, want) {
		t.Fatalf("batch directory holds\n%v\nmanifest lists\n%v", got, want)
	}
	compareRows(t, readBatch(t, b, stored), expectedRows(g, walksA, n))
}

// A redelivered batch whose output exists is answered by Lookup, and a
// writer run again anyway (rewrite, abort or conflicting request) deletes
// nothing of it.
func TestRedeliveryAfterSuccessDeletesNothing(t *testing.T) {
	g := testGraph(t)
	const n = 2000
	chunks := runEngine(t, g, testAlgo, n, 61)
	other := runEngine(t, g, testAlgo, n, 62)
	ctx := context.Background()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			opts := []Option{WithRowGroupRows(400), WithFileBytes(10 << 10)}
			m := writeBatch(t, b, fpMeta("done", n, "fp-1"), g, chunks, opts...)
			dir := path.Dir(m.Files[0].Key)
			before := batchKeys(t, b, dir)

			got, err := Lookup(ctx, b, "walks", "done", "fp-1")
			if err != nil || got == nil || !sameFiles(got, m) || got.Fingerprint != "fp-1" {
				t.Fatalf("Lookup = %+v, %v; want the written manifest", got, err)
			}
			// Redelivered without Lookup: the rewrite returns the existing
			// manifest and removes its own parts.
			again := writeBatch(t, b, fpMeta("done", n, "fp-1"), g, chunks, opts...)
			if !sameFiles(again, m) {
				t.Errorf("rewrite with the same fingerprint returned another manifest")
			}
			// Redelivered and aborted half-way.
			w := writeAll(t, b, fpMeta("done", n, "fp-1"), chunks[:len(chunks)/2], opts...)
			if err := w.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			// The same batch id for another request: a request error, both
			// from Lookup and from a writer that commits anyway.
			if _, err := Lookup(ctx, b, "walks", "done", "fp-2"); !errors.Is(err, ErrBatchConflict) || !IsRequestError(err) {
				t.Errorf("Lookup with another fingerprint: %v, want ErrBatchConflict", err)
			}
			w = writeAll(t, b, fpMeta("done", n, "fp-2"), other, opts...)
			if _, err := w.Commit(ctx); !errors.Is(err, ErrBatchConflict) {
				t.Errorf("Commit with another fingerprint: %v, want ErrBatchConflict", err)
			}
			if after := batchKeys(t, b, dir); !slices.Equal(after, before) {
				t.Fatalf("output changed:\n%v\n%v", before, after)
			}
			compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
		})
	}
}

func TestLookup(t *testing.T) {
	g := testGraph(t)
	const n = 1200
	chunks := runEngine(t, g, testAlgo, n, 71)
	ctx := context.Background()
	opts := []Option{WithRowGroupRows(400), WithFileBytes(1)}
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, b *blob.Bucket) // writes batch "l"
		fp      string
		found   bool
		err     error
	}{
		{"no batch", func(*testing.T, *blob.Bucket) {}, "fp", false, nil},
		{"match", func(t *testing.T, b *blob.Bucket) { writeBatch(t, b, fpMeta("l", n, "fp"), g, chunks, opts...) }, "fp", true, nil},
		{"conflict", func(t *testing.T, b *blob.Bucket) { writeBatch(t, b, fpMeta("l", n, "other"), g, chunks, opts...) }, "fp", false, ErrBatchConflict},
		{"empty fingerprint asked", func(t *testing.T, b *blob.Bucket) { writeBatch(t, b, fpMeta("l", n, "fp"), g, chunks, opts...) }, "", false, ErrBatchConflict},
		{"manifest without fingerprint", func(t *testing.T, b *blob.Bucket) { writeBatch(t, b, fpMeta("l", n, ""), g, chunks, opts...) }, "fp", false, nil},
		{"part missing", func(t *testing.T, b *blob.Bucket) {
			m := writeBatch(t, b, fpMeta("l", n, "fp"), g, chunks, opts...)
			if err := b.Delete(ctx, m.Files[1].Key); err != nil {
				t.Fatal(err)
			}
		}, "fp", false, nil},
		{"part truncated", func(t *testing.T, b *blob.Bucket) {
			m := writeBatch(t, b, fpMeta("l", n, "fp"), g, chunks, opts...)
			if err := b.WriteAll(ctx, m.Files[2].Key, []byte("PAR1"), nil); err != nil {
				t.Fatal(err)
			}
		}, "fp", false, nil},
		{"manifest corrupt", func(t *testing.T, b *blob.Bucket) {
			m := writeBatch(t, b, fpMeta("l", n, "fp"), g, chunks, opts...)
			if err := b.WriteAll(ctx, path.Dir(m.Files[0].Key)+"/"+output.SuccessName, []byte("{"), nil); err != nil {
				t.Fatal(err)
			}
		}, "fp", false, nil},
		{"other algorithm directory", func(t *testing.T, b *blob.Bucket) {
			meta := fpMeta("l", n, "fp")
			meta.Algorithm = walk.Algorithm{Kind: walk.DeepWalk, Length: testAlgo.Length}
			writeBatch(t, b, meta, g, runEngine(t, g, meta.Algorithm, n, 1), opts...)
		}, "fp", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := fileBucket(t)
			tc.prepare(t, b)
			writeBatch(t, b, fpMeta("l-other", n, "zzz"), g, chunks, opts...) // a neighbour never matches
			m, err := Lookup(ctx, b, "walks", "l", tc.fp)
			if (m != nil) != tc.found || !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("Lookup = %v, %v; want found %v, error %v", m != nil, err, tc.found, tc.err)
			}
			if m != nil && (m.BatchID != "l" || m.Fingerprint != tc.fp) {
				t.Fatalf("Lookup returned %s/%s", m.BatchID, m.Fingerprint)
			}
			if m != nil {
				l, err := m.Layout("walks")
				if err != nil || l.Dir != path.Dir(m.Files[0].Key) {
					t.Fatalf("manifest layout %q, %v; parts are under %s", l.Dir, err, path.Dir(m.Files[0].Key))
				}
			}
			if tc.found || tc.err != nil {
				return
			}
			// Whatever Lookup could not use, a writer replaces with a
			// complete batch that Lookup then finds.
			w := writeBatch(t, b, fpMeta("l", n, "fp"), g, chunks, opts...)
			m, err = Lookup(ctx, b, "walks", "l", "fp")
			if err != nil || m == nil || !sameFiles(m, w) {
				t.Fatalf("after rewrite Lookup = %v, %v", m != nil, err)
			}
			dir := path.Dir(w.Files[0].Key)
			if got := batchKeys(t, b, dir); !slices.Equal(got, manifestKeys(m, dir)) {
				t.Errorf("after rewrite the directory holds %v", got)
			}
		})
	}
}

// Parts being written sit in the prefix's staging directory, never in the
// batch directory; leftovers of killed writers are removed when the batch
// is written again, once old enough.
func TestLocalTempFilesOutsideBatch(t *testing.T) {
	g := testGraph(t)
	const n = 3000
	chunks := runEngine(t, g, testAlgo, n, 81)
	b, root := fileBucket(t)
	ctx := context.Background()
	w, err := NewBatchWriter(ctx, b, "walks", fpMeta("tmp", n, "fp"), g, WithRowGroupRows(100), WithFileBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	// All but the chunk with the last walk: the one part stays open, its
	// file unfinished.
	for _, c := range chunks {
		if slices.Contains(c.WalkIDs, n-1) {
			continue
		}
		if err := w.Write(ctx, cloneChunk(c)); err != nil {
			t.Fatal(err)
		}
	}
	staging := filepath.Join(root, "walks", store.TempDirName)
	batchDir := filepath.Join(root, filepath.FromSlash(w.Layout().Dir))
	deadline := time.Now().Add(time.Minute)
	for len(globT(t, staging, "*.tmp")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no temporary file in the staging directory while a part is open")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if tmp := globT(t, batchDir, "*"); len(tmp) != 0 {
		t.Fatalf("batch directory holds %v while a part is written", tmp)
	}
	// Abort removes the writer's temporary file.
	if err := w.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if left := globT(t, staging, "*"); len(left) != 0 {
		t.Fatalf("left in staging after Abort: %v", left)
	}
	// Plant what a killed writer leaves in staging, and what fileblob left
	// inside batch directories before; age them.
	old := time.Now().Add(-time.Hour)
	if err := os.MkdirAll(batchDir, 0o777); err != nil {
		t.Fatal(err)
	}
	killed := filepath.Join(staging, store.StagingTag(w.Layout().Dir)+"-part-00000-0123456789ab.parquet.00112233aabbccdd.tmp")
	if err := os.WriteFile(killed, []byte("partial"), 0o666); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(batchDir, "part-00000.parquet.18a3f0c2b1d4e5f6.tmp")
	young := filepath.Join(batchDir, "part-00001.parquet.18a3f0c2b1d4e5f7.tmp")
	for _, p := range []string{legacy, young} {
		if err := os.WriteFile(p, []byte("partial"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	stale := globT(t, staging, "*.tmp")
	for _, p := range append(slices.Clone(stale), legacy) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Another batch's file, old as it is, is left to that batch (or Sweep).
	neighbour := filepath.Join(staging, store.StagingTag("walks/graph=x/algorithm=y/batch=z")+"-_SUCCESS.0011.tmp")
	if err := os.WriteFile(neighbour, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(neighbour, old, old); err != nil {
		t.Fatal(err)
	}
	m := writeBatch(t, b, fpMeta("tmp", n, "fp"), g, chunks, WithRowGroupRows(100), WithFileBytes(1<<20), WithStaleAfter(time.Minute))
	for _, p := range append(stale, legacy) {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale %s not removed: %v", p, err)
		}
	}
	for _, p := range []string{young, neighbour} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
}

func globT(t testing.TB, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A writer killed after uploading parts leaves them in the batch directory;
// the next writer to commit the batch deletes them, so that directory
// readers see only the manifest's parts.
func TestCommitDeletesAbandonedParts(t *testing.T) {
	g := testGraph(t)
	const n = 2000
	chunks := runEngine(t, g, testAlgo, n, 95)
	ctx := context.Background()
	for name, open := range stores(t) {
		for _, c := range []struct {
			fp   string
			tidy []Option // the removal on a goroutine after Commit, or in it
		}{{"fp", nil}, {"", nil}, {"fp", []Option{WithTidyAfterCommit()}}, {"", []Option{WithTidyAfterCommit()}}} {
			fp := c.fp
			t.Run(fmt.Sprintf("%s/fingerprint %q/tidy after commit %v", name, fp, c.tidy != nil), func(t *testing.T) {
				b := open(t)
				opts := append([]Option{WithRowGroupRows(200), WithFileBytes(1)}, c.tidy...)
				dead := writeAll(t, b, fpMeta("k", n, fp), chunks, opts...)
				// Every part uploaded, never committed: one part per row
				// group (WithFileBytes(1)), each listed once its upload
				// completes, which is after its rows count as written.
				dir := dead.Layout().Dir
				for deadline := time.Now().Add(30 * time.Second); len(batchKeys(t, b, dir)) < n/200; {
					if time.Now().After(deadline) {
						t.Fatalf("the abandoned writer left %d parts, want %d", len(batchKeys(t, b, dir)), n/200)
					}
					time.Sleep(5 * time.Millisecond)
				}
				time.Sleep(10 * time.Millisecond) // its parts are older than the next writer
				m := writeBatch(t, b, fpMeta("k", n, fp), g, chunks, opts...)
				if got, want := batchKeys(t, b, dir), manifestKeys(m, dir); !slices.Equal(got, want) {
					t.Fatalf("batch directory holds\n%v\nmanifest lists\n%v", got, want)
				}
				// Not dead after all, only paused: its commit must not make
				// a manifest of its deleted parts. With the same fingerprint
				// it reports the batch as written; without, it fails.
				late, err := dead.Commit(ctx)
				switch {
				case fp != "" && (err != nil || !sameFiles(late, m)):
					t.Errorf("late commit: %v; want the winner's manifest", err)
				case fp == "" && err == nil:
					t.Error("late commit succeeded with its parts deleted")
				}
				stored, err := output.ReadManifest(ctx, b, dead.Layout().SuccessKey())
				if err != nil || !sameFiles(stored, m) {
					t.Fatalf("after the late commit the manifest is not the winner's: %v", err)
				}
				if got, want := batchKeys(t, b, dir), manifestKeys(m, dir); !slices.Equal(got, want) {
					t.Fatalf("after the late commit the directory holds\n%v\nmanifest lists\n%v", got, want)
				}
			})
		}
	}
}

// The commit protocol rests on the store refusing a create-if-absent put
// over an existing object; gofakes3 (since v1.2.0) and versitygw both
// answer 412, which gocloud reports as FailedPrecondition (fileblob checks
// before its rename, not atomically; the sink's own local writes link
// instead, see TestLocalExclusiveCreate). Should a store upgrade drop
// that, this test says so before the concurrency tests do.
func TestStoresRefuseOverwriteIfNotExist(t *testing.T) {
	ctx := context.Background()
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			opts := &blob.WriterOptions{IfNotExist: true}
			if err := b.WriteAll(ctx, "walks/x/_SUCCESS", []byte("first"), opts); err != nil {
				t.Fatal(err)
			}
			err := b.WriteAll(ctx, "walks/x/_SUCCESS", []byte("second"), opts)
			if !store.IsExists(err) {
				t.Fatalf("second create-if-absent put: %v, want FailedPrecondition", err)
			}
			if data, _ := b.ReadAll(ctx, "walks/x/_SUCCESS"); string(data) != "first" {
				t.Fatalf("object now holds %q", data)
			}
		})
	}
}

// bigTree fills a file:// bucket with n written-looking batch directories
// (a part and a _SUCCESS each) under one graph and algorithm, as a stage
// leaves after n batches, and returns the bucket.
func bigTree(t testing.TB, n int) *blob.Bucket {
	t.Helper()
	b, root := fileBucket(t)
	dir := filepath.Join(root, "walks", "kind=walks", "graph=g", "algorithm=deepwalk")
	for i := range n {
		d := filepath.Join(dir, "batch=old-"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"part-00000-0123456789ab.parquet", output.SuccessName} {
			if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b
}

// BenchmarkLookupBigTree is the stage's check, before it walks a batch, that
// the batch's output does not exist yet, on a file:// bucket holding 20,000
// earlier batches.
func BenchmarkLookupBigTree(b *testing.B) {
	bucket := bigTree(b, 20000)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if m, err := Lookup(ctx, bucket, "walks", "new-"+strconv.Itoa(i), "fp"); m != nil || err != nil {
			b.Fatal(m, err)
		}
	}
}
