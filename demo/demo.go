// Package demo runs the whole stage on one machine with nothing to
// configure: a generated graph, an in-process Kafka-protocol broker (kfake)
// on a loopback port, a file:// bucket, and the production wiring
// (stage.FromConfig) in between. It is what `walkstage demo` and
// scripts/demo.sh show a newcomer; it holds no stage logic of its own, and
// nothing but the demo imports the in-process broker.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage"
	"github.com/walkstage/walkstage/stage/config"
)

// Options configure Run.
type Options struct {
	Dir     string // working folder: graph file and file:// bucket
	Scale   int    // R-MAT scale of the generated graph (V = 2^Scale)
	Engine  string // auto, cpu or gpu
	Timeout time.Duration
	// Fresh removes the output of an earlier run in Dir first. Without it
	// the stage finds that output and reports each batch from its manifest
	// instead of walking it again (as it does for a redelivery), and Run
	// says so.
	Fresh bool
	// Logs receives the stage's logs (warnings only unless Verbose).
	Logs    io.Writer
	Verbose bool
	Version string
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = "walkstage-demo"
	}
	if o.Scale == 0 {
		o.Scale = 16
	}
	if o.Engine == "" {
		o.Engine = "auto"
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
}

// request is one request the demo publishes.
type request struct {
	id   string
	body string
	note string
}

// outputPrefix is the key prefix of the demo's output under Dir.
const outputPrefix = "walks"

// Topics of the demo's broker, three partitions each.
var topics = []string{"walkstage-requests", "walkstage-completions", "walkstage-dlq"}

// Run publishes one batch per algorithm and a malformed one to a stage it
// starts, waits for every completion event and the dead letter, prints them
// and where the Parquet files are, and stops the stage. It fails when any
// batch ends otherwise than expected.
func Run(ctx context.Context, o Options, out io.Writer) error {
	o.defaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo folder: %w", err)
	}
	// Only the output prefix is removed: Dir may be a folder of the
	// user's (--dir .).
	prior := filepath.Join(dir, outputPrefix)
	switch _, err := os.Stat(prior); {
	case err == nil && o.Fresh:
		if err := os.RemoveAll(prior); err != nil {
			return fmt.Errorf("remove the earlier output: %w", err)
		}
		fmt.Fprintf(out, "fresh      removed the earlier output %s\n", prior)
	case err == nil:
		fmt.Fprintf(out, "reusing    %s holds an earlier run's output: the stage reports those batches from their\n"+
			"           manifests without walking them again (--fresh removes it first)\n", prior)
	}
	t0 := time.Now()
	gpath, err := generateGraph(ctx, dir, o.Scale, out)
	if err != nil {
		return err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fmt.Fprintf(out, "broker     kfake at %s (topics %s)\n", strings.Join(brokers, ","), strings.Join(topics, ", "))

	outURL := "file://" + filepath.ToSlash(dir)
	c, rt, err := startStage(ctx, o, brokers, gpath, outURL)
	if err != nil {
		return err
	}
	defer rt.Close()
	fmt.Fprintf(out, "stage      engine %s, output %s\n", rt.EngineName(), outURL)
	runCtx, stopStage := context.WithCancel(ctx)
	defer stopStage()
	done := make(chan error, 1)
	go func() { done <- rt.Run(runCtx) }()

	reqs := requests(o.Scale)
	if err := publish(ctx, brokers, c.InputTopic, reqs, out); err != nil {
		return err
	}
	res, err := await(ctx, brokers, c, len(reqs), done)
	if err != nil {
		return err
	}
	stopStage()
	if err := <-done; err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	failed := report(out, c, dir, reqs, res)
	fmt.Fprintf(out, "done in %.1fs\n", time.Since(t0).Seconds())
	if len(failed) > 0 {
		return fmt.Errorf("unexpected outcome for %v", failed)
	}
	return nil
}

