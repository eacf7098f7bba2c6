package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/icetable"
)

// tableView is what the walks table holds after a run: how many snapshots
// name each batch id (icetable.SummaryKey), and the current snapshot's
// total-records.
type tableView struct {
	count   map[string]int
	records int64
}

// readTable reads the walks table of the file catalog the stage appended
// to (WALKSTAGE_TABLE_CATALOG).
func readTable(ctx context.Context, catalogURL string) (tableView, error) {
	v := tableView{count: map[string]int{}}
	tb, err := icetable.Open(ctx, icetable.Options{Catalog: catalogURL})
	if err != nil {
		return v, err
	}
	defer tb.Close()
	tbl, err := tb.Table(ctx, "walks")
	if err != nil {
		return v, err
	}
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil {
			continue
		}
		for _, e := range strings.Split(s.Summary.Properties[icetable.SummaryKey], ",") {
			if id, _, ok := strings.Cut(e, "="); ok {
				v.count[id]++
			}
		}
	}
	if cur := tbl.CurrentSnapshot(); cur != nil && cur.Summary != nil {
		n, err := strconv.ParseInt(cur.Summary.Properties["total-records"], 10, 64)
		if err != nil {
			return v, fmt.Errorf("current snapshot's total-records: %w", err)
		}
		v.records = n
	}
	return v, nil
}

// tableProblems compares the table with the batches that succeeded (their
// ids) and the rows their manifests commit: each succeeded batch in exactly
// one snapshot, no other batch, and as many records as committed rows.
func tableProblems(v tableView, succeeded map[string]bool, committedRows int64) []string {
	var out []string
	for id := range succeeded {
		if n := v.count[id]; n != 1 {
			out = append(out, fmt.Sprintf("batch %s succeeded but is in %d snapshots", id, n))
		}
	}
	for id := range v.count {
		if !succeeded[id] {
			out = append(out, fmt.Sprintf("batch %s is in the table without a succeeded event", id))
		}
	}
	if v.records != committedRows {
		out = append(out, fmt.Sprintf("the table holds %d records, the manifests commit %d rows", v.records, committedRows))
	}
	return out
}

func TestTableProblems(t *testing.T) {
	ok := map[string]bool{"a": true, "b": true}
	for _, tc := range []struct {
		name string
		v    tableView
		rows int64
		want int
	}{
		{"exactly once", tableView{count: map[string]int{"a": 1, "b": 1}, records: 30}, 30, 0},
		{"twice", tableView{count: map[string]int{"a": 2, "b": 1}, records: 30}, 30, 1},
		{"missing", tableView{count: map[string]int{"a": 1}, records: 30}, 30, 1},
		{"stranger", tableView{count: map[string]int{"a": 1, "b": 1, "c": 1}, records: 30}, 30, 1},
		{"rows", tableView{count: map[string]int{"a": 1, "b": 1}, records: 31}, 30, 1},
	} {
		if got := tableProblems(tc.v, ok, tc.rows); len(got) != tc.want {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}
