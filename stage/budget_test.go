package stage

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// TestOverBudgetRequestsAreRejectedAtIntake: requests whose estimated
// engine cost is above WALKSTAGE_MAX_REQUEST_COST are refused before they
// are queued (a rejected event with reason over_budget naming the estimate
// and the budget, the message dead-lettered), while the same shape with
// cheap steps is walked. Node2Vec at p = 1e-6 is the request: 100
// seeds x 10 walks x 1,000 steps, once counted as 10^6 steps.
func TestOverBudgetRequestsAreRejectedAtIntake(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	gpath, _ := testGraph(t, 10)
	rt, _ := runStage(t, stageEnviron(brokers, gpath, "file://"+filepath.ToSlash(t.TempDir()), "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_MAX_REQUEST_COST=50000000"))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	const shape = `"seed_range":{"first":0,"count":100},"walks_per_seed":10,"length":1000`
	msgs := []kafka.Message{
		requestRaw("n2v-extreme", `{"version":1,"batch_id":"n2v-extreme","algorithm":"node2vec","p":1e-6,`+shape+`}`),
		requestRaw("n2v-plain", `{"version":1,"batch_id":"n2v-plain","algorithm":"node2vec","p":1,"q":1,`+shape+`}`),
		requestRaw("visits-extreme", `{"version":1,"batch_id":"visits-extreme","algorithm":"node2vec","q":1e-6,"length":1000,`+
			`"output":"visits","top_k":5,"steps_per_query":1000000,"seeds":[1,2,3,4,5,6,7,8,9,10]}`),
	}
	produce(t, brokers, "in", msgs...)
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == len(msgs) })
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n2v-extreme", "visits-extreme"} {
		ev := events[id][0]
		if ev.Status != message.StatusRejected || ev.Reason != string(ReasonOverBudget) ||
			!strings.Contains(ev.Error, "estimated cost") || !strings.Contains(ev.Error, "per-request budget 50000000") {
			t.Errorf("%s: want a rejection over_budget naming the estimate and the budget, got %+v", id, ev)
		}
		t.Logf("%s: %s", id, ev.Error)
	}
	if ev := events["n2v-plain"][0]; ev.Status != message.StatusSucceeded || ev.Walks != 1000 {
		t.Errorf("n2v-plain (cost 10^6, within the budget): %+v", ev)
	}
	// Dead-lettered once each, with the reason, like every refused request.
	dlq := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "dlq-budget", Topic: "dlq", StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer dlq.Close()
	dead := map[string]string{}
	for len(dead) < 2 {
		m, err := dlq.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("dead letters %v: %v", dead, err)
		}
		for _, h := range m.Headers {
			if h.Key == source.HeaderReason {
				dead[string(m.Key)] = string(h.Value)
			}
		}
	}
	if dead["n2v-extreme"] != string(ReasonOverBudget) || dead["visits-extreme"] != string(ReasonOverBudget) {
		t.Errorf("dead letters' reasons %v, want over_budget for both", dead)
	}
	mfs, err := rt.o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var overBudget float64
	for _, mf := range mfs {
		if mf.GetName() == "walkstage_rejections_total" {
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if l.GetName() == "reason" && l.GetValue() == string(ReasonOverBudget) {
						overBudget += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	if overBudget != 2 {
		t.Errorf("walkstage_rejections_total{reason=over_budget} = %v, want 2", overBudget)
	}
}

// gatedEngine records every engine run (the length and walk ids of its
// jobs) and holds the first run of walks of length gateLen until release
// is closed, so a test can queue requests behind it.
type gatedEngine struct {
	walk.Engine
	gateLen int
	entered chan struct{}
	release chan struct{}
	once    sync.Once

	mu   sync.Mutex
	runs []jobRecord // one per run, its first job
}

type jobRecord struct {
	length    int
	firstWalk uint64
	walks     int
}

func (e *gatedEngine) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	e.mu.Lock()
	e.runs = append(e.runs, jobRecord{jobs[0].Algorithm.Length, jobs[0].FirstWalk, len(jobs[0].Starts)})
	e.mu.Unlock()
	if jobs[0].Algorithm.Length == e.gateLen {
		e.once.Do(func() {
			close(e.entered)
			<-e.release
		})
	}
	return e.Engine.Run(ctx, jobs, emit)
}

// TestSmallRequestWalksBetweenSlicesOfAnExpensiveOne: a request above the
// per-micro-batch budget walks in slices, and a small request that asks for
// the engine while a slice walks is walked before the next slice, not
// after the whole expensive request. The expensive request's output is
// byte for byte that of the request walked in one run.
func TestSmallRequestWalksBetweenSlicesOfAnExpensiveOne(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	brokers := startKafka(t, 1)
	gpath, g := testGraph(t, 10)
	outURL := "file://" + filepath.ToSlash(t.TempDir())
	c, err := config.Load(stageEnviron(brokers, gpath, outURL, "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_MICROBATCH_MAX_COST=20000"))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := FromConfig(ctx, c, testLog(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	v := rt.graphs.serving()
	ge := &gatedEngine{Engine: v.e, gateLen: 100, entered: make(chan struct{}), release: make(chan struct{})}
	v.e = ge
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.Run(runCtx) }()
	defer func() {
		stopRun()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	released := false
	defer func() {
		if !released {
			close(ge.release)
		}
	}()
	obs := newObserver(brokers, "out")
	defer obs.Close()

	// 2,000 walks of 100 O(1) steps: cost 200,000, ten slices of 20,000.
	hugeBody := `{"version":1,"batch_id":"huge","algorithm":"deepwalk","weighted":true,"length":100,"walks_per_seed":10,"seed_range":{"first":0,"count":200}}`
	produce(t, brokers, "in", requestRaw("huge", hugeBody))
	select {
	case <-ge.entered:
	case <-ctx.Done():
		t.Fatal("the expensive request never reached the engine")
	}
	produce(t, brokers, "in", requestRaw("small", `{"version":1,"batch_id":"small","algorithm":"deepwalk","length":10,"seeds":[1,2,3,4,5]}`))
	// Wait (not a timing assertion) until the small request holds its
	// place in line for the engine behind the slice in progress.
	for rt.turns.Waiting() < 2 {
		select {
		case <-ctx.Done():
			t.Fatalf("the small request never asked for the engine while the expensive one walked (%d turns waiting)", rt.turns.Waiting())
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(ge.release)
	released = true
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m) == 2 })
	if err != nil {
		t.Fatal(err)
	}
	for id, evs := range events {
		if evs[0].Status != message.StatusSucceeded {
			t.Fatalf("%s: %+v", id, evs[0])
		}
	}
	if w := events["huge"][0].Walks; w != 2000 {
		t.Errorf("huge: %d walks, want 2000", w)
	}

	ge.mu.Lock()
	runs := append([]jobRecord(nil), ge.runs...)
	ge.mu.Unlock()
	small, lastHuge := -1, -1
	var next uint64 // the slices cover the walk ids in order, each once
	for i, r := range runs {
		switch r.length {
		case 10:
			small = i
		case 100:
			lastHuge = i
			if r.firstWalk != next {
				t.Errorf("run %d: slice from walk %d, want %d", i, r.firstWalk, next)
			}
			next = r.firstWalk + uint64(r.walks)
		}
	}
	if next != 2000 {
		t.Errorf("the slices walked up to walk %d of 2000", next)
	}
	if small < 0 || lastHuge < 0 || small > lastHuge || runs[0].length != 100 {
		t.Errorf("engine runs (length, first walk, walks) %v: want the small request (length 10) between the expensive one's slices", runs)
	}
	t.Logf("engine runs: %v", runs)

	bucket, err := store.OpenBucket(ctx, outURL)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	ref := referenceParts(t, ctx, bucket, g, "huge", hugeBody)
	ev := events["huge"][0]
	if len(ref) != len(ev.Objects) {
		t.Fatalf("huge: %d objects, walked in one run %d", len(ev.Objects), len(ref))
	}
	for i, u := range ev.Objects {
		got, err := bucket.ReadAll(ctx, u[len(outURL)+1:])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, ref[i]) {
			t.Errorf("huge part %d differs from the request walked in one run", i)
		}
	}
}

// TestSliceJobKeepsWalkIDs: slices cover the job's walks in order, once,
// with the ids they have in the whole job, each within the budget (at
// least one walk).
func TestSliceJobKeepsWalkIDs(t *testing.T) {
	starts := make([]uint32, 10)
	for i := range starts {
		starts[i] = uint32(100 + i)
	}
	job := walk.Job{Tag: 3, Seed: 9, Starts: starts, FirstWalk: 40}
	for _, tc := range []struct {
		perWalk float64
		budget  int64
		want    string // first walk:walks of each slice
	}{
		{10, 1000, "40:10"},
		{10, 30, "40:3 43:3 46:3 49:1"},
		{10, 5, "40:1 41:1 42:1 43:1 44:1 45:1 46:1 47:1 48:1 49:1"},
		{0.5, 4, "40:4 44:4 48:2"},
	} {
		var got []string
		for _, j := range sliceJob(job, tc.perWalk, tc.budget) {
			if j.Tag != 3 || j.Seed != 9 || j.Starts[0] != uint32(100+j.FirstWalk-40) {
				t.Errorf("slice %+v lost the job's tag, seed or starts", j)
			}
			got = append(got, fmt.Sprintf("%d:%d", j.FirstWalk, len(j.Starts)))
		}
		if s := strings.Join(got, " "); s != tc.want {
			t.Errorf("perWalk %v, budget %d: slices %s, want %s", tc.perWalk, tc.budget, s, tc.want)
		}
	}
}

// The hybrid engine gets the GPU's micro-batch budget: the GPU takes the
// larger share of a batch and needs large launches; the CPU's budget scales
// with its workers.
func TestAutoMicroBatchMaxCostByEngine(t *testing.T) {
	for _, c := range []struct {
		engine  string
		workers int
		want    int64
	}{{"gpu", 16, 2_000_000_000}, {"hybrid", 16, 2_000_000_000}, {"cpu", 16, 40_000_000}, {"cpu", 2, 5_000_000}} {
		if got := AutoMicroBatchMaxCost(c.engine, c.workers); got != c.want {
			t.Errorf("AutoMicroBatchMaxCost(%q, %d) = %d, want %d", c.engine, c.workers, got, c.want)
		}
	}
}
