package stage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/source"
)

// TestTablesHoldEveryBatchOnce: with WALKSTAGE_TABLE_CATALOG set, every
// succeeded batch is in its kind's Iceberg table before its event, read back
// by iceberg-go row for row (walks and visits tables); a request
// redelivered after its event adds no rows and no snapshot; a rejected
// request is in no table.
func TestTablesHoldEveryBatchOnce(t *testing.T) {
	brokers := startKafka(t, 2)
	gpath, _ := testGraph(t, 10)
	catalog := "file://" + t.TempDir()
	runStage(t, stageEnviron(brokers, gpath, "file://"+t.TempDir(), "WALKSTAGE_TABLE_CATALOG="+catalog,
		"WALKSTAGE_LOG_LEVEL=warn"))
	obs := newObserver(brokers, "out")
	defer obs.Close()

	var msgs []kafka.Message
	walksIDs := map[string]bool{}
	for i := range 8 {
		id := fmt.Sprintf("tw-%d", i)
		walksIDs[id] = true
		msgs = append(msgs, requestRaw(id, fmt.Sprintf(`{"version":1,"batch_id":%q,"algorithm":"deepwalk","length":5,"seed_range":{"first":%d,"count":%d}}`, id, i*10, 20+i)))
	}
	msgs = append(msgs, requestRaw("tv-0", `{"version":1,"batch_id":"tv-0","algorithm":"ppr","output":"visits","stop_probability":0.2,"top_k":5,"steps_per_query":1000,"seeds":[1,2,3]}`),
		requestRaw("tbad", `{"version":1,"batch_id":"tbad","algorithm":"nope"}`))
	produce(t, brokers, "in", msgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	events, err := obs.events(ctx, func(m map[string][]source.Event) bool { return len(m) >= len(msgs) })
	if err != nil {
		t.Fatal(err)
	}
	var wantWalks int64
	for id := range walksIDs {
		ev := events[id][0]
		if ev.Status != source.StatusSucceeded {
			t.Fatalf("%s: %+v", id, ev)
		}
		wantWalks += ev.Walks
	}
	if events["tv-0"][0].Status != source.StatusSucceeded {
		t.Fatalf("visits: %+v", events["tv-0"][0])
	}

	tb, err := icetable.Open(ctx, icetable.Options{Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	rows := func(kind string) (int64, int) {
		tbl, err := tb.Table(ctx, kind)
		if err != nil {
			t.Fatal(err)
		}
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer at.Release()
		return at.NumRows(), len(tbl.Metadata().Snapshots())
	}
	gotWalks, snaps := rows("walks")
	if gotWalks != wantWalks {
		t.Errorf("walks table: %d rows, the events say %d walks", gotWalks, wantWalks)
	}
	if n, _ := rows("visits"); n != 3 {
		t.Errorf("visits table: %d rows, want 3 (one per query)", n)
	}
	have, err := tb.Committed(ctx, "walks")
	if err != nil {
		t.Fatal(err)
	}
	for id := range walksIDs {
		if _, ok := have[id]; !ok {
			t.Errorf("batch %s is not in the walks table's snapshots", id)
		}
	}
	if _, ok := have["tbad"]; ok {
		t.Error("a rejected request is in the table")
	}

	// A redelivery after the event: reported again, appended never.
	produce(t, brokers, "in", msgs[0])
	if _, err := obs.events(ctx, func(m map[string][]source.Event) bool { return len(m["tw-0"]) >= 1 }); err != nil {
		t.Fatal(err)
	}
	if n, s := rows("walks"); n != wantWalks || s != snaps {
		t.Errorf("after a redelivery: %d rows in %d snapshots, want %d in %d", n, s, wantWalks, snaps)
	}
}
