package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/loadgen"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/stage/config"
)

func loadCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, `walkstage load [--mode backlog|idle|beside] [--output walks|visits] (--graph g.wsg | --vertices N) [flags]
       walkstage load --mode edges --edge-updates N [--edge-rate R] (--graph g.wsg | --vertices N) [flags]
       walkstage load --plain-upload --bucket URL [--plain-bytes N --plain-object-bytes N --plain-parallel N]

Drives a running stage (walkstage run) as a user does: produces requests to
its request topic and reads its completion events and dead letters.
  backlog  produces every request at once and measures until the last event:
           requests/s, walk vertices/s or queries/s, bytes written (--bucket).
  idle     one request at a time, the next once the previous one's event
           arrived: p50/p95/p99 of produce -> event and fetch -> event (the
           fetch is the event's completed_at less its timings.total_seconds).
           With --phase produce, it only produces (run it while the stage is
           stopped); --phase collect then reads their events while the stage
           starts and reports the rate from the first event to the last: a
           true backlog, the queue full before the stage starts (both runs
           with the same --id-prefix, --draw-seed and request flags).
  beside   idle, with one --expensive request produced after the warm-up:
           the latency small requests see while it walks, and when its own
           event came (issue 32's admission control).
  edges    a live graph's ingest (WALKSTAGE_EDGE_TOPIC, issue 37): updates
           produced to the edge topic in binary batches, and probe requests
           whose edge_offsets name them. Without --edge-rate, a backlog: with
           --phase produce (stage stopped) then --phase collect (started),
           the time until every update is walkable; with --edge-rate, paced
           against a running stage: p50/p99 of update -> walkable (an edge
           record's produce to the event of a probe waiting for it) beside
           probes that wait for nothing.
Any dead letter or event other than succeeded fails the run. Seeds are drawn
(--draw-seed) from the graph's vertices with out-edges. Topics and brokers
default to the stage's WALKSTAGE_* variables. The last line of each
measurement, "RESULT k=v ...", is for scripts, as is --json.

--plain-upload measures the object store alone: objects of random bytes
uploaded as the sink uploads its parts, --plain-parallel at once.`)
	c := loadgen.Defaults()
	brokers := fs.String("brokers", config.Setting("WALKSTAGE_BROKERS"), "comma-separated brokers (default: $WALKSTAGE_BROKERS)")
	fs.StringVar(&c.RequestTopic, "request-topic", config.Setting("WALKSTAGE_INPUT_TOPIC"), "topic the stage reads requests from")
	fs.StringVar(&c.EventTopic, "event-topic", config.Setting("WALKSTAGE_OUTPUT_TOPIC"), "topic of the completion events")
	fs.StringVar(&c.DLQTopic, "dlq-topic", config.Setting("WALKSTAGE_DLQ_TOPIC"), "dead-letter topic")
	mode := fs.String("mode", loadgen.ModeBacklog, "backlog, idle, beside or edges")
	fs.StringVar(&c.Phase, "phase", "", "backlog: produce (only produce the requests) or collect (only read their events); default both")
	fs.StringVar(&c.Expensive, "expensive", `"algorithm":"node2vec","p":1e-6,"length":1000,"walks_per_seed":10,"seed_range":{"first":0,"count":100}`,
		"beside: the expensive request's JSON members other than version and batch_id (default: issue 32's Node2Vec request)")
	fs.IntVar(&c.Requests, "requests", c.Requests, "requests measured")
	fs.StringVar(&c.Output, "output", c.Output, "walks, visits or samples (graph sampling: --algorithm neighbor by default, --sample, --seeds)")
	fs.StringVar(&c.Sample, "sample", "", `samples: the sampler's parameters as JSON object members (default for neighbor: "fanouts":[25,10])`)
	fs.StringVar(&c.Algorithm, "algorithm", "", "deepwalk, ppr, node2vec or metapath (default: deepwalk for walks, ppr for visits)")
	fs.BoolVar(&c.Weighted, "weighted", c.Weighted, "weighted walks (default for walks; visits: off unless set)")
	fs.IntVar(&c.Length, "length", c.Length, "steps per walk (visits: the cap of each walk)")
	fs.Float64Var(&c.Restart, "stop-probability", c.Restart, "ppr: the requests' stop_probability (the restart probability of visits)")
	cli.Alias(fs, "restart", "stop-probability")
	fs.IntVar(&c.Seeds, "seeds", c.Seeds, "walks and samples: seeds per request")
	fs.IntVar(&c.Walks, "walks-per-seed", c.Walks, "walks: the requests' walks_per_seed")
	fs.StringVar(&c.WalkParams, "walk-params", "", `walks: more members of each request's JSON object, e.g. "p":0.5,"q":2 for --algorithm node2vec or "schema":[0,1] for metapath`)
	cli.Alias(fs, "walks", "walks-per-seed")
	fs.IntVar(&c.Queries, "queries", c.Queries, "visits: queries per request (one random seed each)")
	fs.IntVar(&c.StepsPerQuery, "steps-per-query", c.StepsPerQuery, "visits: steps per query")
	fs.IntVar(&c.TopK, "top-k", c.TopK, "visits: candidates per query")
	// Not the requests' rng_seed (they carry none: the stage derives it
	// from the batch id), hence not --rng-seed, its earlier name.
	fs.Uint64Var(&c.RNGSeed, "draw-seed", c.RNGSeed, "seed of the seed draws: the same value sends the same requests")
	cli.Alias(fs, "rng-seed", "draw-seed")
	fs.StringVar(&c.IDPrefix, "id-prefix", "", "batch id prefix, new to the stage (default: load-<time>)")
	fs.IntVar(&c.Warmup, "warmup", c.Warmup, "idle: requests sent first and not measured")
	fs.DurationVar(&c.Gap, "gap", 0, "idle: pause after each event before the next request")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "bound on the whole measurement")
	graphPath := fs.String("graph", "", "graph file the stage serves: seeds are drawn from its vertices with out-edges")
	vertices := fs.Int("vertices", 0, "instead of --graph: draw seeds from ids 0..N-1")
	bucket := fs.String("bucket", "", "the stage's WALKSTAGE_OUTPUT_URL: read the manifests to report bytes written (and where --plain-upload writes)")
	plain := fs.Bool("plain-upload", false, "measure plain uploads to --bucket instead of the stage")
	var pu loadgen.PlainUpload
	fs.Int64Var(&pu.Bytes, "plain-bytes", 2<<30, "plain upload: total bytes")
	fs.Int64Var(&pu.ObjectBytes, "plain-object-bytes", 64<<20, "plain upload: bytes per object")
	fs.IntVar(&pu.Parallel, "plain-parallel", 16, "plain upload: objects at once")
	fs.StringVar(&pu.Via, "plain-via", loadgen.PlainViaSink, "plain upload: the writer, sink (the sink's parts' requests) or gocloud (gocloud's writer, the form before issue 36's ceiling check)")
	fs.StringVar(&pu.Prefix, "plain-prefix", "plain-upload", "plain upload: key prefix (objects are deleted after)")
	fs.BoolVar(&pu.Keep, "plain-keep", false, "plain upload: leave the objects (so that the store's CPU counted around the command holds no deletes)")
	plainDelete := fs.Bool("plain-delete", false, "plain upload: instead, delete what --plain-keep uploads under --plain-prefix left")
	ec := loadgen.EdgeConfig{Batch: 4096, DeleteShare: 0.1, ProbeEvery: 10}
	fs.StringVar(&ec.EdgeTopic, "edge-topic", config.Setting("WALKSTAGE_EDGE_TOPIC"), "edges: the live graph's edge topic")
	fs.IntVar(&ec.Updates, "edge-updates", 1_000_000, "edges: updates produced")
	fs.IntVar(&ec.Batch, "edge-batch", ec.Batch, "edges: updates a record (the binary batch form)")
	fs.Float64Var(&ec.DeleteShare, "edge-delete-share", ec.DeleteShare, "edges: share of updates that delete an edge inserted earlier")
	fs.Float64Var(&ec.Rate, "edge-rate", 0, "edges: updates a second against a running stage (0: a backlog)")
	fs.IntVar(&ec.ProbeEvery, "edge-probe-every", ec.ProbeEvery, "edges, paced: records between two probes")
	fs.BoolVar(&ec.Times, "edge-times", false, "edges: inserts carry times (set by --graph for a graph with edge times)")
	var rf cli.ResultFlags
	rf.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	if *plain {
		if *bucket == "" {
			return cli.UsageErrorf(fs, "--plain-upload needs --bucket")
		}
		pu.BucketURL = *bucket
		if *plainDelete {
			n, err := pu.Delete(ctx)
			if err == nil {
				fmt.Fprintf(stderr, "plain upload: deleted %d objects under %s\n", n, pu.Prefix)
			}
			return err
		}
		r, err := pu.Run(ctx)
		if err != nil {
			return err
		}
		w, _ := rf.Writers(stdout, stderr)
		r.Report(w, pu)
		return rf.Print(stdout, r.Summary(pu))
	}
	weightedSet := false
	fs.Visit(func(f *flag.Flag) { weightedSet = weightedSet || f.Name == "weighted" })
	if (c.Output == loadgen.OutputVisits || c.Output == loadgen.OutputSamples) && !weightedSet {
		c.Weighted = false // issue 15's queries: unweighted PPR; samples unweighted unless asked
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Brokers = append(c.Brokers, b)
		}
	}
	var pool []int64
	switch {
	case *graphPath != "" && *vertices > 0:
		return cli.UsageErrorf(fs, "--graph and --vertices: give one")
	case *graphPath != "":
		g, err := graph.LoadWith(*graphPath, graph.LoadOptions{SkipValidate: true})
		if err != nil {
			return err
		}
		pool = loadgen.SeedPool(g)
		ec.Times = ec.Times || g.Times != nil
		g.Close()
		if len(pool) == 0 {
			return fmt.Errorf("graph %s: no vertex has out-edges", *graphPath)
		}
	case *vertices > 0:
		pool = loadgen.RangePool(*vertices)
	default:
		return cli.UsageErrorf(fs, "--graph or --vertices is required (where seeds are drawn from)")
	}
	if *mode == loadgen.ModeEdges {
		return loadEdges(ctx, c, ec, pool, rf, stdout, stderr)
	}
	if err := c.Normalize(); err != nil {
		return err
	}
	w, notes := rf.Writers(stdout, stderr)
	fmt.Fprintf(notes, "load: %s of %d %s requests (batch ids %s-N) to %s on %s; events from %s\n", *mode, c.Requests, c.Output,
		c.IDPrefix, c.RequestTopic, strings.Join(c.Brokers, ","), c.EventTopic)
	c.OnWatching = func() { fmt.Fprintln(notes, "load: watching the event topics from their ends") }
	t0 := time.Now()
	r, err := loadgen.Run(ctx, c, *mode, pool)
	if err != nil {
		if r != nil {
			fmt.Fprintf(notes, "load: after %.1f s, %d of %d requests done\n", time.Since(t0).Seconds(), len(r.FetchToEvent), c.Requests)
		}
		return err
	}
	if *bucket != "" {
		// Said before the manifests are read back (a GET a batch, which
		// the stage never makes): scripts/stage-load.sh reads the store's
		// CPU for a backlog at this line.
		fmt.Fprintln(notes, "load: every event read; reading the manifests for the bytes written")
		if err := r.AddBytes(ctx, *bucket); err != nil {
			return fmt.Errorf("bytes written: %w", err)
		}
	}
	r.Report(w)
	return rf.Print(stdout, r.Summary())
}

// loadEdges is `load --mode edges`.
func loadEdges(ctx context.Context, c loadgen.Config, ec loadgen.EdgeConfig, pool []int64, rf cli.ResultFlags, stdout, stderr io.Writer) error {
	ec.Config = c
	w, notes := rf.Writers(stdout, stderr)
	ec.OnWatching = func() { fmt.Fprintln(notes, "load: watching the event topics from their ends") }
	fmt.Fprintf(notes, "load: %d edge updates in records of %d to %s on %s\n", ec.Updates, ec.Batch, ec.EdgeTopic, strings.Join(c.Brokers, ","))
	r, err := loadgen.RunEdges(ctx, ec, pool)
	if err != nil {
		return err
	}
	r.Report(w)
	return rf.Print(stdout, r.Summary())
}
