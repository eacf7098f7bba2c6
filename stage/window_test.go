package stage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/config"
)

// TestLiveGraphWindowServed runs the stage with WALKSTAGE_EDGE_WINDOW=10s
// (segments of 1.25 s) against kfake over TCP and gofakes3. The base is the
// directed cycle 0->1->2->3->0, every edge at time 1 s. A first edge record
// inserts 0->10 at 11 s; a request waiting for it walks 1,2,3,0: the
// base's edges are inside the window of event time 11 s (the cut is 0 s). The next record
// inserts 10->11 and 11->0 at 20 s: the event time moves to 20 s, the cut
// to 10 s, and every base edge goes; a third inserts 2->3 at 2 s, older
// than the window, never walkable. A request waiting for both then walks
// 0,10,11,0,10 from 0 and stops at once from 1 and 2: the walks no longer
// take an evicted edge. The window's series count 4 edges evicted, 1 late,
// and report event time 20 s and cutoff 10 s.
func TestLiveGraphWindowServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	brokers, outURL, bucket, path := timedCycleStage(t, "cycle", [4]int64{1000, 1000, 1000, 1000})
	rt, _ := runStage(t, stageEnviron(brokers, path, outURL, "WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=10s",
		"WALKSTAGE_EDGE_PUBLISH_INTERVAL=10ms", "WALKSTAGE_EDGE_OFFSETS_WAIT=30s"))
	edges := func(recs ...string) {
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
		defer w.Close()
		for _, r := range recs {
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(r)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	walkReq := func(id string, seeds []int, length int, upto int) kafka.Message {
		return request(id, map[string]any{"algorithm": "deepwalk", "seeds": seeds, "length": length, "walks_per_seed": 3,
			"edge_offsets": map[string]int{"0": upto}})
	}
	obs := newObserver(brokers, "out")
	defer obs.Close()
	walked := func(id string, want map[int64][]int64, wantWalks int) {
		t.Helper()
		events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m[id]) > 0 })
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		ev := events[id][0]
		if ev.Status != message.StatusSucceeded || ev.Walks != int64(wantWalks) {
			t.Fatalf("%s: %+v", id, ev)
		}
		if got := liveWalks(t, ctx, bucket, ev); len(got) != wantWalks || !walksAre(got, want) {
			t.Fatalf("%s walks %v, want each as %v", id, got, want)
		}
	}

	produce(t, brokers, "in", walkReq("inside", []int{1}, 3, 1))
	edges(`{"op":"insert","src":0,"dst":10,"time":11000}`)
	walked("inside", map[int64][]int64{1: {1, 2, 3, 0}}, 3)

	produce(t, brokers, "in", walkReq("slid", []int{0, 1, 2}, 4, 3))
	edges(`[{"op":"insert","src":10,"dst":11,"time":20000},{"op":"insert","src":11,"dst":0,"time":20000}]`,
		`{"op":"insert","src":2,"dst":3,"time":2000}`)
	walked("slid", map[int64][]int64{0: {0, 10, 11, 0, 10}, 1: {1}, 2: {2}}, 9)

	// The series are set at each publication, just after the snapshot
	// that the walks waited for.
	series := func() map[string]float64 {
		mfs, err := rt.o.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := mf.GetName()
				for _, lp := range m.GetLabel() {
					key += "/" + lp.GetValue()
				}
				got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return got
	}
	want := map[string]float64{"walkstage_live_evicted_edges_total/window": 4, "walkstage_live_evicted_edges_total/late": 1,
		"walkstage_live_window_evictions_total": 3, "walkstage_live_event_time_seconds": 20, "walkstage_live_window_cutoff_seconds": 10}
	match := func() bool {
		got := series()
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for !match() {
		if time.Now().After(deadline) {
			got := series()
			for k := range want {
				t.Errorf("%s = %v, want %v", k, got[k], want[k])
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLiveGraphWindowNeedsTimes: WALKSTAGE_EDGE_WINDOW over a graph
// without edge times stops the start-up with an error naming the setting
// and the cause, before anything is dialled.
func TestLiveGraphWindowNeedsTimes(t *testing.T) {
	dir := t.TempDir()
	path, _ := testGraph(t, 8)
	c, err := config.Load(stageEnviron([]string{"127.0.0.1:1"}, path, "file://"+dir, "WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_WINDOW=48h"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := fromConfig(context.Background(), c, testLog(t), "test", nil, nil, nil)
	if err == nil {
		rt.Close()
		t.Fatal("the stage started")
	}
	if !strings.Contains(err.Error(), "WALKSTAGE_EDGE_WINDOW") || !strings.Contains(err.Error(), "needs edge times") {
		t.Fatalf("error %q, want one naming WALKSTAGE_EDGE_WINDOW and the missing edge times", err)
	}
}