// generateGraph writes an undirected, weighted, 3-label R-MAT graph into
// dir and returns its path.
func generateGraph(ctx context.Context, dir string, scale int, out io.Writer) (string, error) {
	gpath := filepath.Join(dir, fmt.Sprintf("rmat-%d.wsg", scale))
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: scale, EdgeFactor: 16, Seed: 42, Undirected: true,
		Weighted: true, Labels: 3, Name: fmt.Sprintf("rmat-%d", scale)})
	if err != nil {
		return "", fmt.Errorf("generate graph: %w", err)
	}
	defer g.Close()
	if err := graph.Save(gpath, g); err != nil {
		return "", fmt.Errorf("save graph: %w", err)
	}
	fmt.Fprintf(out, "graph      %s: %d vertices, %d directed edges, weighted, %d labels (%s)\n",
		g.Name, g.NumVertices(), g.NumEdges(), g.NumLabels, gpath)
	return gpath, nil
}

// startStage configures the stage exactly as `walkstage run` would be,
// from environment variables.
func startStage(ctx context.Context, o Options, brokers []string, gpath, outURL string) (config.Config, *stage.Runtime, error) {
	level := "warn"
	if o.Verbose {
		level = "info"
	}
	c, err := config.Load([]string{
		"WALKSTAGE_BROKERS=" + strings.Join(brokers, ","), "WALKSTAGE_GRAPH=" + gpath, "WALKSTAGE_OUTPUT_URL=" + outURL,
		"WALKSTAGE_OUTPUT_PREFIX=" + outputPrefix, "WALKSTAGE_INPUT_TOPIC=" + topics[0], "WALKSTAGE_OUTPUT_TOPIC=" + topics[1],
		"WALKSTAGE_DLQ_TOPIC=" + topics[2],
		"WALKSTAGE_ENGINE=" + o.Engine, "WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_SESSION_TIMEOUT=6s",
		"WALKSTAGE_LOG_LEVEL=" + level, "WALKSTAGE_LOG_FORMAT=text", "WALKSTAGE_SHUTDOWN_TIMEOUT=10s",
	})
	if err != nil {
		return c, nil, err
	}
	rt, err := stage.FromConfig(ctx, c, config.NewLogger(c, o.Logs), o.Version)
	return c, rt, err
}

// requests are one batch per algorithm, with seed ranges sized to the
// graph so any scale works, and one with a typo'd field.
func requests(scale int) []request {
	n := min(2000, (1<<scale)/4)
	return []request{
		{"demo-deepwalk", fmt.Sprintf(`{"version":1,"batch_id":"demo-deepwalk","algorithm":"deepwalk","length":40,"walks_per_seed":2,"seed_range":{"first":0,"count":%d}}`, n), "uniform DeepWalk"},
		{"demo-weighted", fmt.Sprintf(`{"version":1,"batch_id":"demo-weighted","algorithm":"deepwalk","weighted":true,"length":40,"seed_range":{"first":%d,"count":%d}}`, n, n), "edge-weighted DeepWalk (alias tables)"},
		{"demo-ppr", `{"version":1,"batch_id":"demo-ppr","algorithm":"ppr","stop_probability":0.15,"length":80,"walks_per_seed":10,"seeds":[1,2,3,5,8,13]}`, "personalised PageRank walks"},
		{"demo-node2vec", fmt.Sprintf(`{"version":1,"batch_id":"demo-node2vec","algorithm":"node2vec","p":0.5,"q":2,"length":20,"seed_range":{"first":0,"count":%d}}`, n/2), "Node2Vec p=0.5 q=2"},
		{"demo-metapath", fmt.Sprintf(`{"version":1,"batch_id":"demo-metapath","algorithm":"metapath","schema":[0,1,2],"length":12,"seed_range":{"first":%d,"count":%d}}`, 2*n, n/2), "MetaPath over labels 0,1,2"},
		{"demo-malformed", `{"version":1,"batch_id":"demo-malformed","algorithm":"deepwalk","seeds":[1,2,3],"walk_len":10}`, "a typo'd field: rejected"},
	}
}

func publish(ctx context.Context, brokers []string, topic string, reqs []request, out io.Writer) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond}
	msgs := make([]kafka.Message, len(reqs))
	for i, r := range reqs {
		msgs[i] = kafka.Message{Key: []byte(r.id), Value: []byte(r.body)}
	}
	err := w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return fmt.Errorf("publish requests: %w", err)
	}
	fmt.Fprintf(out, "published  %d requests to %s:\n", len(reqs), topic)
	for _, r := range reqs {
		fmt.Fprintf(out, "  %-15s %s\n", r.id, r.note)
	}
	return nil
}

