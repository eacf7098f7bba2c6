package stage

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/segmentio/kafka-go"

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
		ev := events[id][0]
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
		if ev.Walks != st.Instances || ev.Steps != st.Edges || st.Edges == 0 || !strings.HasPrefix(ev.Algorithm, r.Sample.Params.Kind.String()) {
			t.Errorf("%s: event walks %d steps %d algorithm %q, want %d instances %d edges", id, ev.Walks, ev.Steps, ev.Algorithm, st.Instances, st.Edges)
		}
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
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d rows differ from graphsample.Sample's %d", id, len(got), len(want))
		}
	}
	// A resubmission is answered from the manifest: same objects.
	produce(t, brokers, "in", request("nbr-1", bodies["nbr-1"]))
	events2, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["nbr-1"]) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if a, b := events2["nbr-1"][0], events["nbr-1"][0]; !slices.Equal(a.Objects, b.Objects) || a.Steps != b.Steps {
		t.Errorf("resubmission wrote again: %v vs %v", a.Objects, b.Objects)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
