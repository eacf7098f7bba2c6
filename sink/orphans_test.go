package sink

import (
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// storeClock is gofakes3's in-memory backend's time source: the
// modification time it gives objects, which a test sets to make objects
// old without waiting.
type storeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *storeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *storeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *storeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// agedStore is a bucket whose new objects count as written at a time the
// test chooses: before age(), two hours ago; after it, now.
type agedStore struct {
	b   *blob.Bucket
	age func(t *testing.T) // makes everything written so far old, and what follows young
}

// agedStores are the stores the orphan tests run on: a local directory
// (modification times set back with Chtimes) and gofakes3 over TCP (its
// backend's clock set back, then forward; the server checks request
// signatures against the real time).
func agedStores() map[string]func(t *testing.T) agedStore {
	return map[string]func(t *testing.T) agedStore{
		"file": func(t *testing.T) agedStore {
			b, dir := fileBucket(t)
			return agedStore{b: b, age: func(t *testing.T) {
				old := time.Now().Add(-2 * time.Hour)
				err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					return os.Chtimes(p, old, old)
				})
				if err != nil {
					t.Fatal(err)
				}
			}}
		},
		"gofakes3": func(t *testing.T) agedStore {
			s3Env(t)
			clock := &storeClock{now: time.Now().Add(-2 * time.Hour)}
			backend := s3mem.New(s3mem.WithTimeSource(clock))
			if err := backend.CreateBucket("walks"); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
			t.Cleanup(srv.Close)
			u := "s3://walks?" + url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
			return agedStore{b: openS3(t, u), age: func(*testing.T) { clock.set(time.Now()) }}
		},
	}
}

// orphanTree is a prefix with committed batches, orphans of every kind and
// things that are not orphans, some old and some young.
type orphanTree struct {
	rows          []Row              // of every committed batch
	committed     []*output.Manifest // their parts and manifests stay, always
	oldOrphans    []string           // removed by a tidy with a 1 h age
	youngOrphans  []string           // removed only by a tidy with age 0
	untouchable   []string           // never removed: not parts, or in directories left alone
	oldUnlisted   int                // of oldOrphans, in directories with a complete manifest
	youngUnlisted int                // of youngOrphans, the same
}

