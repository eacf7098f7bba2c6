package stage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/config"
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
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) >= len(msgs) })
	if err != nil {
		t.Fatal(err)
	}
	var wantWalks int64
	for id := range walksIDs {
		ev := events[id][0]
		if ev.Status != message.StatusSucceeded {
			t.Fatalf("%s: %+v", id, ev)
		}
		wantWalks += ev.Walks
	}
	if events["tv-0"][0].Status != message.StatusSucceeded {
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
	if _, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["tw-0"]) >= 1 }); err != nil {
		t.Fatal(err)
	}
	if n, s := rows("walks"); n != wantWalks || s != snaps {
		t.Errorf("after a redelivery: %d rows in %d snapshots, want %d in %d", n, s, wantWalks, snaps)
	}
}

// gatedTables holds every Append until open is closed, counting how many
// wait at once, then passes them on to the real tables.
type gatedTables struct {
	inner   Tables
	open    chan struct{}
	mu      sync.Mutex
	waiting int
	most    chan int // the count after each arrival
}

func (g *gatedTables) Append(ctx context.Context, b icetable.Batch) error {
	g.mu.Lock()
	g.waiting++
	g.most <- g.waiting
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.inner.Append(ctx, b)
}

// TestBatchesWaitForTheTableOutsideTheWindow: a batch whose objects are
// durable waits for its table commit without its in-flight slot, so with
// MAX_IN_FLIGHT=2 and the commits held back, more than two batches walk,
// write and wait; once commits go through, every event succeeds and the
// table holds every batch.
func TestBatchesWaitForTheTableOutsideTheWindow(t *testing.T) {
	brokers := startKafka(t, 2)
	gpath, _ := testGraph(t, 10)
	catalog := "file://" + t.TempDir()
	c, err := config.Load(stageEnviron(brokers, gpath, "file://"+t.TempDir(), "WALKSTAGE_TABLE_CATALOG="+catalog,
		"WALKSTAGE_MAX_IN_FLIGHT=2", "WALKSTAGE_MICROBATCH_MAX_REQUESTS=1", "WALKSTAGE_LOG_LEVEL=warn"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := fromConfig(context.Background(), c, testLog(t), "test", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	gate := &gatedTables{inner: rt.o.Tables, open: make(chan struct{}), most: make(chan int, 100)}
	rt.o.Tables = gate
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const n = 8
	var msgs []kafka.Message
	for i := range n {
		id := fmt.Sprintf("gw-%d", i)
		msgs = append(msgs, requestRaw(id, fmt.Sprintf(`{"version":1,"batch_id":%q,"algorithm":"deepwalk","length":5,"seed_range":{"first":%d,"count":10}}`, id, i*10)))
	}
	produce(t, brokers, "in", msgs...)
	deadline := time.After(60 * time.Second)
	for waiting := 0; waiting <= c.MaxInFlight; {
		select {
		case waiting = <-gate.most:
		case <-deadline:
			t.Fatalf("only %d batches reached their table commit with %d in-flight slots: waiting batches hold their slots", waiting, c.MaxInFlight)
		}
	}
	close(gate.open)
	obs := newObserver(brokers, "out")
	defer obs.Close()
	ectx, ecancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ecancel()
	events, err := obs.events(ectx, func(m map[string][]message.Event) bool { return len(m) >= n })
	if err != nil {
		t.Fatal(err)
	}
	tb, err := icetable.Open(ectx, icetable.Options{Catalog: catalog})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	have, err := tb.Committed(ectx, "walks")
	if err != nil {
		t.Fatal(err)
	}
	for id, evs := range events {
		if evs[0].Status != message.StatusSucceeded || have[id] == "" {
			t.Errorf("%s: event %+v, in the table: %v", id, evs[0], have[id] != "")
		}
	}
}
