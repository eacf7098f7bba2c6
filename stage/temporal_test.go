package stage

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// TestStageTemporal sends temporal requests through the stage (kfake over
// TCP, gofakes3) in one micro-batch with a DeepWalk request: the one with
// with_times gets the times column, equal to the CPU engine's walks and
// times run directly; the one without has the walks' four columns only.
func TestStageTemporal(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	outURL, bucket := startS3(t)
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 9, EdgeFactor: 8, Seed: 1, Weighted: true, Name: "rmat", TimeSpan: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	gpath := filepath.Join(t.TempDir(), "timed.wsg")
	if err := graph.Save(gpath, g); err != nil {
		t.Fatal(err)
	}
	_, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_CPU_WORKERS=2", "WALKSTAGE_MICROBATCH_MAX_WAIT=50ms"))
	bodies := map[string]map[string]any{
		"tw-1": {"algorithm": "temporal", "time_bias": "exponential", "time_scale": 20000, "start_time": 100000,
			"max_time_gap": 300000, "weighted": true, "with_times": true, "length": 12, "walks_per_seed": 3,
			"seed_range": map[string]int{"first": 0, "count": 200}},
		"tw-2": {"algorithm": "temporal", "time_bias": "linear", "direction": "backward", "length": 8,
			"seed_range": map[string]int{"first": 0, "count": 100}},
		"dw-1": {"algorithm": "deepwalk", "length": 5, "seed_range": map[string]int{"first": 0, "count": 50}},
	}
	for id, body := range bodies {
		produce(t, brokers, "in", request(id, body))
	}
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == len(bodies) })
	if err != nil {
		t.Fatalf("events: %v (%d of %d)", err, len(events), len(bodies))
	}
	type timedRow struct {
		WalkID int64   `parquet:"walk_id"`
		Walk   []int64 `parquet:"walk,list"`
		Times  []int64 `parquet:"times,list"`
	}
	for id, body := range bodies {
		ev := events[id][0]
		if ev.Status != message.StatusSucceeded {
			t.Fatalf("%s: %s %s", id, ev.Status, ev.Error)
		}
		var rows []timedRow
		for _, o := range ev.Objects {
			data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "s3://walks/"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			_, hasTimes := f.Schema().Lookup("times", "list", "element")
			if want := body["with_times"] == true; hasTimes != want {
				t.Fatalf("%s: part %s has a times column: %v, want %v", id, o, hasTimes, want)
			}
			r, err := parquet.Read[timedRow](bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r...)
		}
		if id != "tw-1" {
			if int64(len(rows)) != ev.Walks {
				t.Errorf("%s: %d rows, event says %d walks", id, len(rows), ev.Walks)
			}
			continue
		}
		body["version"], body["batch_id"] = 1, id
		req, err := message.DecodeRequest([]byte(id), request(id, body).Value, g, message.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		e, err := cpu.New(g)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]timedRow, req.NumWalks())
		err = e.Run(ctx, []walk.Job{req.Job(0)}, func(c walk.Chunk) error {
			for k := range c.Len() {
				r := timedRow{WalkID: int64(c.WalkIDs[k]), Times: slices.Clone(c.Times[c.Offsets[k]:c.Offsets[k+1]])}
				for _, v := range c.Walk(k) {
					r.Walk = append(r.Walk, g.ExternalID(v))
				}
				want[c.WalkIDs[k]] = r
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(want) {
			t.Fatalf("%s: %d rows, want %d", id, len(rows), len(want))
		}
		for i := range want {
			if rows[i].WalkID != want[i].WalkID || !slices.Equal(rows[i].Walk, want[i].Walk) || !slices.Equal(rows[i].Times, want[i].Times) {
				t.Fatalf("%s: row %d is %+v, the engine walked %+v", id, i, rows[i], want[i])
			}
			if want[i].Times[0] != 100000 {
				t.Fatalf("%s: row %d times %v: want the start time first", id, i, want[i].Times)
			}
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
