package sink

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// requestLog counts the S3 requests a gofakes3 server answered, by kind.
type requestLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *requestLog) wrap(faker http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.n[requestKind(r)]++
		l.mu.Unlock()
		faker.ServeHTTP(w, r)
	})
}

// take returns the counts so far and starts again.
func (l *requestLog) take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.n
	l.n = map[string]int{}
	return n
}

// requestKind names a request as the batch's small requests go: the part
// PUTs apart.
func requestKind(r *http.Request) string {
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && q.Has("uploads"):
		return "list uploads"
	case r.Method == http.MethodGet && q.Has("delimiter"):
		return "list directories"
	case r.Method == http.MethodGet && (q.Has("list-type") || q.Has("prefix")):
		return "list objects"
	case strings.Contains(r.URL.Path, "/part-") && r.Method == http.MethodPut:
		return "part"
	case strings.HasSuffix(r.URL.Path, "/"+output.SuccessName):
		return r.Method + " manifest"
	}
	return r.Method + " other"
}

// newCountedS3 is a bucket on gofakes3 over TCP whose requests l counts.
func newCountedS3(t *testing.T) (*blob.Bucket, *requestLog) {
	l := &requestLog{n: map[string]int{}}
	return openS3(t, serveFakeS3(t, l.wrap)), l
}

