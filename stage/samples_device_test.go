package stage

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk/cpu"
)

// deviceCPU is a graphsample.DeviceSampler backed by the CPU engine: it takes
// neighbour sampling without replacement, as the GPU engine does, and
// samples one instance a call, so what reached it shows in instances.
type deviceCPU struct {
	*cpu.Engine
	g         *graph.Graph
	instances atomic.Int64
}

var _ graphsample.DeviceSampler = (*deviceCPU)(nil)

func (d *deviceCPU) Name() string { return "gpu" }

func (d *deviceCPU) SamplesOnDevice(p graphsample.SampleParams) bool {
	return p.Kind == graphsample.NeighborSampling && !p.Replace && p.EdgeBias.Kind != graphsample.BiasLabel
}

func (d *deviceCPU) SampleRangeOnDevice(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, graphsample.SampleStats, error) {
	var out [][]graphsample.SampledEdge
	var st graphsample.SampleStats
	for i := first; i < first+count; i++ {
		one, s, err := graphsample.SampleRange(ctx, d.g, p, starts, i, 1, 1)
		if err != nil {
			return nil, st, err
		}
		out, st.Instances, st.Edges = append(out, one...), st.Instances+s.Instances, st.Edges+s.Edges
		d.instances.Add(1)
	}
	return out, st, nil
}

// The stage samples on the engine's device what the device takes and the
// rest on the CPU; the manifest and the event name the engine that
// sampled, and the rows are graphsample.Sample's either way.
func TestStageSamplesOnTheDevice(t *testing.T) {
	ctx := context.Background()
	_, g := testGraphCached(t)
	cpu, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	dev := &deviceCPU{Engine: cpu, g: g}
	dir := t.TempDir()
	bucket, err := store.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	src, evs := newMemSource(), &memEvents{}
	s, err := New(Options{Graph: g, Engine: dev, Source: src, Events: evs, Bucket: bucket, BucketURL: "file://" + dir,
		Prefix: "walks", Logger: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, ctx, s)

	var seeds []int64
	for v := uint32(0); len(seeds) < 30; v++ {
		if g.Degree(v) > 0 {
			seeds = append(seeds, g.ExternalID(v))
		}
	}
	bodies := map[string]map[string]any{
		"nbr":   {"algorithm": "neighbor", "fanouts": []int{4, 3}, "instances_per_seed": 2, "seeds": seeds, "rng_seed": "5"},
		"nbr-w": {"algorithm": "neighbor", "fanouts": []int{2, 2}, "weighted": true, "seeds": seeds},
		"nbr-r": {"algorithm": "neighbor", "fanouts": []int{3}, "replace": true, "seeds": seeds},
		"layer": {"algorithm": "layer", "layer_sizes": []int{5, 8}, "seeds": seeds[:4]},
	}
	wantEngine := map[string]string{"nbr": "gpu", "nbr-w": "gpu", "nbr-r": "cpu", "layer": "cpu"}
	reqs := map[string]*message.Request{}
	for id, body := range bodies {
		body["version"], body["batch_id"] = 1, id
		v, _ := json.Marshal(body)
		r, err := message.DecodeRequest([]byte(id), v, g, message.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		reqs[id] = r
		src.send(t, id, string(v))
	}
	waitFor(t, "4 events", 30*time.Second, func() bool { return len(evs.all()) >= 4 })
	var onDevice int64
	for _, ev := range evs.all() {
		r := reqs[ev.BatchID]
		if ev.Status != message.StatusSucceeded {
			t.Fatalf("%s: %s %s", ev.BatchID, ev.Status, ev.Error)
		}
		if ev.Engine != wantEngine[ev.BatchID] {
			t.Errorf("%s: event engine %q, want %q", ev.BatchID, ev.Engine, wantEngine[ev.BatchID])
		}
		m, err := output.ReadManifest(ctx, bucket, strings.TrimPrefix(ev.Manifest, "file://"+dir+"/"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Engine != ev.Engine {
			t.Errorf("%s: manifest engine %q, event %q", ev.BatchID, m.Engine, ev.Engine)
		}
		edges, _, err := graphsample.Sample(ctx, g, r.Sample.Params, r.Starts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Engine == "gpu" {
			onDevice += int64(len(edges))
		}
		var want, got []sink.SampleRow
		for i, es := range edges {
			for _, e := range es {
				want = append(want, sink.SampleRow{InstanceID: int64(i), Seed: r.Seeds[i/r.Sample.Params.InstancesPerSeed], Hop: e.Hop,
					Src: g.ExternalID(e.Src), Dst: g.ExternalID(e.Dst)})
			}
		}
		for _, o := range ev.Objects {
			data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "file://"+dir+"/"))
			if err != nil {
				t.Fatal(err)
			}
			rows, err := parquet.Read[sink.SampleRow](bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d rows, graphsample.Sample's %d differ", ev.BatchID, len(got), len(want))
		}
	}
	if n := dev.instances.Load(); n != onDevice {
		t.Errorf("the device sampled %d instances, the neighbour batches have %d", n, onDevice)
	}
}
