package stage

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/segmentio/kafka-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
)

// TestStageSamples sends sampling requests through the stage (kfake over
// TCP, gofakes3) beside a walk request in the same micro-batch: the rows
// read back equal graphsample.Sample run directly, the event counts instances and
// edges, a resubmission is answered from the manifest, and a neighbor
// request without fanouts is rejected.
func TestStageSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	outURL, bucket := startS3(t)
	gpath, g := testGraph(t, 10)
	_, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_CPU_WORKERS=2", "WALKSTAGE_MICROBATCH_MAX_WAIT=50ms"))

	var seeds []int64
	for v := uint32(0); len(seeds) < 40; v++ {
		if g.Degree(v) > 0 {
			seeds = append(seeds, g.ExternalID(v))
		}
	}
	bodies := map[string]map[string]any{
		"nbr-1": {"algorithm": "neighbor", "fanouts": []int{5, 3}, "weighted": true, "instances_per_seed": 2,
			"edge_weight": true, "seeds": seeds, "rng_seed": "77"},
		"fire-1":  {"algorithm": "forest_fire", "burn_probability": 0.7, "depth": 2, "max_vertices": 30, "seeds": seeds},
		"mdrw-1":  {"algorithm": "frontier", "frontier_size": 4, "samples": 100, "seeds": seeds},
		"layer-1": {"algorithm": "layer", "layer_sizes": []int{10, 20}, "seeds": seeds[:5]},
	}
	msgs := []kafka.Message{request("walks-1", map[string]any{"algorithm": "deepwalk", "length": 5, "seeds": seeds[:10]}),
		request("nbr-bad", map[string]any{"algorithm": "neighbor", "seeds": seeds[:1]})}
	for id, body := range bodies {
		msgs = append(msgs, request(id, body))
	}
	produce(t, brokers, "in", msgs...)
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == 6 })
	if err != nil {
		t.Fatalf("events: %v (%d of 6)", err, len(events))
	}
	if ev := events["nbr-bad"][0]; ev.Status != message.StatusRejected || ev.Reason != string(message.ReasonInvalidParameters) ||
		!strings.Contains(ev.Error, "fanouts is required") {
		t.Errorf("nbr-bad: %+v", ev)
	}
	if ev := events["walks-1"][0]; ev.Status != message.StatusSucceeded || ev.Walks != 10 {
		t.Errorf("walks-1 beside samples: %+v", ev)
	}
	for id, body := range bodies {
		checkSampledAlone(ctx, t, g, bucket, id, body, events[id][0])
	}
	checkResubmissionFromManifest(ctx, t, brokers, obs, "nbr-1", bodies["nbr-1"], events["nbr-1"][0])
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// wantSampleRows are the rows of r's samples edges (graphsample's, per
// instance), as the stage writes them (edge weights when r asks).
func wantSampleRows(g *graph.Graph, r *message.Request, edges [][]graphsample.SampledEdge) []sink.WeightedSampleRow {
	var want []sink.WeightedSampleRow
	per := r.Sample.Params.SeedsPerInstance()
	for i, es := range edges {
		for _, e := range es {
			row := sink.WeightedSampleRow{InstanceID: int64(i), Seed: r.Seeds[i/r.Sample.Params.InstancesPerSeed*per], Hop: e.Hop,
				Src: g.ExternalID(e.Src), Dst: g.ExternalID(e.Dst)}
			if r.Sample.EdgeWeight {
				row.EdgeWeight = g.Weights[e.Edge]
			}
			want = append(want, row)
		}
	}
	return want
}

// readSampleRows reads back the Parquet rows of batch id's objects
// (ev.Objects), in order.
func readSampleRows(ctx context.Context, t *testing.T, bucket *blob.Bucket, id string, r *message.Request, ev message.Event) []sink.WeightedSampleRow {
	t.Helper()
	var got []sink.WeightedSampleRow
	for _, o := range ev.Objects {
		if !strings.Contains(o, "/kind=samples/graph=rmat/algorithm="+r.Sample.Params.Kind.String()+"/") {
			t.Errorf("%s: object %s", id, o)
		}
		data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "s3://walks/"))
		if err != nil {
			t.Fatal(err)
		}
		if r.Sample.EdgeWeight {
			rows, err := parquet.Read[sink.WeightedSampleRow](bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
			continue
		}
		rows, err := parquet.Read[sink.SampleRow](bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rows {
			got = append(got, sink.WeightedSampleRow{InstanceID: x.InstanceID, Seed: x.Seed, Hop: x.Hop, Src: x.Src, Dst: x.Dst})
		}
	}
	return got
}