// putStray leaves a part of a killed attempt in meta's batch directory.
func putStray(t *testing.T, b *blob.Bucket, meta BatchMeta) string {
	t.Helper()
	l, err := output.BatchLayout("walks", output.KindWalks, testGraph(t).Name, meta.Algorithm.Kind.String(), meta.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	key := l.AttemptPartKey(0, "0123456789ab")
	if err := b.WriteAll(context.Background(), key, []byte("a killed attempt's part"), nil); err != nil {
		t.Fatal(err)
	}
	return key
}

// A batch written the way the stage writes one (a lookup, then a writer,
// given one Tidier) makes two small requests beside its parts on the
// common path, the directory's listing by the lookup and the manifest's
// create, where it made four: the lookup's GET of the manifest, the
// create, and after the commit a listing of the directory's parts and one
// of the multipart uploads under it.
func TestTidierCommitMakesTwoSmallRequests(t *testing.T) {
	b, log := newCountedS3(t)
	g := testGraph(t)
	ctx := context.Background()
	tid, err := NewTidier(b, "walks", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dirs := output.NewDirCache(1 << 40)
	opts := []Option{WithTidier(tid), WithDirCache(dirs), WithTidyAfterCommit()}
	for i, id := range []string{"first", "second", "third"} {
		meta := fpMeta(id, 500, "fp-"+id)
		m, err := Lookup(ctx, b, "walks", meta.BatchID, meta.Fingerprint, opts...)
		if err != nil || m != nil {
			t.Fatalf("Lookup: %v, %v; want no output", m, err)
		}
		w, got := writeBatchBy(t, b, meta, g, runEngine(t, g, testAlgo, 500, 31), opts...)
		n := log.take()
		if i == 0 {
			continue // the first lists the directories above the batches
		}
		delete(n, "part")
		want := map[string]int{"list objects": 1, "PUT manifest": 1}
		if !mapsEqual(n, want) {
			t.Errorf("batch %s: small requests %v, want %v", id, n, want)
		}
		if keys := batchKeys(t, b, w.Layout().Dir); !slices.Equal(keys, manifestKeys(got, w.Layout().Dir)) {
			t.Errorf("batch %s: directory holds %v", id, keys)
		}
		log.take() // the test's own listing
	}
	if n, err := tid.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("Sweep: %d aborted, %v; want none", n, err)
	}
	if n := log.take(); n["list uploads"] != 1 || len(n) != 1 {
		t.Errorf("the sweep of three commits made %v, want one listing of uploads", n)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// What a killed attempt left is still removed with a Tidier: stray parts
// by the commit whose lookup saw them, or by the lookup of a redelivery
// that finds the batch committed; an open multipart upload by the commit
// when the lookup saw the directory non-empty, else by the next sweep
// (any age under a committed directory); and a commit no lookup prepared
// lists the parts as without a Tidier.
func TestTidierRemovesWhatKilledAttemptsLeft(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	for _, tc := range []struct {
		name string
		// stray and upload: what the killed attempt left before the
		// commit; after: a stray part left after it (a loser killed
		// while the winner committed), for the redelivery's lookup.
		stray, upload, after bool
		lookup               bool // the lookup runs before the writer
		failedFirst          bool // an attempt of this process failed first
		// uploadsAfterCommit: open uploads once the commit's tidy is done
		// and before the sweep.
		uploadsAfterCommit int
	}{
		{name: "stray part and upload seen by the lookup", stray: true, upload: true, lookup: true},
		{name: "upload only: the sweep aborts it", upload: true, lookup: true, uploadsAfterCommit: 1},
		{name: "no lookup: the commit lists the parts", stray: true, upload: true, uploadsAfterCommit: 1},
		{name: "a failed attempt here: the commit lists", upload: true, lookup: true, failedFirst: true},
		{name: "loser killed after the commit: the redelivery's lookup", after: true, lookup: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := openS3(t, fakeS3(t))
			tid, err := NewTidier(b, "walks", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			opts := []Option{WithTidier(tid), WithTidyAfterCommit()}
			meta := fpMeta("killed", 500, "fp")
			if tc.stray {
				putStray(t, b, meta)
			}
			if tc.upload {
				openOrphanUpload(t, b, g, meta)
			}
			if tc.lookup {
				if m, err := Lookup(ctx, b, "walks", meta.BatchID, meta.Fingerprint, opts...); err != nil || m != nil {
					t.Fatalf("Lookup: %v, %v; want no output", m, err)
				}
			}
			chunks := runEngine(t, g, testAlgo, 500, 31)
			if tc.failedFirst {
				w := writeAll(t, b, meta, chunks, opts...)
				if err := w.Abort(ctx); err != nil {
					t.Fatal(err)
				}
			}
			w, m := writeBatchBy(t, b, meta, g, chunks, opts...)
			dir := w.Layout().Dir
			if up := pendingUploads(t, b); up != tc.uploadsAfterCommit {
				t.Errorf("%d uploads open after the commit, want %d", up, tc.uploadsAfterCommit)
			}
			if tc.after {
				putStray(t, b, meta)
				got, err := Lookup(ctx, b, "walks", meta.BatchID, meta.Fingerprint, opts...)
				if err != nil || got == nil {
					t.Fatalf("redelivery's Lookup: %v, %v; want the output", got, err)
				}
			}
			if keys := batchKeys(t, b, dir); !slices.Equal(keys, manifestKeys(m, dir)) {
				t.Errorf("directory holds %v, want only the manifest and its parts", keys)
			}
			if _, err := tid.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if up := pendingUploads(t, b); up != 0 {
				t.Errorf("%d uploads open after the sweep", up)
			}
			if rows := readBatchMeta(t, b, m); int64(len(rows)) != m.Walks {
				t.Errorf("%d rows read back, want %d", len(rows), m.Walks)
			}
		})
	}
}

// A part over store.PutThreshold went up as a multipart upload: its
// commit lists the uploads under the batch itself.
func TestMultipartParts(t *testing.T) {
	for _, tc := range []struct {
		sizes []int64
		want  bool
	}{
		{nil, false},
		{[]int64{1 << 20, store.PutThreshold}, false},
		{[]int64{1 << 20, store.PutThreshold + 1}, true},
	} {
		m := &output.Manifest{}
		for _, n := range tc.sizes {
			m.Files = append(m.Files, output.File{Bytes: n})
		}
		if got := multipartParts(m); got != tc.want {
			t.Errorf("parts of %v bytes: multipart %v, want %v", tc.sizes, got, tc.want)
		}
	}
}