// results are what the demo observed on the output and dead-letter topics.
type results struct {
	events map[string]message.Event
	raw    map[string][]byte
	dead   []kafka.Message
}

// await reads the completion events and the dead letter. One group reader
// follows both topics (joining a group takes a few seconds).
func await(ctx context.Context, brokers []string, c config.Config, want int, done <-chan error) (results, error) {
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupTopics: []string{c.OutputTopic, c.DLQTopic},
		GroupID: "walkstage-demo-observer", StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	res := results{events: map[string]message.Event{}, raw: map[string][]byte{}}
	for len(res.events) < want || len(res.dead) == 0 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			select {
			case err := <-done:
				return res, fmt.Errorf("stage stopped early: %v", err)
			default:
			}
			return res, fmt.Errorf("waiting for completion events (%d of %d): %w", len(res.events), want, err)
		}
		if m.Topic == c.DLQTopic {
			res.dead = append(res.dead, m)
			continue
		}
		var ev message.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			return res, fmt.Errorf("bad event %q: %w", m.Value, err)
		}
		res.events[ev.BatchID], res.raw[ev.BatchID] = ev, m.Value
	}
	return res, nil
}

// report prints the events, one event in full, the files and the dead
// letter, and returns the batches whose outcome was not the expected one.
func report(out io.Writer, c config.Config, dir string, reqs []request, res results) (failed []string) {
	fmt.Fprintf(out, "\ncompletion events on %s:\n", c.OutputTopic)
	for _, r := range reqs {
		ev := res.events[r.id]
		switch ev.Status {
		case message.StatusSucceeded:
			fmt.Fprintf(out, "  %-15s %-9s %7d walks %9d steps  queued %.3fs walking %.3fs writing %.3fs\n", ev.BatchID, ev.Status,
				ev.Walks, ev.Steps, ev.Timings.Queued, ev.Timings.Walking, ev.Timings.Writing)
		default:
			fmt.Fprintf(out, "  %-15s %-9s %s: %s\n", ev.BatchID, ev.Status, ev.Reason, ev.Error)
		}
		if (r.id == "demo-malformed") != (ev.Status == message.StatusRejected) {
			failed = append(failed, r.id)
		}
	}
	fmt.Fprintf(out, "\nthe deepwalk event in full:\n")
	var pretty bytes.Buffer
	json.Indent(&pretty, res.raw["demo-deepwalk"], "  ", "  ")
	fmt.Fprintf(out, "  %s\n", pretty.String())

	fmt.Fprintf(out, "\nParquet files (walk_id, start, length, walk) and manifests under %s:\n", dir)
	ids := make([]string, 0, len(res.events))
	for id := range res.events {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ev := res.events[id]
		for _, u := range ev.Objects {
			fmt.Fprintf(out, "  %s\n", strings.TrimPrefix(u, "file://"))
		}
		if ev.Manifest != "" {
			fmt.Fprintf(out, "  %s\n", strings.TrimPrefix(ev.Manifest, "file://"))
		}
	}
	dl := res.dead[0]
	fmt.Fprintf(out, "\ndead letter on %s (the original message, unchanged):\n  key %s\n  value %s\n", c.DLQTopic, dl.Key, dl.Value)
	for _, h := range dl.Headers {
		fmt.Fprintf(out, "  header %s: %s\n", h.Key, h.Value)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "try: duckdb -c \"%s\"\n", ReaderQuery(dir))
	return failed
}

// ReaderQuery is the DuckDB query the demo suggests for reading its walks
// under dir: every walks part (kind=walks, docs/reference/messages.md "Output
// layout"), with the path's partitions (graph, algorithm, batch) as columns.
// The conformance test runs it.
func ReaderQuery(dir string) string {
	glob := strings.ReplaceAll(filepath.ToSlash(dir)+"/walks/kind=walks/**/*.parquet", "'", "''")
	return "select batch, walk_id, start, length, walk[1:6] from read_parquet('" + glob +
		"', hive_partitioning=true) order by batch, walk_id limit 5"
}
