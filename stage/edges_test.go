package stage

import (
	"bytes"
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/livegraph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/config"
)

// TestLiveGraphServed runs the whole stage with WALKSTAGE_EDGE_TOPIC
// against kfake over TCP and gofakes3. The base is the directed cycle
// 0->1->2->3->0. Two read-your-writes requests are fetched and wait (the
// edge_offsets depth gauge says so) before any edge record exists; then
// the edge topic gets, on partition 0, a JSON insert 100->3 and a binary
// batch deleting 1->2 and inserting 1->100, and on partition 1 a record
// that does not decode and a JSON array inserting a second 0->1. Every
// DeepWalk from 1 must then be 1,100,3,0,1 and every one from the added
// vertex 100 (a seed only the updates create) 100,3,0,1,100: the walks
// use the inserted edges, the new vertex and its external id, and never
// the deleted 1->2. The event and the manifest carry the watermark
// {0: 2, 1: 2}, which lies past the bad record: it was dead-lettered and
// the stage kept serving. Node2Vec with its rejection sampler reads the
// delta as DeepWalk does (its walks from 1 are the same); with the ZPRS
// sampler, which does not read a delta yet, it walks the loaded cycle and
// carries no watermark, and is refused when it asks for edge_offsets;
// offsets that never come are rejected after WALKSTAGE_EDGE_OFFSETS_WAIT
// and dead-lettered.
func TestLiveGraphServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out", "dlq", "edges"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	outURL, bucket := startS3(t)
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}, {Src: 1, Dst: 2}, {Src: 2, Dst: 3}, {Src: 3, Dst: 0}},
		graph.BuildOptions{Name: "cycle", DenseIDs: true, Labelled: true}) // every label 0, metapath's schema [0]
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cycle.wsg")
	if err := graph.Save(path, base); err != nil {
		t.Fatal(err)
	}
	rt, _ := runStage(t, stageEnviron(brokers, path, outURL, "WALKSTAGE_EDGE_TOPIC=edges",
		"WALKSTAGE_EDGE_PUBLISH_INTERVAL=10ms", "WALKSTAGE_EDGE_OFFSETS_WAIT=8s"))

	walkReq := func(id, algo string, seeds []int, offsets map[string]int) kafka.Message {
		body := map[string]any{"algorithm": algo, "seeds": seeds, "length": 4, "walks_per_seed": 3}
		if algo == "node2vec" {
			body["p"], body["q"] = 0.5, 2
		}
		if algo == "metapath" {
			body["schema"] = []int{0}
		}
		if algo == "node2vec-zprs" {
			body["algorithm"], body["sampler"], body["p"], body["q"] = "node2vec", "zprs", 0.5, 2
		}
		if offsets != nil {
			body["edge_offsets"] = offsets
		}
		return request(id, body)
	}
	produce(t, brokers, "in",
		walkReq("ryw", "deepwalk", []int{1, 100}, map[string]int{"0": 2, "1": 2}),
		walkReq("live-n2v", "node2vec", []int{1}, map[string]int{"0": 2, "1": 2}),
		walkReq("live-mp", "metapath", []int{1}, map[string]int{"0": 2, "1": 2}),
		walkReq("too-far", "deepwalk", []int{1}, map[string]int{"0": 50}))
	// All four are fetched and wait for edge records not yet written.
	waiting := func() float64 {
		var m dto.Metric
		rt.m.edgeWaits.Write(&m)
		return m.GetGauge().GetValue()
	}
	for waiting() != 4 {
		if ctxsleep.Sleep(ctx, 10*time.Millisecond) != nil {
			t.Fatalf("requests waiting for their edge offsets: %v, want 4", waiting())
		}
	}
	produce(t, brokers, "in",
		walkReq("base-n2v", "node2vec-zprs", []int{1}, nil),
		walkReq("n2v-offsets", "node2vec-zprs", []int{1}, map[string]int{"0": 1}))
	bin := livegraph.AppendBinary(nil, []livegraph.Update{{Op: livegraph.Delete, Src: 1, Dst: 2}, {Op: livegraph.Insert, Src: 1, Dst: 100}})
	for p, recs := range [][]string{
		{`{"op":"insert","src":100,"dst":3}`, string(bin)},
		{`{oops`, `[{"op":"insert","src":0,"dst":"1"}]`},
	} {
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
			Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return p })}
		for _, r := range recs {
			if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(r)}); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
	}

	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == 6 })
	if err != nil {
		t.Fatalf("events %v: %v", events, err)
	}
	wantOffsets := map[int32]int64{0: 2, 1: 2}
	ryw := events["ryw"][0]
	if ryw.Status != message.StatusSucceeded || ryw.Walks != 6 || !maps.Equal(ryw.EdgeOffsets, wantOffsets) {
		t.Fatalf("ryw: %+v", ryw)
	}
	man, err := output.ReadManifest(ctx, bucket, strings.TrimPrefix(ryw.Manifest, "s3://walks/"))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(man.EdgeOffsets, wantOffsets) {
		t.Errorf("manifest edge_offsets %v, want %v", man.EdgeOffsets, wantOffsets)
	}
	wantWalks := map[int64][]int64{1: {1, 100, 3, 0, 1}, 100: {100, 3, 0, 1, 100}}
	if got := liveWalks(t, ctx, bucket, ryw); len(got) != 6 || !walksAre(got, wantWalks) {
		t.Errorf("ryw walks %v, want each as %v", got, wantWalks)
	}

	liveN2V := events["live-n2v"][0]
	if liveN2V.Status != message.StatusSucceeded || !maps.Equal(liveN2V.EdgeOffsets, wantOffsets) {
		t.Fatalf("live-n2v: %+v", liveN2V)
	}
	if got := liveWalks(t, ctx, bucket, liveN2V); len(got) != 3 || !walksAre(got, map[int64][]int64{1: {1, 100, 3, 0, 1}}) {
		t.Errorf("node2vec walks on the live graph %v, want 1,100,3,0,1", got)
	}
	liveMP := events["live-mp"][0]
	if liveMP.Status != message.StatusSucceeded || !maps.Equal(liveMP.EdgeOffsets, wantOffsets) {
		t.Fatalf("live-mp: %+v", liveMP)
	}
	if got := liveWalks(t, ctx, bucket, liveMP); len(got) != 3 || !walksAre(got, map[int64][]int64{1: {1, 100, 3, 0, 1}}) {
		t.Errorf("metapath walks on the live graph %v, want 1,100,3,0,1", got)
	}
	n2v := events["base-n2v"][0]
	if n2v.Status != message.StatusSucceeded || n2v.EdgeOffsets != nil {
		t.Fatalf("base-n2v: %+v", n2v)
	}
	if got := liveWalks(t, ctx, bucket, n2v); len(got) != 3 || !walksAre(got, map[int64][]int64{1: {1, 2, 3, 0, 1}}) {
		t.Errorf("node2vec walks %v, want the loaded cycle's", got)
	}
	for id, reason := range map[string]message.Reason{"n2v-offsets": message.ReasonInvalidParameters, "too-far": ReasonEdgeOffsetsUnavailable} {
		if ev := events[id][0]; ev.Status != message.StatusRejected || ev.Reason != string(reason) {
			t.Errorf("%s: want rejected/%s, got %+v", id, reason, ev)
		}
	}

	// Every request walked gave back the cores it held for the applier
	// (walkerLoad): one left held would keep the applier to its share.
	if got := rt.walkers.WalkerCores(); got != 0 {
		t.Errorf("after every event, the walks still hold %d cores", got)
	}

	// Dead letters: the two refused requests and the bad edge record.
	dlq := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "dlq-observer", Topic: "dlq", StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer dlq.Close()
	reasons := map[string]string{}
	for len(reasons) < 3 {
		m, err := dlq.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("dead letters %v: %v", reasons, err)
		}
		for _, h := range m.Headers {
			if h.Key == source.HeaderReason {
				id := string(m.Key)
				if id == "" {
					id = string(m.Value) // an edge record has no key
				}
				reasons[id] = string(h.Value)
			}
		}
	}
	want := map[string]string{"n2v-offsets": string(message.ReasonInvalidParameters),
		"too-far": string(ReasonEdgeOffsetsUnavailable), "{oops": source.ReasonBadEdgeUpdate}
	if !maps.Equal(reasons, want) {
		t.Errorf("dead letters %v, want %v", reasons, want)
	}
}

