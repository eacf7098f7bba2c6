package stage

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
	"github.com/walkstage/walkstage/source"
)

// DemoOptions configure RunDemo.
type DemoOptions struct {
	Dir     string // working folder: graph file and file:// bucket
	Scale   int    // R-MAT scale of the generated graph (V = 2^Scale)
	Engine  string // auto, cpu or gpu
	Timeout time.Duration
	// Logs receives the stage's logs (warnings only unless Verbose).
	Logs    io.Writer
	Verbose bool
	Version string
}

// demoBatch is one request the demo publishes.
type demoBatch struct {
	id   string
	body string
	note string
}

// RunDemo runs the whole stage on this machine with nothing to configure:
// an in-process Kafka-protocol broker (kfake) on a loopback port, a
// file:// bucket under Dir, a generated R-MAT graph, and the production
// wiring (FromConfig) in between. It publishes one batch per algorithm and a
// malformed one, waits for every completion event, prints them and where
// the Parquet files are, and stops the stage.
func RunDemo(ctx context.Context, o DemoOptions, out io.Writer) error {
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
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo folder: %w", err)
	}
	t0 := time.Now()

	// 1. The graph: R-MAT, undirected, weighted, 3 edge labels.
	gpath := filepath.Join(dir, fmt.Sprintf("rmat-%d.wsg", o.Scale))
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: o.Scale, EdgeFactor: 16, Seed: 42, Undirected: true,
		Weighted: true, Labels: 3, Name: fmt.Sprintf("rmat-%d", o.Scale)})
	if err != nil {
		return fmt.Errorf("generate graph: %w", err)
	}
	if err := graph.Save(gpath, g); err != nil {
		return fmt.Errorf("save graph: %w", err)
	}
	fmt.Fprintf(out, "graph      %s: %d vertices, %d directed edges, weighted, %d labels (%s)\n",
		g.Name, g.NumVertices(), g.NumEdges(), g.NumLabels, gpath)
	g.Close()

	// 2. The broker: kfake on 127.0.0.1, three topics of 3 partitions.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "walkstage-requests", "walkstage-completions", "walkstage-dlq"))
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fmt.Fprintf(out, "broker     kfake at %s (topics walkstage-requests, walkstage-completions, walkstage-dlq)\n", strings.Join(brokers, ","))

	// 3. The stage, configured exactly as `walkstage run` would be.
	outURL := "file://" + filepath.ToSlash(dir)
	level := "warn"
	if o.Verbose {
		level = "info"
	}
	c, err := LoadConfig([]string{
		"WALKSTAGE_BROKERS=" + strings.Join(brokers, ","), "WALKSTAGE_GRAPH=" + gpath, "WALKSTAGE_OUTPUT_URL=" + outURL,
		"WALKSTAGE_OUTPUT_PREFIX=walks",
		"WALKSTAGE_ENGINE=" + o.Engine, "WALKSTAGE_METRICS_ADDR=", "WALKSTAGE_SESSION_TIMEOUT=6s",
		"WALKSTAGE_LOG_LEVEL=" + level, "WALKSTAGE_LOG_FORMAT=text", "WALKSTAGE_SHUTDOWN_TIMEOUT=10s",
	})
	if err != nil {
		return err
	}
	log := NewLogger(c, o.Logs)
	rt, err := FromConfig(ctx, c, log, o.Version)
	if err != nil {
		return err
	}
	defer rt.Close()
	fmt.Fprintf(out, "stage      engine %s, output %s\n", rt.o.Engine.Name(), outURL)
	runCtx, stopStage := context.WithCancel(ctx)
	defer stopStage()
	done := make(chan error, 1)
	go func() { done <- rt.Run(runCtx) }()

	// 4. The requests.
	// Seed ranges sized to the graph, so any --scale works.
	n := min(2000, (1<<o.Scale)/4)
	batches := []demoBatch{
		{"demo-deepwalk", fmt.Sprintf(`{"version":1,"batch_id":"demo-deepwalk","algorithm":"deepwalk","length":40,"walks_per_seed":2,"seed_range":{"first":0,"count":%d}}`, n), "uniform DeepWalk"},
		{"demo-weighted", fmt.Sprintf(`{"version":1,"batch_id":"demo-weighted","algorithm":"deepwalk","weighted":true,"length":40,"seed_range":{"first":%d,"count":%d}}`, n, n), "edge-weighted DeepWalk (alias tables)"},
		{"demo-ppr", `{"version":1,"batch_id":"demo-ppr","algorithm":"ppr","stop_probability":0.15,"length":80,"walks_per_seed":10,"seeds":[1,2,3,5,8,13]}`, "personalised PageRank walks"},
		{"demo-node2vec", fmt.Sprintf(`{"version":1,"batch_id":"demo-node2vec","algorithm":"node2vec","p":0.5,"q":2,"length":20,"seed_range":{"first":0,"count":%d}}`, n/2), "Node2Vec p=0.5 q=2"},
		{"demo-metapath", fmt.Sprintf(`{"version":1,"batch_id":"demo-metapath","algorithm":"metapath","schema":[0,1,2],"length":12,"seed_range":{"first":%d,"count":%d}}`, 2*n, n/2), "MetaPath over labels 0,1,2"},
		{"demo-malformed", `{"version":1,"batch_id":"demo-malformed","algorithm":"deepwalk","seeds":[1,2,3],"walk_len":10}`, "a typo'd field: rejected"},
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: c.InputTopic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond}
	msgs := make([]kafka.Message, len(batches))
	for i, b := range batches {
		msgs[i] = kafka.Message{Key: []byte(b.id), Value: []byte(b.body)}
	}
	err = w.WriteMessages(ctx, msgs...)
	w.Close()
	if err != nil {
		return fmt.Errorf("publish requests: %w", err)
	}
	fmt.Fprintf(out, "published  %d requests to %s:\n", len(batches), c.InputTopic)
	for _, b := range batches {
		fmt.Fprintf(out, "  %-15s %s\n", b.id, b.note)
	}

	// 5. Wait for every completion event and the dead letter. One group
	// reader follows both topics (joining a group takes a few seconds).
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupTopics: []string{c.OutputTopic, c.DLQTopic},
		GroupID: "walkstage-demo-observer", StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	events := map[string]source.Event{}
	raw := map[string][]byte{}
	var dead []kafka.Message
	for len(events) < len(batches) || len(dead) == 0 {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			select {
			case err := <-done:
				return fmt.Errorf("stage stopped early: %v", err)
			default:
			}
			return fmt.Errorf("waiting for completion events (%d of %d): %w", len(events), len(batches), err)
		}
		if m.Topic == c.DLQTopic {
			dead = append(dead, m)
			continue
		}
		var ev source.Event
		if err := json.Unmarshal(m.Value, &ev); err != nil {
			return fmt.Errorf("bad event %q: %w", m.Value, err)
		}
		events[ev.BatchID], raw[ev.BatchID] = ev, m.Value
	}
	stopStage()
	if err := <-done; err != nil {
		return fmt.Errorf("stage: %w", err)
	}

	// 6. Report.
	fmt.Fprintf(out, "\ncompletion events on %s:\n", c.OutputTopic)
	var failed []string
	for _, b := range batches {
		ev := events[b.id]
		switch ev.Status {
		case source.StatusSucceeded:
			fmt.Fprintf(out, "  %-15s %-9s %7d walks %9d steps  queued %.3fs walking %.3fs writing %.3fs\n", ev.BatchID, ev.Status,
				ev.Walks, ev.Steps, ev.Timings.Queued, ev.Timings.Walking, ev.Timings.Writing)
		default:
			fmt.Fprintf(out, "  %-15s %-9s %s: %s\n", ev.BatchID, ev.Status, ev.Reason, ev.Error)
		}
		if (b.id == "demo-malformed") != (ev.Status == source.StatusRejected) {
			failed = append(failed, b.id)
		}
	}
	fmt.Fprintf(out, "\nthe deepwalk event in full:\n")
	var pretty bytes.Buffer
	json.Indent(&pretty, raw["demo-deepwalk"], "  ", "  ")
	fmt.Fprintf(out, "  %s\n", pretty.String())

	fmt.Fprintf(out, "\nParquet files (walk_id, start, length, walk) and manifests under %s:\n", dir)
	ids := make([]string, 0, len(events))
	for id := range events {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ev := events[id]
		for _, u := range ev.Objects {
			fmt.Fprintf(out, "  %s\n", strings.TrimPrefix(u, "file://"))
		}
		if ev.Manifest != "" {
			fmt.Fprintf(out, "  %s\n", strings.TrimPrefix(ev.Manifest, "file://"))
		}
	}
	dl := dead[0]
	fmt.Fprintf(out, "\ndead letter on %s (the original message, unchanged):\n  key %s\n  value %s\n", c.DLQTopic, dl.Key, dl.Value)
	for _, h := range dl.Headers {
		fmt.Fprintf(out, "  header %s: %s\n", h.Key, h.Value)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "try: duckdb -c \"select walk_id, start, length, walk[1:6] from '%s/walks/**/*.parquet' limit 5\"\n", dir)
	fmt.Fprintf(out, "done in %.1fs\n", time.Since(t0).Seconds())
	if len(failed) > 0 {
		return fmt.Errorf("unexpected outcome for %v", failed)
	}
	return nil
}
