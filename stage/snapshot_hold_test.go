package stage

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// holdingEngine is the CPU engine saying, as the GPU engine says of its
// temporal walks, that a temporal job on a new snapshot costs it a copy
// (walk.SnapshotHolder).
type holdingEngine struct{ *cpu.Engine }

func (holdingEngine) HoldsSnapshot(a walk.Algorithm) bool { return a.Kind == walk.Temporal }

// TestStageHoldsTheSnapshotForCostlyRequests: with a snapshot hold, a
// temporal request on an engine that pays to change snapshots walks the
// snapshot the one before it walked, after newer ones are published (its
// event carries that snapshot's watermark); a DeepWalk request beside it
// walks the newest, and so does a temporal request whose edge_offsets
// only the newest holds.
func TestStageHoldsTheSnapshotForCostlyRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 8, EdgeFactor: 4, Seed: 2, Name: "held", TimeSpan: 1000})
	if err != nil {
		t.Fatal(err)
	}
	l, err := livegraph.New(g)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(off int64) {
		if err := l.Apply(0, off, []livegraph.Update{{Op: livegraph.Insert, Src: 1, Dst: 2 + off, Time: 500 + off, Has: livegraph.HasTime}}); err != nil {
			t.Fatal(err)
		}
		l.Publish()
	}
	apply(0)
	e, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	dir := t.TempDir()
	bucket, err := store.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	src, evs := newMemSource(), &memEvents{}
	s, err := New(Options{Graph: g, Engine: holdingEngine{e}, Source: src, Events: evs, Bucket: bucket, BucketURL: "file://" + dir,
		Prefix: "walks", Logger: testLog(t), MicroBatchMaxWait: 20 * time.Millisecond, MicroBatchMaxRequests: 1,
		Live: &LiveOptions{Graph: l, SnapshotHold: time.Hour, OffsetsWait: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, ctx, s)
	send := func(id string, body map[string]any) message.Event {
		t.Helper()
		body["version"], body["batch_id"] = 1, id
		v, _ := json.Marshal(body)
		req, err := message.DecodeRequest([]byte(id), v, g, message.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		src.ch <- &source.Delivery{Received: time.Now(), Request: req, Ack: func(context.Context, error) error { return nil }}
		var ev message.Event
		waitFor(t, "the event of "+id, 30*time.Second, func() bool {
			for _, e := range evs.all() {
				if e.BatchID == id {
					ev = e
					return true
				}
			}
			return false
		})
		if ev.Status != message.StatusSucceeded {
			t.Fatalf("%s: %s %s %s", id, ev.Status, ev.Reason, ev.Error)
		}
		return ev
	}
	temporal := func() map[string]any {
		return map[string]any{"algorithm": "temporal", "length": 5, "seed_range": map[string]int{"first": 0, "count": 20}}
	}
	first, second := map[int32]int64{0: 1}, map[int32]int64{0: 2}
	if ev := send("t1", temporal()); !maps.Equal(ev.EdgeOffsets, first) {
		t.Fatalf("t1 walked %v, want %v", ev.EdgeOffsets, first)
	}
	apply(1)
	if ev := send("t2", temporal()); !maps.Equal(ev.EdgeOffsets, first) {
		t.Fatalf("t2 walked %v, want the held %v", ev.EdgeOffsets, first)
	}
	if ev := send("d1", map[string]any{"algorithm": "deepwalk", "length": 5, "seed_range": map[string]int{"first": 0, "count": 20}}); !maps.Equal(ev.EdgeOffsets, second) {
		t.Fatalf("d1 walked %v, want the newest %v", ev.EdgeOffsets, second)
	}
	ryw := temporal()
	ryw["edge_offsets"] = map[string]int{"0": 2}
	if ev := send("t3", ryw); !maps.Equal(ev.EdgeOffsets, second) {
		t.Fatalf("t3 (edge_offsets %v) walked %v", second, ev.EdgeOffsets)
	}
	if ev := send("t4", temporal()); !maps.Equal(ev.EdgeOffsets, second) {
		t.Fatalf("t4 walked %v, want %v, held since t3", ev.EdgeOffsets, second)
	}
}