// liveWalks reads the walks of ev's objects.
func liveWalks(t *testing.T, ctx context.Context, bucket interface {
	ReadAll(context.Context, string) ([]byte, error)
}, ev message.Event) []sink.Row {
	t.Helper()
	var rows []sink.Row
	for _, o := range ev.Objects {
		data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "s3://walks/"))
		if err != nil {
			t.Fatal(err)
		}
		part, err := parquet.Read[sink.Row](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		rows = append(rows, part...)
	}
	return rows
}

// walksAre reports whether every walk is want's for its start.
func walksAre(rows []sink.Row, want map[int64][]int64) bool {
	for _, r := range rows {
		if !slices.Equal(r.Walk, want[r.Start]) {
			return false
		}
	}
	return true
}

// TestLiveGraphRefusedAtStart: with WALKSTAGE_EDGE_TOPIC set, a graph with
// string ids and an engine that does not walk snapshots (the out-of-core
// CPU engine, chosen by a host memory budget below the graph's) stop the
// start-up with an error that names the setting and the cause, before
// anything is dialled.
func TestLiveGraphRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	sg, err := graph.FromStringEdges([]graph.StringEdge{{Src: "a", Dst: "b"}, {Src: "b", Dst: "a"}}, graph.BuildOptions{Name: "users"})
	if err != nil {
		t.Fatal(err)
	}
	strPath := filepath.Join(dir, "users.wsg")
	if err := graph.Save(strPath, sg); err != nil {
		t.Fatal(err)
	}
	intPath, _ := testGraph(t, 8)
	for _, tc := range []struct {
		name, graph string
		env         []string
		want        string
	}{
		{"string ids", strPath, nil, "string ids do not take edge updates yet"},
		{"out of core", intPath, []string{"WALKSTAGE_HOST_MEMORY_LIMIT=32768"}, "cannot walk a live graph"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(stageEnviron([]string{"127.0.0.1:1"}, tc.graph, "file://"+dir, "WALKSTAGE_EDGE_TOPIC=edges"), tc.env...)
			c, err := config.Load(env)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := fromConfig(context.Background(), c, testLog(t), "test", nil, nil, nil)
			if err == nil {
				rt.Close()
				t.Fatal("the stage started")
			}
			if !strings.Contains(err.Error(), "WALKSTAGE_EDGE_TOPIC") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want one naming WALKSTAGE_EDGE_TOPIC and %q", err, tc.want)
			}
		})
	}
}