func buildOrphanTree(t *testing.T, s agedStore) orphanTree {
	t.Helper()
	ctx := context.Background()
	g := testGraph(t)
	chunks := runEngine(t, g, testAlgo, 600, 5)
	put := func(key string, data string) string {
		t.Helper()
		if err := s.b.WriteAll(ctx, key, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
		return key
	}
	var tr orphanTree
	opts := []Option{WithRowGroupRows(200), WithFileBytes(1)}

	// Old: two committed batches, one of them moved to the layout before
	// kinds; a part of a losing attempt beside each.
	tr.rows = expectedRows(g, chunks, 600)
	done := writeBatch(t, s.b, fpMeta("done", 600, "fp"), g, chunks, opts...)
	moved := writeBatch(t, s.b, fpMeta("moved", 600, "fp"), g, chunks, opts...)
	moved, err := output.ReadManifest(ctx, s.b, toEarlierLayout(t, s.b, moved, output.KindWalks))
	if err != nil {
		t.Fatal(err)
	}
	tr.committed = []*output.Manifest{done, moved}
	doneDir, movedDir := dirOf(t, done), dirOf(t, moved)
	if !strings.HasPrefix(movedDir, "walks/graph=") {
		t.Fatalf("moved to %s", movedDir)
	}
	tr.oldOrphans = append(tr.oldOrphans,
		put(doneDir+"/part-00000-0123456789ab.parquet", "a losing attempt"),
		put(doneDir+"/part-00000.parquet", "named before attempts"),
		put(movedDir+"/part-00001-0123456789ab.parquet", "a losing attempt, earlier layout"))
	tr.oldUnlisted = 3
	// Old: abandoned directories (no manifest) of every kind and layout.
	tr.oldOrphans = append(tr.oldOrphans,
		put("walks/kind=walks/graph=test/algorithm=deepwalk/batch=killed/part-00000-aaaaaaaaaaaa.parquet", "killed"),
		put("walks/kind=walks/graph=test/algorithm=deepwalk/batch=killed/part-00001-aaaaaaaaaaaa.parquet", "killed"),
		put("walks/kind=visits/graph=test/algorithm=ppr/batch=q/part-00000-bbbbbbbbbbbb.parquet", "killed"),
		put("walks/kind=samples/graph=test/algorithm=neighbor/batch=s%2F1/part-00000-cccccccccccc.parquet", "killed"),
		put("walks/graph=test/algorithm=ppr/batch=old/part-00000.parquet", "killed before kinds"))
	// Old, and never removed: what is not a part, a directory whose
	// manifest does not decode or lists a missing part, a kind this
	// version does not know, keys outside the layout.
	tr.untouchable = append(tr.untouchable,
		put("walks/kind=walks/graph=test/algorithm=deepwalk/batch=killed/notes.txt", "not a part"),
		put("walks/kind=walks/graph=test/algorithm=deepwalk/batch=bad/_SUCCESS", "{"),
		put("walks/kind=walks/graph=test/algorithm=deepwalk/batch=bad/part-00000-dddddddddddd.parquet", "unknown"),
		put("walks/kind=future/graph=test/algorithm=deepwalk/batch=f/part-00000-eeeeeeeeeeee.parquet", "a newer kind"),
		put("walks/other/graph=test/algorithm=deepwalk/batch=o/part-00000.parquet", "outside the layout"),
		put("walks/kind=walks/graph=test/part-00000.parquet", "not in a batch directory"),
		put("elsewhere/kind=walks/graph=test/algorithm=deepwalk/batch=e/part-00000.parquet", "another prefix"))
	incomplete := writeBatch(t, s.b, fpMeta("incomplete", 600, "fp"), g, chunks, opts...)
	if err := s.b.Delete(ctx, incomplete.Files[0].Key); err != nil {
		t.Fatal(err)
	}
	incDir := dirOf(t, incomplete)
	tr.untouchable = append(tr.untouchable, incDir+"/"+output.SuccessName, put(incDir+"/part-00000-ffffffffffff.parquet", "maybe the rewrite's"))
	for _, f := range incomplete.Files[1:] {
		tr.untouchable = append(tr.untouchable, f.Key)
	}

	s.age(t)

	// Young: a batch committed now, a part of a losing attempt written
	// now beside an old batch, a directory being written now.
	young := writeBatch(t, s.b, fpMeta("young", 600, "fp"), g, chunks, opts...)
	tr.committed = append(tr.committed, young)
	tr.youngOrphans = append(tr.youngOrphans,
		put(doneDir+"/part-00002-999999999999.parquet", "still uploading?"),
		put(dirOf(t, young)+"/part-00000-999999999999.parquet", "a loser, now"),
		put("walks/kind=walks/graph=test/algorithm=deepwalk/batch=writing/part-00000-999999999999.parquet", "being written"))
	tr.youngUnlisted = 2
	return tr
}

func dirOf(t *testing.T, m *output.Manifest) string {
	t.Helper()
	l, err := m.Layout("walks")
	if err != nil {
		t.Fatal(err)
	}
	return l.Dir
}

func (tr orphanTree) kept(t *testing.T, extra ...[]string) []string {
	var keys []string
	for _, m := range tr.committed {
		keys = append(keys, manifestKeys(m, dirOf(t, m))...)
	}
	keys = append(keys, tr.untouchable...)
	for _, e := range extra {
		keys = append(keys, e...)
	}
	slices.Sort(keys)
	return keys
}

// TidyOrphans removes exactly the parts no manifest lists that are older
// than its age: unlisted parts of committed batches and parts of abandoned
// directories, in both layouts and every kind; younger ones wait for a
// later tidy; listed parts, manifests, objects that are not parts and
// directories whose manifest is undecodable or incomplete are never
// touched. A second run finds nothing more.
func TestTidyOrphansRemovesOnlyOldUnlistedParts(t *testing.T) {
	ctx := context.Background()
	for name, open := range agedStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			tr := buildOrphanTree(t, s)

			st, err := output.TidyOrphans(ctx, s.b, "walks", time.Hour, store.WithCallTimeout(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := listAll(t, s.b), tr.kept(t, tr.youngOrphans); !slices.Equal(sorted(got), want) {
				t.Fatalf("after a tidy with a 1 h age the bucket holds\n%s\nwant\n%s", strings.Join(sorted(got), "\n"), strings.Join(want, "\n"))
			}
			want := output.TidyStats{Dirs: 10, UnlistedRemoved: tr.oldUnlisted, AbandonedRemoved: len(tr.oldOrphans) - tr.oldUnlisted,
				YoungKept: len(tr.youngOrphans), DirsLeft: 2}
			st.BytesRemoved, want.BytesRemoved = 0, 0
			if st != want {
				t.Errorf("stats %+v, want %+v", st, want)
			}

			again, err := output.TidyOrphans(ctx, s.b, "walks", time.Hour)
			if err != nil || again.Removed() != 0 {
				t.Errorf("a second tidy removed %d parts (%v), want none", again.Removed(), err)
			}

			// Everything stopped: age 0 takes the young orphans too, and
			// still nothing committed.
			st, err = output.TidyOrphans(ctx, s.b, "/walks/", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := listAll(t, s.b), tr.kept(t); !slices.Equal(sorted(got), want) {
				t.Fatalf("after a tidy with age 0 the bucket holds\n%s\nwant\n%s", strings.Join(sorted(got), "\n"), strings.Join(want, "\n"))
			}
			if st.UnlistedRemoved != tr.youngUnlisted || st.AbandonedRemoved != len(tr.youngOrphans)-tr.youngUnlisted || st.YoungKept != 0 {
				t.Errorf("age 0: stats %+v", st)
			}
			for _, m := range tr.committed {
				compareRows(t, readBatch(t, s.b, m), tr.rows)
			}
		})
	}
}

// ListCommitted returns exactly the parts the complete manifests of a kind
// list, in both layouts, whatever orphans lie beside them; incomplete and
// undecodable manifests are named as left out.
func TestListCommittedReadsThroughManifests(t *testing.T) {
	ctx := context.Background()
	for name, open := range agedStores() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			tr := buildOrphanTree(t, s)
			var wantParts []string
			for _, m := range tr.committed {
				for _, f := range m.Files {
					wantParts = append(wantParts, f.Key)
				}
			}
			slices.Sort(wantParts)
			for _, c := range []struct {
				kind, batch string
				parts       []string
				leftOut     []string
			}{
				{output.KindWalks, "", wantParts, []string{
					"walks/kind=walks/graph=test%20graph%2F1/algorithm=node2vec/batch=incomplete/_SUCCESS",
					"walks/kind=walks/graph=test/algorithm=deepwalk/batch=bad/_SUCCESS"}},
				{output.KindVisits, "", nil, nil},
				{output.KindSamples, "", nil, nil},
				{output.KindWalks, "moved", keysOf(tr.committed[1]), nil},
				{output.KindWalks, "done", keysOf(tr.committed[0]), nil},
				{output.KindWalks, "killed", nil, nil},
				{output.KindVisits, "done", nil, nil},
				{output.KindWalks, "incomplete", nil, []string{"walks/kind=walks/graph=test%20graph%2F1/algorithm=node2vec/batch=incomplete/_SUCCESS"}},
			} {
				got, err := output.ListCommitted(ctx, s.b, "walks", c.kind, c.batch)
				if err != nil {
					t.Fatalf("%s %q: %v", c.kind, c.batch, err)
				}
				if parts := sorted(got.Parts()); !slices.Equal(parts, c.parts) {
					t.Errorf("%s %q: parts\n%s\nwant\n%s", c.kind, c.batch, strings.Join(parts, "\n"), strings.Join(c.parts, "\n"))
				}
				if !slices.Equal(got.LeftOut, c.leftOut) {
					t.Errorf("%s %q: left out %v, want %v", c.kind, c.batch, got.LeftOut, c.leftOut)
				}
			}
			if _, err := output.ListCommitted(ctx, s.b, "walks", "rows", ""); err == nil {
				t.Error("an unknown kind was accepted")
			}
		})
	}
}

func keysOf(m *output.Manifest) []string {
	var keys []string
	for _, f := range m.Files {
		keys = append(keys, f.Key)
	}
	slices.Sort(keys)
	return keys
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
