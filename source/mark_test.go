package source

import (
	"context"
	"testing"
	"time"
)

// TestMarkTellsARecreatedLogApart: the mark of a record (timestamp, key)
// read back by offset is the record's own, and the record a recreated topic
// holds at the same offset has another, so a reader whose position the new
// log has already passed still finds out (sameLog).
func TestMarkTellsARecreatedLogApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	port := freePort(t)
	cluster := startCluster(t, port, "in")
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	produce(t, ctx, brokers, "in", goodMsg("a0"), goodMsg("a1"), goodMsg("a2"))
	tc, err := newTopicChecker(KafkaOptions{Brokers: brokers}, 5*time.Second, "in")
	if err != nil {
		t.Fatal(err)
	}
	old, ok, err := tc.markAt(ctx, "in", 0, 1)
	if err != nil || !ok {
		t.Fatalf("mark of offset 1: ok %v, err %v", ok, err)
	}
	want := markOf(goodMsg("a1"))
	if old.off != 1 || old.key != want.key || old.ts <= 0 {
		t.Fatalf("mark of offset 1 is %+v, want offset 1, key %x and a timestamp", old, want.key)
	}
	again, _, _ := tc.markAt(ctx, "in", 0, 1)
	if again != old {
		t.Fatalf("the same record read twice: %+v then %+v", old, again)
	}
	if _, ok, err := tc.markAt(ctx, "in", 0, 7); ok || err != nil {
		t.Errorf("offset 7 of a 3-record log: ok %v, err %v", ok, err)
	}

	if err := cluster.DeleteTopic("in"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("in", 1, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // a later timestamp is not what this relies on: the keys differ too
	produce(t, ctx, brokers, "in", goodMsg("b0"), goodMsg("b1"), goodMsg("b2"), goodMsg("b3"))
	var now recordMark
	deadline := time.Now().Add(10 * time.Second)
	for {
		now, ok, err = tc.markAt(ctx, "in", 0, 1)
		if ok && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mark of offset 1 of the recreated topic: ok %v, err %v", ok, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if now == old {
		t.Fatalf("the recreated topic's record at offset 1 has the old record's mark %+v", now)
	}
}