// TestLiveGraphTemporal: a temporal request on a stage with a live graph
// walks the snapshot, with the edge updates' times. The base is the timed
// cycle 0->1->2->3->0 at times 10, 20, 30, 40; the updates delete 1->2 and
// insert 1->100 at 25 and 100->3 at 27 (100 a vertex only the updates
// create). Every forward temporal walk from 1 is then 1,100,3,0 with times
// 25, 27, 40, and the manifest carries the watermark; a later insert 1->2
// at 5 is before every bound and never taken.
func TestLiveGraphTemporal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	brokers, outURL, bucket, path := timedCycleStage(t, "timed-cycle", [4]int64{10, 20, 30, 40})
	runStage(t, stageEnviron(brokers, path, outURL, "WALKSTAGE_EDGE_TOPIC=edges", "WALKSTAGE_EDGE_PUBLISH_INTERVAL=10ms"))
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "edges", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	for _, r := range []string{
		`[{"op":"delete","src":1,"dst":2},{"op":"insert","src":1,"dst":100,"time":25}]`,
		`{"op":"insert","src":100,"dst":3,"time":27}`,
		`{"op":"insert","src":1,"dst":2,"time":5}`,
	} {
		if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	produce(t, brokers, "in", request("temporal", map[string]any{"algorithm": "temporal", "time_bias": "exponential", "time_scale": 10,
		"start_time": 12, "seeds": []int{1}, "length": 3, "walks_per_seed": 4, "with_times": true, "edge_offsets": map[string]int{"0": 3}}))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == 1 })
	if err != nil {
		t.Fatalf("events %v: %v", events, err)
	}
	ev := events["temporal"][0]
	if ev.Status != message.StatusSucceeded || ev.Walks != 4 || !maps.Equal(ev.EdgeOffsets, map[int32]int64{0: 3}) {
		t.Fatalf("temporal: %+v", ev)
	}
	type timedRow struct {
		Start int64   `parquet:"start"`
		Walk  []int64 `parquet:"walk,list"`
		Times []int64 `parquet:"times,list"`
	}
	for _, o := range ev.Objects {
		data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "s3://walks/"))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := parquet.Read[timedRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		for _, r := range rows {
			if !slices.Equal(r.Walk, []int64{1, 100, 3, 0}) || !slices.Equal(r.Times[1:], []int64{25, 27, 40}) {
				t.Errorf("temporal walk %v at %v, want 1,100,3,0 at _,25,27,40", r.Walk, r.Times)
			}
		}
	}
}

// timedCycleStage is what a live-graph stage test on a timed cycle needs:
// a kfake cluster with the topics in, out, dlq and edges, an S3 store, and
// the directed cycle 0->1->2->3->0 with its edges at times saved as a .wsg.
func timedCycleStage(t *testing.T, name string, times [4]int64) (brokers []string, outURL string, bucket *blob.Bucket, path string) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq", "edges"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	outURL, bucket = startS3(t)
	base, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1, Time: times[0]}, {Src: 1, Dst: 2, Time: times[1]}, {Src: 2, Dst: 3, Time: times[2]}, {Src: 3, Dst: 0, Time: times[3]}},
		graph.BuildOptions{Name: name, DenseIDs: true, Timed: true})
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "cycle.wsg")
	if err := graph.Save(path, base); err != nil {
		t.Fatal(err)
	}
	return cluster.ListenAddrs(), outURL, bucket, path
}
