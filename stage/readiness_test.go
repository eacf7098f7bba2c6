package stage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/stage/health"
	"github.com/walkstage/walkstage/walk"
)

// writeFaultS3 is gofakes3 behind a proxy that, while writesDown is set,
// answers every write (PUT, POST, DELETE) 503 SlowDown and lets reads
// through: a store whose write path is failing while the stage's probe (a
// HEAD) still passes.
func writeFaultS3(t *testing.T) (bucketURL string, writesDown *atomic.Bool) {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(be).Server()
	writesDown = &atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if writesDown.Load() && r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>",
				http.StatusServiceUnavailable)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"} {
		os.Setenv(k, v)
	}
	return "s3://walks?endpoint=" + srv.URL + "&use_path_style=true&region=us-east-1", writesDown
}

// eventFaultKafka is kfake with the stage's topics where, while eventsDown
// is set, every produce to the completions topic is refused (the event is
// larger than the topic allows, as in issue 32's case 5) and everything
// else, the metadata the stage's probe asks for included, is answered.
func eventFaultKafka(t *testing.T) (brokers []string, eventsDown *atomic.Bool) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	eventsDown = &atomic.Bool{}
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if !eventsDown.Load() || len(req.Topics) != 1 || req.Topics[0].Topic != "out" {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.MessageTooLarge.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return c.ListenAddrs(), eventsDown
}

// TestReadinessHoldsWhileARetryIsStuck runs the stage on real parts with a
// fault that its probes do not see: the store refuses writes while its
// HEAD probe passes, or the broker refuses the completion event while its
// metadata probe passes. From the first failed attempt until the fault
// clears, every /readyz (polled over HTTP) is 503 with a reason naming the
// dependency and what is retrying; it never flips to 200 between attempts
// when a probe passes. Once the fault clears the batch completes and
// /readyz is 200 again.
func TestReadinessHoldsWhileARetryIsStuck(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	gpath, _ := testGraph(t, 8)
	for _, c := range []struct {
		name, dep, holder string
		start             func(t *testing.T) (brokers []string, outURL string, fault *atomic.Bool)
	}{
		{"object store refuses writes", health.Store, "batch failing", func(t *testing.T) ([]string, string, *atomic.Bool) {
			u, down := writeFaultS3(t)
			return startKafka(t, 1), u, down
		}},
		{"broker refuses the event", health.Broker, "publish failing", func(t *testing.T) ([]string, string, *atomic.Bool) {
			brokers, down := eventFaultKafka(t)
			u, _ := writeFaultS3(t)
			return brokers, u, down
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			brokers, outURL, fault := c.start(t)
			cfg, err := config.Load(stageEnviron(brokers, gpath, outURL, "WALKSTAGE_PROBE_INTERVAL=50ms",
				"WALKSTAGE_RETRY_BACKOFF_MIN=50ms", "WALKSTAGE_RETRY_BACKOFF_MAX=300ms", "WALKSTAGE_BROKER_TIMEOUT=3s",
				"WALKSTAGE_STORE_TIMEOUT=3s"))
			if err != nil {
				t.Fatal(err)
			}
			rt, err := FromConfig(context.Background(), cfg, testLog(t), "test")
			if err != nil {
				t.Fatal(err)
			}
			addr, err := rt.Listen()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- rt.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
				rt.Close()
			}()
			client := &http.Client{Timeout: 5 * time.Second}
			readyz := func() (int, string) {
				resp, err := client.Get("http://" + addr.String() + "/readyz")
				if err != nil {
					t.Fatalf("/readyz: %v", err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(body)
			}
			waitFor(t, "ready", 30*time.Second, func() bool { code, _ := readyz(); return code == 200 })

			fault.Store(true)
			obs := newObserver(brokers, "out")
			defer obs.Close()
			produce(t, brokers, "in", request("stuck", map[string]any{"algorithm": "deepwalk", "seeds": []int{1, 2, 3}, "length": 5}))
			waitFor(t, "the first failed attempt", 30*time.Second, func() bool { code, _ := readyz(); return code == 503 })

			// Poll through several failed attempts, each followed by
			// probes that pass; not one answer may be 200.
			failures := rt.m.retries.WithLabelValues(c.dep)
			first := metricValue(failures)
			var polls, oks int
			var body string
			deadline := time.Now().Add(60 * time.Second)
			for metricValue(failures) < first+3 {
				if time.Now().After(deadline) {
					t.Fatalf("the stuck batch did not retry 3 times: %v failures", metricValue(failures)-first)
				}
				time.Sleep(5 * time.Millisecond) // pacing only: a shared machine
				code, b := readyz()
				polls++
				if code == 200 {
					oks++
					continue
				}
				body = b
			}
			if oks > 0 {
				t.Errorf("/readyz answered 200 %d times of %d while the %s retry was stuck", oks, polls, c.dep)
			}
			if !strings.Contains(body, c.dep+" unavailable") || !strings.Contains(body, c.holder) {
				t.Errorf("/readyz body %q does not say what is stuck (%s, %s)", body, c.dep, c.holder)
			}

			fault.Store(false)
			waitFor(t, "ready after the fault", 30*time.Second, func() bool { code, _ := readyz(); return code == 200 })
			ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ecancel()
			evs, err := obs.events(ectx, func(m map[string][]message.Event) bool { return len(m["stuck"]) > 0 })
			if err != nil {
				t.Fatal(err)
			}
			if ev := evs["stuck"][0]; ev.Status != message.StatusSucceeded {
				t.Fatalf("%+v", ev)
			}
		})
	}
}

// failingRuns is the engine with its first n runs failing, as a device
// fault that clears does.
type failingRuns struct {
	walk.Engine
	n atomic.Int32
}

func (e *failingRuns) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	if e.n.Add(-1) >= 0 {
		return errors.New("launch failed: device temporarily unavailable")
	}
	return e.Engine.Run(ctx, jobs, emit)
}

// TestReadinessReturnsAfterATransientEngineFailure: a batch whose walk
// failed holds the engine down until it is walked again successfully;
// then the stage is ready again (it stayed not ready, fetching nothing,
// for good).
func TestReadinessReturnsAfterATransientEngineFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	gpath, _ := testGraph(t, 8)
	brokers := startKafka(t, 1)
	outURL, _ := writeFaultS3(t)
	cfg, err := config.Load(stageEnviron(brokers, gpath, outURL, "WALKSTAGE_PROBE_INTERVAL=50ms",
		"WALKSTAGE_RETRY_BACKOFF_MIN=50ms", "WALKSTAGE_RETRY_BACKOFF_MAX=300ms", "WALKSTAGE_METRICS_ADDR="))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := FromConfig(context.Background(), cfg, testLog(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	v := rt.graphs.serving()
	flaky := &failingRuns{Engine: v.e}
	flaky.n.Store(2)
	v.e = flaky // before Run: nothing reads it yet
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		rt.Close()
	}()
	waitFor(t, "ready", 30*time.Second, func() bool { return rt.ready() == nil })
	obs := newObserver(brokers, "out")
	defer obs.Close()
	produce(t, brokers, "in", request("flaky", map[string]any{"algorithm": "deepwalk", "seeds": []int{1, 2}, "length": 5}))
	ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ecancel()
	if _, err := obs.events(ectx, func(m map[string][]message.Event) bool { return len(m["flaky"]) > 0 }); err != nil {
		t.Fatal(err)
	}
	if flaky.n.Load() >= 0 {
		t.Fatal("the engine never failed; the test proves nothing")
	}
	waitFor(t, "ready after the engine recovered", 30*time.Second, func() bool { return rt.ready() == nil })
}
