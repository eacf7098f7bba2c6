package icetable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/sink"
)

// writeWalks writes a walks part of n rows and returns it as a File.
func writeWalks(t *testing.T, dir, name string, n int) File {
	t.Helper()
	rows := make([]sink.Row, n)
	for i := range rows {
		rows[i] = sink.Row{WalkID: int64(i), Start: int64(i), Length: 2, Walk: []int64{int64(i), int64(i + 1), int64(i + 2)}}
	}
	path := filepath.Join(dir, name)
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return File{URL: "file://" + path, Rows: int64(n), Bytes: st.Size()}
}

func scanRows(t *testing.T, tb *Tables, kind string) int64 {
	t.Helper()
	tbl, err := tb.Table(context.Background(), kind)
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	return at.NumRows()
}

// TestAppendIsExactlyOnce: batches appended at once (grouped into fewer
// commits) are all in the walks table and read back by iceberg-go row for
// row; the same batches appended again, also through a newly opened
// catalog (a restarted replica), add nothing; a batch id with another
// fingerprint is refused as a conflict.
func TestAppendIsExactlyOnce(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	cat := "file://" + t.TempDir()
	tb, err := Open(ctx, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	var batches []Batch
	var want int64
	for i := range 12 {
		b := Batch{Kind: "walks", ID: fmt.Sprintf("b%02d", i), Fingerprint: fmt.Sprintf("fp%d", i)}
		for j := range 2 {
			f := writeWalks(t, data, fmt.Sprintf("b%02d-%d.parquet", i, j), 10+i+j)
			b.Files = append(b.Files, f)
			want += f.Rows
		}
		batches = append(batches, b)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(batches))
	for i, b := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = tb.Append(ctx, b)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := scanRows(t, tb, "walks"); got != want {
		t.Fatalf("table holds %d rows, want %d", got, want)
	}
	tbl, _ := tb.Table(ctx, "walks")
	snaps := len(tbl.Metadata().Snapshots())
	if snaps > len(batches) {
		t.Errorf("%d snapshots for %d batches", snaps, len(batches))
	}
	t.Logf("%d batches appended in %d commits", len(batches), snaps)

	// Redelivered, through this catalog and a new one.
	for _, b := range batches[:4] {
		if err := tb.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	tb2, err := Open(ctx, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer tb2.Close()
	for _, b := range batches[4:] {
		if err := tb2.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := scanRows(t, tb2, "walks"); got != want {
		t.Fatalf("after redelivery the table holds %d rows, want %d", got, want)
	}
	tbl, _ = tb2.Table(ctx, "walks")
	if n := len(tbl.Metadata().Snapshots()); n != snaps {
		t.Errorf("redelivered batches made %d snapshots more", n-snaps)
	}
	have, err := tb2.Committed(ctx, "walks")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if have[b.ID] != b.Fingerprint {
			t.Errorf("batch %s: summaries say %q, want %q", b.ID, have[b.ID], b.Fingerprint)
		}
	}

	other := batches[0]
	other.Fingerprint = "another"
	if err := tb2.Append(ctx, other); !errors.Is(err, ErrConflict) {
		t.Errorf("a batch id with another fingerprint: %v, want ErrConflict", err)
	}
	if err := tb2.Append(ctx, Batch{Kind: "nope", ID: "x"}); err == nil {
		t.Error("an unknown kind was accepted")
	}
}

// TestCommitIntervalGroupsAppends: with a commit interval, appends made
// one after another within it (each waiting for the previous) still share
// commits: the second waits for the interval, and appends arriving
// meanwhile join it. Without one, each sequential append is a commit.
func TestCommitIntervalGroupsAppends(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	for _, tc := range []struct {
		interval time.Duration
		most     int // snapshots at most for 8 appends
	}{{0, 8}, {300 * time.Millisecond, 3}} {
		tb, err := Open(ctx, Options{Catalog: "file://" + t.TempDir(), CommitInterval: tc.interval})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 20 * time.Millisecond) // staggered, within one interval
				f := writeWalks(t, data, fmt.Sprintf("i%v-%d.parquet", tc.interval, i), 5)
				if err := tb.Append(ctx, Batch{Kind: "walks", ID: fmt.Sprint(i), Fingerprint: "f", Files: []File{f}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		tbl, err := tb.Table(ctx, "walks")
		if err != nil {
			t.Fatal(err)
		}
		n := len(tbl.Metadata().Snapshots())
		if n > tc.most {
			t.Errorf("interval %v: 8 staggered appends made %d snapshots, want at most %d", tc.interval, n, tc.most)
		}
		if got := scanRows(t, tb, "walks"); got != 40 {
			t.Errorf("interval %v: %d rows, want 40", tc.interval, got)
		}
		t.Logf("interval %v: %d snapshots", tc.interval, n)
		tb.Close()
	}
}

// TestReplicasShareATable: two replicas (two Tables on one catalog) keep
// the table as their own last commit left it; when the other replica
// committed meanwhile, the stale commit is refused by the catalog and
// checked again on the reloaded table. A batch redelivered to the second
// replica after the first committed it (a rebalance) is not appended
// twice, and no batch is lost.
func TestReplicasShareATable(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	cat := "file://" + t.TempDir()
	a, err := Open(ctx, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var want int64
	batch := func(i int) Batch {
		f := writeWalks(t, data, fmt.Sprintf("r%02d.parquet", i), 5+i)
		return Batch{Kind: "walks", ID: fmt.Sprintf("r%02d", i), Fingerprint: "fp", Files: []File{f}}
	}
	var bs []Batch
	for i := range 6 {
		bs = append(bs, batch(i))
		want += bs[i].Files[0].Rows
	}
	steps := []struct {
		on *Tables
		b  Batch
	}{
		{a, bs[0]}, {b, bs[1]}, // each replica now holds the table as of its own commit
		{a, bs[1]}, // b's batch redelivered to a, whose table does not show it yet
		{a, bs[2]}, {b, bs[3]}, {b, bs[2]}, {a, bs[4]}, {b, bs[5]}, {a, bs[5]},
	}
	for i, s := range steps {
		if err := s.on.Append(ctx, s.b); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.b.ID, err)
		}
	}
	if got := scanRows(t, a, "walks"); got != want {
		t.Fatalf("the table holds %d rows, want %d (each batch once)", got, want)
	}
	have, err := b.Committed(ctx, "walks")
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(bs) {
		t.Fatalf("summaries name %d batches, want %d: %v", len(have), len(bs), have)
	}
}

// A table set to replay conflicting commits (iceberg-go's refresh and
// replay) could append a batch twice; the committer refuses it.
func TestRefusesATableThatReplaysConflicts(t *testing.T) {
	ctx := context.Background()
	cat := "file://" + t.TempDir()
	tb, err := Open(ctx, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	f := writeWalks(t, t.TempDir(), "x.parquet", 3)
	if err := tb.Append(ctx, Batch{Kind: "walks", ID: "x", Fingerprint: "fp", Files: []File{f}}); err != nil {
		t.Fatal(err)
	}
	tbl, err := tb.Table(ctx, "walks")
	if err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.CommitNumRetriesKey: "3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tb2, err := Open(ctx, Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	defer tb2.Close()
	err = tb2.Append(ctx, Batch{Kind: "walks", ID: "y", Fingerprint: "fp", Files: []File{f}})
	if err == nil || !strings.Contains(err.Error(), table.CommitNumRetriesKey) {
		t.Fatalf("append to a replaying table: %v, want an error naming %s", err, table.CommitNumRetriesKey)
	}
}
