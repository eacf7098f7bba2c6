package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// noTemporal is the CPU engine under the GPU engine's name, refusing
// temporal jobs through walk.AlgorithmChecker and in Run, as the GPU
// engine refuses what it cannot walk (temporal walks of a graph not wholly
// on the device).
type noTemporal struct{ *cpu.Engine }

func (e noTemporal) Name() string { return "gpu" }

func (e noTemporal) Check(a walk.Algorithm) error {
	if a.Kind == walk.Temporal {
		return fmt.Errorf("%w: no temporal walks on this engine", walk.ErrInvalidAlgorithm)
	}
	return nil
}

func (e noTemporal) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	for _, j := range jobs {
		if err := e.Check(j.Algorithm); err != nil {
			return fmt.Errorf("job %d: %w", j.Tag, err)
		}
	}
	return e.Engine.Run(ctx, jobs, emit)
}

// A stage whose engine cannot walk temporal walks rejects a temporal
// request at intake, and the DeepWalk requests sent with it (which would
// share its micro-batch) still succeed.
func TestStageRefusesTemporalOnAnEngineWithout(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 8, EdgeFactor: 4, Seed: 2, Name: "rmat", TimeSpan: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cpu, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cpu.Close() })
	dir := t.TempDir()
	bucket, err := store.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bucket.Close() })
	src, evs := newMemSource(), &memEvents{}
	s, err := New(Options{Graph: g, Engine: noTemporal{cpu}, Source: src, Events: evs, Bucket: bucket, BucketURL: "file://" + dir,
		Prefix: "walks", Logger: testLog(t), MicroBatchMaxWait: 200 * time.Millisecond, MicroBatchMaxRequests: 10})
	if err != nil {
		t.Fatal(err)
	}
	serveInBackground(t, ctx, s)
	bodies := map[string]map[string]any{
		"dw-a": {"algorithm": "deepwalk", "length": 5, "seed_range": map[string]int{"first": 0, "count": 20}},
		"tw":   {"algorithm": "temporal", "length": 5, "seed_range": map[string]int{"first": 0, "count": 20}},
		"dw-b": {"algorithm": "deepwalk", "length": 5, "seed_range": map[string]int{"first": 20, "count": 20}},
	}
	for _, id := range []string{"dw-a", "tw", "dw-b"} {
		body := bodies[id]
		body["version"], body["batch_id"] = 1, id
		v, _ := json.Marshal(body)
		// memSource.send decodes against the untimed test graph.
		req, err := message.DecodeRequest([]byte(id), v, g, message.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		src.ch <- &source.Delivery{Received: time.Now(), Request: req, Ack: func(context.Context, error) error { return nil }}
	}
	waitFor(t, "3 events", 30*time.Second, func() bool { return len(evs.all()) >= 3 })
	for _, ev := range evs.all() {
		switch ev.BatchID {
		case "tw":
			if ev.Status != message.StatusRejected || ev.Reason != string(message.ReasonInvalidParameters) ||
				!strings.Contains(ev.Error, "this replica's gpu engine cannot walk it") || !strings.Contains(ev.Error, "no temporal walks on this engine") {
				t.Errorf("tw: %s %s %s", ev.Status, ev.Reason, ev.Error)
			}
		default:
			if ev.Status != message.StatusSucceeded {
				t.Errorf("%s beside a temporal request: %s %s %s", ev.BatchID, ev.Status, ev.Reason, ev.Error)
			}
		}
	}
}
