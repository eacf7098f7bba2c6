package stage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/testversity"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/tracing"
)

// childEnv marks a re-executed test binary that runs the stage (crash test).
const childEnv = "WALKSTAGE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		// The child is `walkstage run` in all but name: same config path.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := Main(ctx, nil, os.Stderr, "test")
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startKafka runs kfake over loopback TCP with the stage's three topics.
func startKafka(t testing.TB, partitions int32) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "in", "out", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// startS3 runs gofakes3 (in memory) behind an HTTP server and returns the
// bucket URL the stage would be configured with, and the bucket opened.
func startS3(t testing.TB) (string, *blob.Bucket) {
	t.Helper()
	be := s3mem.New()
	if err := be.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(be).Server())
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		os.Setenv(k, v) // children inherit them; t.Setenv forbids parallel tests we do not run anyway
	}
	u := "s3://walks?endpoint=" + srv.URL + "&use_path_style=true&region=us-east-1"
	b, err := store.OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return u, b
}

// startVersityS3 is startS3 on versitygw, a real S3 gateway run as a
// separate process.
func startVersityS3(t testing.TB) (string, *blob.Bucket) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test-secret",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		os.Setenv(k, v) // children inherit them, as in startS3
	}
	endpoint := testversity.Start(t)
	u := "s3://walks?endpoint=" + endpoint + "&use_path_style=true&region=us-east-1"
	b, err := store.OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("not an S3 bucket")
	}
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("walks")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return u, b
}

// testGraph writes a weighted, 3-label, undirected R-MAT graph file.
func testGraph(t testing.TB, scale int) (string, *graph.Graph) {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: scale, EdgeFactor: 8, Seed: 1,
		Undirected: true, Weighted: true, Labels: 3, Name: "rmat"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rmat.wsg")
	if err := graph.Save(p, g); err != nil {
		t.Fatal(err)
	}
	return p, g
}

func stageEnviron(brokers []string, graphPath, outURL string, extra ...string) []string {
	env := []string{
		"WALKSTAGE_BROKERS=" + brokers[0], "WALKSTAGE_INPUT_TOPIC=in", "WALKSTAGE_OUTPUT_TOPIC=out",
		"WALKSTAGE_DLQ_TOPIC=dlq", "WALKSTAGE_GROUP=stage", "WALKSTAGE_GRAPH=" + graphPath,
		"WALKSTAGE_OUTPUT_URL=" + outURL, "WALKSTAGE_OUTPUT_PREFIX=walks", "WALKSTAGE_ENGINE=cpu",
		"WALKSTAGE_METRICS_ADDR=127.0.0.1:0", "WALKSTAGE_SESSION_TIMEOUT=6s", "WALKSTAGE_REBALANCE_TIMEOUT=6s",
		"WALKSTAGE_SHUTDOWN_TIMEOUT=20s", "WALKSTAGE_LOG_LEVEL=info",
	}
	return append(env, extra...)
}

func testLog(t testing.TB) *slog.Logger {
	if os.Getenv("WALKSTAGE_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// runStage starts a stage from environ in this process; stop shuts it down
// gracefully and returns Run's error.
func runStage(t testing.TB, environ []string) (rt *Runtime, stop func() error) {
	t.Helper()
	c, err := config.Load(environ)
	if err != nil {
		t.Fatal(err)
	}
	// OTEL_* entries in environ turn tracing on, as in Main.
	tp, err := tracing.FromEnv(context.Background(), environ, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	rt, err = fromConfig(context.Background(), c, testLog(t), "test", nil, nil, tp.Tracer(TracerName))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
			rt.Close()
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	return rt, stop
}

func produce(t testing.TB, brokers []string, topic string, msgs ...kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, BatchSize: 1000, BatchBytes: 64 << 20}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

func request(id string, body map[string]any) kafka.Message {
	body["version"] = 1
	body["batch_id"] = id
	v, _ := json.Marshal(body)
	return kafka.Message{Key: []byte(id), Value: v}
}

// observer reads a topic as its own consumer group, from the beginning.
type observer struct {
	r *kafka.Reader
}

func newObserver(brokers []string, topic string) *observer {
	return &observer{r: kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "observer-" + topic + fmt.Sprint(time.Now().UnixNano()),
		Topic: topic, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond, CommitInterval: time.Second})}
}

func (o *observer) Close() { o.r.Close() }

// events reads completion events until done says enough or ctx ends.
func (o *observer) events(ctx context.Context, done func(map[string][]message.Event) bool) (map[string][]message.Event, error) {
	got := map[string][]message.Event{}
	for !done(got) {
		m, err := o.r.ReadMessage(ctx)
		if err != nil {
			return got, err
		}
		var ev message.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			return got, fmt.Errorf("event %q: %w", m.Value, err)
		}
		if string(m.Key) != ev.BatchID {
			return got, fmt.Errorf("event key %q != batch_id %q", m.Key, ev.BatchID)
		}
		got[ev.BatchID] = append(got[ev.BatchID], ev)
	}
	return got, nil
}

// listKeys lists every object key under prefix.
func listKeys(t testing.TB, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func requestRaw(id, body string) kafka.Message {
	return kafka.Message{Key: []byte(id), Value: []byte(body)}
}

// checkResubmissionFromManifest produces request id with body again and
// checks that the stage answers it from the manifest of its first run
// (first, that run's event): the same objects and steps, nothing written
// again.
func checkResubmissionFromManifest(ctx context.Context, t *testing.T, brokers []string, obs *observer, id string, body map[string]any, first message.Event) {
	t.Helper()
	produce(t, brokers, "in", request(id, body))
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m[id]) == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if a := events[id][0]; !slices.Equal(a.Objects, first.Objects) || a.Steps != first.Steps {
		t.Errorf("resubmission wrote again: %v vs %v", a.Objects, first.Objects)
	}
}