// TestStageSamplesMergedAcrossRequests produces a backlog of small sampling
// requests (kfake over TCP, gofakes3) before the stage starts, so that one
// micro-batch holds them: those with the same parameters but for the seed
// are sampled in merged calls (the metrics count them), and every
// request's Parquet rows are still exactly those it gets alone
// (graphsample.Sample with its own seed and seeds), edge weights included.
func TestStageSamplesMergedAcrossRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	outURL, bucket := startS3(t)
	gpath, g := testGraph(t, 10)
	var seeds []int64
	for v := uint32(0); len(seeds) < 60; v++ {
		if g.Degree(v) > 0 {
			seeds = append(seeds, g.ExternalID(v))
		}
	}
	bodies := map[string]map[string]any{}
	var msgs []kafka.Message
	add := func(id string, body map[string]any) {
		bodies[id] = body
		msgs = append(msgs, request(id, body))
	}
	// Five neighbour requests of one kind (two of them with edge weights:
	// a group of their own), different seeds and rng_seeds; three frontier
	// walks whose seed sets repeat three times; a layer request alone.
	for k := range 5 {
		add(fmt.Sprintf("nbr-%d", k), map[string]any{"algorithm": "neighbor", "fanouts": []int{5, 3}, "weighted": true,
			"instances_per_seed": 2, "edge_weight": k >= 3, "seeds": seeds[k*7 : k*7+5+k], "rng_seed": fmt.Sprint(100 + k)})
	}
	for k := range 3 {
		add(fmt.Sprintf("mdrw-%d", k), map[string]any{"algorithm": "frontier", "frontier_size": 4, "samples": 30,
			"instances_per_seed": 3, "seeds": seeds[k*8 : k*8+8], "rng_seed": fmt.Sprint(k)})
	}
	add("layer-1", map[string]any{"algorithm": "layer", "layer_sizes": []int{10, 20}, "seeds": seeds[:5]})
	produce(t, brokers, "in", msgs...)
	rt, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_CPU_WORKERS=2", "WALKSTAGE_MICROBATCH_MAX_WAIT=2s"))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == len(bodies) })
	if err != nil {
		t.Fatalf("events: %v (%d of %d)", err, len(events), len(bodies))
	}
	for id, body := range bodies {
		checkSampledAlone(ctx, t, g, bucket, id, body, events[id][0])
	}
	// One micro-batch: three merged calls (neighbour without and with edge
	// weights, frontier) of eight requests, the layer request alone.
	merged, calls := metricValue(rt.m.sampleMerged), metricValue(rt.m.sampleCalls.WithLabelValues("merged"))
	alone := metricValue(rt.m.sampleCalls.WithLabelValues("alone"))
	t.Logf("merged calls %v of %v requests, calls alone %v", calls, merged, alone)
	if merged < 2 || calls < 1 || merged+alone != float64(len(bodies)) {
		t.Errorf("%v merged calls of %v requests and %v alone for %d requests: not merged", calls, merged, alone, len(bodies))
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// checkSampledAlone checks request id's (body) succeeded event ev and its
// rows in bucket against graphsample.Sample of the request alone: the
// event's instances, edges and algorithm, and every row.
func checkSampledAlone(ctx context.Context, t *testing.T, g *graph.Graph, bucket *blob.Bucket, id string, body map[string]any, ev message.Event) {
	t.Helper()
	if ev.Status != message.StatusSucceeded {
		t.Fatalf("%s: %s %s", id, ev.Status, ev.Error)
	}
	req := body
	req["version"], req["batch_id"] = 1, id
	r, err := message.DecodeRequest([]byte(id), request(id, req).Value, g, message.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	edges, st, err := graphsample.Sample(ctx, g, r.Sample.Params, r.Starts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Walks != st.Instances || ev.Steps != st.Edges || st.Edges == 0 || !strings.HasPrefix(ev.Algorithm, r.Sample.Params.Kind.String()) {
		t.Errorf("%s: event walks %d steps %d algorithm %q, want %d instances %d edges", id, ev.Walks, ev.Steps, ev.Algorithm, st.Instances, st.Edges)
	}
	want := wantSampleRows(g, r, edges)
	if got := readSampleRows(ctx, t, bucket, id, r, ev); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: %d rows differ from graphsample.Sample's %d alone", id, len(got), len(want))
	}
}
