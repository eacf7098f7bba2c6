package stage

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/visits"
)

// TestStageVisits sends output "visits" requests through the stage (kfake
// over TCP, gofakes3), beside a walk request in the same micro-batch: the
// rows read back equal visits.CountVisits run directly, the event counts
// queries, steps and candidates, a resubmission is answered from the
// manifest, and a visits request without top_k is rejected.
func TestStageVisits(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	outURL, bucket := startS3(t)
	gpath, g := testGraph(t, 10)
	_, stop := runStage(t, stageEnviron(brokers, gpath, outURL, "WALKSTAGE_CPU_WORKERS=2", "WALKSTAGE_MICROBATCH_MAX_WAIT=50ms"))

	// Seeds with out-edges, so every query spends its whole budget.
	var seeds []int64
	for v := uint32(0); len(seeds) < 40; v++ {
		if g.Degree(v) > 0 {
			seeds = append(seeds, g.ExternalID(v))
		}
	}
	perSeed := map[string]any{"algorithm": "ppr", "stop_probability": 0.2, "length": 50, "output": "visits",
		"top_k": 20, "steps_per_query": 5000, "exclude_seeds": true, "seeds": seeds, "rng_seed": "77"}
	multi := map[string]any{"algorithm": "deepwalk", "weighted": true, "length": 6, "output": "visits",
		"top_k": 5, "steps_per_query": 3001, "n_p": 5, "n_v": 30, "min_visits": 2,
		"queries": []map[string]any{{"id": "u1", "seeds": seeds[:3], "weights": []float64{2, 1, 1}}, {"id": "u2", "seeds": seeds[3:4]}}}
	produce(t, brokers, "in",
		request("vis-1", perSeed), request("vis-2", multi),
		request("walks-1", map[string]any{"algorithm": "deepwalk", "length": 5, "seeds": seeds[:10]}),
		request("vis-bad", map[string]any{"algorithm": "ppr", "output": "visits", "steps_per_query": 10, "seeds": seeds[:1]}))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == 4 })
	if err != nil {
		t.Fatalf("events: %v (%d of 4)", err, len(events))
	}
	if ev := events["vis-bad"][0]; ev.Status != message.StatusRejected || ev.Reason != string(message.ReasonInvalidParameters) ||
		!strings.Contains(ev.Error, "top_k is required") {
		t.Errorf("vis-bad: %+v", ev)
	}
	if ev := events["walks-1"][0]; ev.Status != message.StatusSucceeded || ev.Walks != 10 || ev.Queries != 0 {
		t.Errorf("walks-1 beside visits: %+v", ev)
	}
	e, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	for id, body := range map[string]map[string]any{"vis-1": perSeed, "vis-2": multi} {
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
		res, st, err := visits.CountVisits(ctx, e, g, r.Visits.Params, r.Visits.Queries)
		if err != nil {
			t.Fatal(err)
		}
		var want []sink.VisitRow
		for q, x := range res {
			row := sink.VisitRow{QueryID: r.Visits.QueryIDs[q], Steps: x.Steps, Candidates: []sink.VisitCandidate{}}
			for _, c := range x.Candidates {
				row.Candidates = append(row.Candidates, sink.VisitCandidate{Vertex: g.ExternalID(c.Vertex), Visits: c.Visits,
					Score: float64(c.Visits) / float64(x.Steps)})
			}
			want = append(want, row)
		}
		if ev.Queries != int64(len(want)) || ev.Steps != st.Steps || ev.Candidates != st.Candidates || ev.Walks != st.Walks {
			t.Errorf("%s: event queries %d steps %d candidates %d walks %d, want %d %d %d %d", id, ev.Queries, ev.Steps,
				ev.Candidates, ev.Walks, len(want), st.Steps, st.Candidates, st.Walks)
		}
		if id == "vis-1" && st.Steps != int64(len(seeds))*5000 {
			t.Errorf("vis-1: %d steps, want the whole budget of %d queries", st.Steps, len(seeds))
		}
		var got []sink.VisitRow
		for _, o := range ev.Objects {
			data, err := bucket.ReadAll(ctx, strings.TrimPrefix(o, "s3://walks/"))
			if err != nil {
				t.Fatal(err)
			}
			rows, err := parquet.Read[sink.VisitRow](bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			for i := range rows {
				if rows[i].Candidates == nil {
					rows[i].Candidates = []sink.VisitCandidate{}
				}
			}
			got = append(got, rows...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the rows differ from CountVisits:\n got %v\nwant %v", id, head(got), head(want))
		}
		if id == "vis-1" {
			for _, row := range got {
				q, _ := strconv.ParseInt(row.QueryID, 10, 64)
				if !slices.Contains(seeds, q) || len(row.Candidates) == 0 {
					t.Errorf("vis-1: row %+v", head([]sink.VisitRow{row}))
				}
				for _, c := range row.Candidates {
					if c.Vertex == q {
						t.Errorf("vis-1: query %d returned its own seed", q)
					}
				}
			}
		}
	}
	checkResubmissionFromManifest(ctx, t, brokers, obs, "vis-1", perSeed, events["vis-1"][0])
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func head(rows []sink.VisitRow) string {
	var b strings.Builder
	for i, r := range rows {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, "%s steps %d %v; ", r.QueryID, r.Steps, r.Candidates[:min(3, len(r.Candidates))])
	}
	return b.String()
}
