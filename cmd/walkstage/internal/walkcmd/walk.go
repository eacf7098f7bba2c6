package walkcmd

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/hybrid"
	"github.com/walkstage/walkstage/walk/visits"
)

const walkUsage = `walkstage walk --graph FILE [flags]

Walks a graph once and writes Parquet to object storage:
  {out}/{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch-id}/part-NNNNN-{attempt}.parquet
  {out}/{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch-id}/_SUCCESS
where kind is walks, visits or samples (one schema under each, so a reader globs one kind),
NNNNN numbers the parts and {attempt} is an id of this run, so a killed run's parts never
collide with the next one's; only the parts _SUCCESS lists are the output (docs/reference/messages.md,
"Output layout", has the DuckDB and pyarrow queries).

The flags use the request's words (docs/reference/vocabulary.md): --walks-per-seed is
walks_per_seed, --stop-probability stop_probability, --rng-seed rng_seed.

example:
  walkstage walk --graph g.wsg --algorithm node2vec --p 2 --q 0.5 --length 80 --walks-per-seed 10 \
                 --seeds all --rng-seed 42 --out file:///tmp/walks

--algorithm temporal walks a graph with edge times (graph import --time-column, graph generate
--times) forward (or --direction backward) in time, each step at or after the last one's edge time,
with --time-bias uniform, linear or exponential (--time-scale); --with-times adds the times column
(docs/reference/messages.md, "Temporal walks"), e.g.
  walkstage walk --graph g.wsg --algorithm temporal --time-bias exponential --time-scale 3600000 \
                 --start-time 1700000000000 --max-time-gap 86400000 --with-times --out file:///tmp/tw

--output visits writes recommendation candidates instead (docs/reference/messages.md, "Visit counts"):
every seed is one query, named by its external id, with --top-k and --steps-per-query (or
--walks-per-seed given explicitly), one Parquet row per query, as the stage writes an output
"visits" request that lists the same seeds with rng_seed = --rng-seed.

--algorithm neighbor, layer, forest_fire, snowball or frontier samples the graph instead (the
C-SAW samplers, docs/reference/messages.md, "Graph samples"): one row per sampled edge, --walks-per-seed
instances per seed (per --frontier-size consecutive seeds for frontier), as the stage writes a
sampling request listing the same seeds with rng_seed = --rng-seed; neighbor without --replace,
layer, forest_fire, snowball and frontier (unweighted or --weighted) run on the GPU when
--engine gpu or auto finds one, the rest and --engine cpu on the CPU, with the same rows either
way, e.g.
  walkstage walk --graph g.wsg --algorithm neighbor --fanouts 25,10 --seeds 0-999 --out file:///tmp/s

--seeds is "all" (every vertex), a file of external vertex ids (one per line, # comments; an id
the graph lacks is an error), "A-B": the vertices whose external id is in [A, B], or
"list:ID,ID,...": the ids given. For a graph with string ids (graph import --id-type string) a
line of the file is one string id, exactly as written (only the line ending and a line that
starts with # are left out), the ids of "list:" are split at commas, and "A-B" does not apply.

A batch id (default seed-RNG_SEED) that already has output from other parameters (graph,
algorithm and its parameters, seeds, --rng-seed, engine, --compression, --walk-encoding) is
refused with that output named, as the stage refuses a batch_id_conflict; the same
parameters again keep it; --replace-output deletes it and writes this run's.

Walk ids are ordered as in the stage (docs/reference/messages.md): with W = --walks-per-seed, seed k's
walks are k*W .. (k+1)*W-1, so walk i starts at seed i / W. The same flags and seed give
byte-identical output on the same engine.

--quiet prints nothing but errors; --json prints the result as one JSON line on stdout.`

// walkOptions holds walkCmd's flags once parsed; set names the flags given
// explicitly (a parameter of another algorithm is an error only then).
type walkOptions struct {
	graphPath, algoName, schema, samplerName, seeds, out, prefix, batchID, name string
	engineName, compression, walkEncoding, output, cpuProfile, traceFile        string
	fingerprint                                                                 string
	length, perVertex, workers, zstdLevel, rowGroupRows, parallelParts, uploads int
	gpuSlots                                                                    int
	p, q, stop                                                                  float64
	weighted, quiet, asJSON, gpuCopy, replaceOutput, withTimes                  bool
	timeBias, direction                                                         string
	timeScale                                                                   float64
	startTime, maxTimeGap                                                       int64
	seed                                                                        uint64
	fileBytes, memLimit, hostMemory                                             int64
	deviceFraction                                                              float64
	gpuStream                                                                   string
	vp                                                                          visits.VisitParams
	sf                                                                          *sampleFlags
	set                                                                         map[string]bool
	version                                                                     string // of walkstage, in the batch's metadata
}

// parseWalkFlags parses walkCmd's arguments.
func parseWalkFlags(args []string, stderr io.Writer) (*walkOptions, error) {
	o := &walkOptions{}
	fs := flag.NewFlagSet("walk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, walkUsage)
	fs.StringVar(&o.graphPath, "graph", "", "graph file in walkstage format (see 'walkstage graph')")
	fs.StringVar(&o.algoName, "algorithm", "deepwalk", "deepwalk, ppr, node2vec, metapath or temporal; or a sampler: neighbor, layer, forest_fire, snowball, frontier")
	fs.IntVar(&o.length, "length", walk.DefaultLength, "maximum steps per walk")
	fs.Float64Var(&o.p, "p", 1, "node2vec return parameter")
	fs.Float64Var(&o.q, "q", 1, "node2vec in-out parameter")
	fs.Float64Var(&o.stop, "stop-probability", 0.15, "ppr: probability of stopping before each step")
	cli.Alias(fs, "stop", "stop-probability")
	fs.StringVar(&o.schema, "schema", "", "metapath edge labels applied cyclically, e.g. 0,1,2")
	fs.BoolVar(&o.weighted, "weighted", false, "bias steps by edge weight")
	fs.StringVar(&o.samplerName, "sampler", "auto", "auto, uniform, alias, rejection, zprs, dprs or window (temporal)")
	fs.StringVar(&o.timeBias, "time-bias", "uniform", "temporal: weight of the edges in a step's time window: uniform, linear (nearest in time weighs most) or exponential")
	fs.Float64Var(&o.timeScale, "time-scale", 0, "temporal, exponential time bias: decay scale in the graph's time unit (required, > 0)")
	fs.Int64Var(&o.startTime, "start-time", 0, "temporal: the first step takes an edge at or after (backward: at or before) this time (default: any edge of the seed)")
	fs.Int64Var(&o.maxTimeGap, "max-time-gap", 0, "temporal: most time between consecutive steps' edges (default: no limit)")
	fs.StringVar(&o.direction, "direction", "forward", "temporal: forward (edge times non-decreasing) or backward (non-increasing, along out-edges)")
	fs.BoolVar(&o.withTimes, "with-times", false, "temporal: add the times column, each walk vertex's edge time (docs/reference/messages.md)")
	fs.IntVar(&o.perVertex, "walks-per-seed", 1, "walks started from every seed (samplers: instances per seed)")
	cli.Alias(fs, "walks-per-vertex", "walks-per-seed")
	// The samplers' request field is instances_per_seed: the same value
	// under its own name.
	fs.Var(fs.Lookup("walks-per-seed").Value, "instances-per-seed", "samplers: instances per seed (the same value as --walks-per-seed)")
	fs.StringVar(&o.seeds, "seeds", "all", `start vertices: "all", a file of external ids (one per line), a range "A-B", or "list:ID,ID,..."`)
	fs.Uint64Var(&o.seed, "rng-seed", 42, "key of the random stream: the same flags and key give the same output")
	cli.Alias(fs, "seed", "rng-seed")
	fs.StringVar(&o.out, "out", "file://./walks", "bucket URL: file:///dir, s3://bucket?region=...[&endpoint=...&use_path_style=true], gs://bucket")
	fs.StringVar(&o.prefix, "prefix", "walks", "key prefix inside the bucket")
	fs.StringVar(&o.batchID, "batch-id", "", "batch id in the output path (default: seed-<rng-seed>)")
	fs.BoolVar(&o.replaceOutput, "replace-output", false, "replace an output the batch id already has from other parameters (default: refuse, naming it, as the stage's batch_id_conflict)")
	fs.StringVar(&o.name, "name", "", "graph name in the output path and metadata (default: the graph's own)")
	fs.StringVar(&o.engineName, "engine", "auto", "cpu, gpu, hybrid (both on every job, walks split by measured rate), or auto (gpu when this build and host have one)")
	fs.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "CPU engine workers")
	fs.Int64Var(&o.hostMemory, "host-memory", 0, "host memory budget in bytes: a graph needing more is walked out of core (0: WALKSTAGE_HOST_MEMORY_LIMIT, else the cgroup's memory limit, else MemAvailable; -1: always in memory)")
	fs.Float64Var(&o.deviceFraction, "device-fraction", 1, "GPU engine: most of the graph's bytes on the device (the rest in host memory, read in place or streamed: --gpu-stream), as when it does not fit")
	fs.StringVar(&o.gpuStream, "gpu-stream", "off", "GPU engine: stream a graph that does not fit the device (or --device-fraction) in partitions: on, off (the placement plan reads the host's share in place) or auto (each batch under the faster), as WALKSTAGE_GPU_STREAM")
	fs.StringVar(&o.compression, "compression", "zstd", "zstd, snappy or none")
	fs.StringVar(&o.walkEncoding, "walk-encoding", "delta_binary_packed", "Parquet encoding of the walk values: delta_binary_packed (every reader), "+
		"or byte_stream_split (6% smaller under zstd, but DuckDB cannot read it: BYTE_STREAM_SPLIT only for FLOAT/DOUBLE; Arrow, pyarrow, polars and hyparquet can)")
	fs.IntVar(&o.zstdLevel, "zstd-level", 1, "zstd level, 1 (fastest) to 4 (best)")
	fs.Int64Var(&o.fileBytes, "file-bytes", sink.DefaultFileBytes, "roll Parquet parts at this size")
	fs.IntVar(&o.rowGroupRows, "row-group-rows", 0, "walks per row group (0: at most 65536 walks and 2,654,208 vertices: 32768 walks of 80 steps)")
	fs.Int64Var(&o.memLimit, "sink-memory", sink.DefaultMemoryLimit, "bytes of walks the writer may hold")
	fs.IntVar(&o.parallelParts, "parallel-parts", 8, "Parquet parts uploaded at once")
	fs.IntVar(&o.uploads, "uploads-per-part", 4, "parallel 8 MiB upload requests per part (S3 multipart)")
	fs.BoolVar(&o.quiet, "quiet", false, "print nothing but errors (no progress, engine log or result lines)")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as one JSON line on stdout (docs/reference/vocabulary.md)")
	fs.StringVar(&o.output, "output", "walks", "walks, or visits (top-k visited vertices per seed)")
	vp := &o.vp
	fs.IntVar(&vp.TopK, "top-k", 100, "visits: candidates per query")
	fs.Int64Var(&vp.StepsPerQuery, "steps-per-query", 0, "visits: steps counted per query (or give --walks-per-seed)")
	fs.Int64Var(&vp.MinVisits, "min-visits", 1, "visits: least visits of a candidate")
	fs.Int64Var(&vp.NP, "n-p", 0, "visits: early stopping: stop once n-p candidates have n-v visits (0: off)")
	fs.Int64Var(&vp.NV, "n-v", 0, "visits: early stopping's visits")
	fs.BoolVar(&vp.ExcludeSeeds, "exclude-seeds", false, "visits: do not return the seed")
	fs.BoolVar(&vp.ExcludeNeighbors, "exclude-neighbors", false, "visits: do not return the seed's neighbours")
	o.sf = addSampleFlags(fs)
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the walk and its output (not the graph load) to this file")
	fs.IntVar(&o.gpuSlots, "gpu-batch-slots", 3, "GPU engine: batches in flight at once, each with its own pinned 128 MiB buffer (1 to 8; lent to the writer, a buffer waits until its walks are encoded)")
	fs.BoolVar(&o.gpuCopy, "gpu-copy-chunks", false, "GPU engine: copy walks out of its pinned buffers for the writer instead of lending them (for comparison)")
	fs.StringVar(&o.traceFile, "trace", "", "write an execution trace of the walk and its output (not the graph load) to this file ('go tool trace')")
	if err := cli.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.UsageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	if o.graphPath == "" {
		return nil, cli.UsageErrorf(fs, "--graph is required")
	}
	if o.perVertex < 1 {
		return nil, cli.UsageErrorf(fs, "--walks-per-seed %d: want at least 1", o.perVertex)
	}
	if o.gpuSlots < 1 || o.gpuSlots > 8 {
		return nil, cli.UsageErrorf(fs, "--gpu-batch-slots %d: want 1 to 8", o.gpuSlots)
	}
	if o.output != "walks" && o.output != "visits" {
		return nil, cli.UsageErrorf(fs, "--output %q: want walks or visits", o.output)
	}
	if o.withTimes && o.output != "walks" {
		return nil, cli.UsageErrorf(fs, "--with-times is for --output walks")
	}
	o.set = cli.FlagsSet(fs)
	return o, nil
}

// Command is `walkstage walk`; version, walkstage's, is recorded in the
// metadata of every batch it writes.
func Command(version string) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return walkCmd(ctx, version, args, stdout, stderr)
	}
}

func walkCmd(ctx context.Context, version string, args []string, stdout, stderr io.Writer) error {
	o, err := parseWalkFlags(args, stderr)
	if err != nil {
		return err
	}
	o.version = version
	// --quiet: nothing but errors. Errors come back to Main, which prints
	// them; the engine logs only its errors, on the real stderr.
	logw := stderr
	if o.quiet {
		stderr = io.Discard
		if !o.asJSON {
			stdout = io.Discard
		}
	}
	if sk, ok := graphsample.ParseSampleKind(o.algoName); ok {
		return o.runSamples(ctx, sk, stdout, stderr, logw)
	}
	algo, enc, err := o.algorithm()
	if err != nil {
		return err
	}
	g, starts, nSeeds, err := o.loadInputs(algo, stderr)
	if err != nil {
		return err
	}
	defer g.Close()

	// The writer gives every chunk back to the engine (prepareEngine), so
	// the GPU engine may lend its pinned buffers instead of copying them.
	if o.deviceFraction <= 0 || o.deviceFraction > 1 {
		return fmt.Errorf("--device-fraction %v is outside (0, 1]", o.deviceFraction)
	}
	stream, err := gpu.ParseStreamMode(o.gpuStream)
	if err != nil {
		return fmt.Errorf("--gpu-stream: %w", err)
	}
	settings := engines.Settings{Workers: o.workers, FusedTableBytes: -1, GPUBatchSlots: o.gpuSlots, HostMemoryLimit: o.hostMemory,
		GPULentChunks: o.output != "visits" && !o.gpuCopy, GPUDeviceFraction: o.deviceFraction, GPUStream: stream,
		HybridReorderBytes: o.memLimit / 2}
	eng, err := engines.New(g, o.engineName, settings, cli.Logger(logw, o.quiet))
	if err != nil {
		return err
	}
	if cerr := walk.CheckAlgorithm(eng, algo); cerr != nil && o.engineName == "auto" {
		// auto chose a device engine that cannot walk this algorithm
		// (temporal Node2Vec, a temporal walk of a graph larger than the
		// device): the CPU engine can.
		cli.Logger(logw, o.quiet).Info("the CPU engine walks it instead", "reason", cerr.Error())
		eng.Close()
		if eng, err = engines.New(g, "cpu", settings, cli.Logger(logw, o.quiet)); err != nil {
			return err
		}
	}
	defer eng.Close()

	bucket, err := store.OpenBucket(ctx, o.out)
	if err != nil {
		return err
	}
	defer bucket.Close()
	req := runRequest{Tool: "walkstage walk", Graph: g.Name, GraphVersion: g.Version, Output: o.output,
		Algorithm: output.DescribeAlgorithm(algo, g), Seed: o.seed, PerSeed: o.perVertex, Engine: eng.Name(),
		Compression: string(enc.comp), WalkEncoding: string(enc.wenc), WithTimes: o.withTimes}
	if o.output == "visits" {
		req.Params, req.WalkEncoding = o.vp, ""
	}
	o.fingerprint = req.fingerprint(g, starts)
	guard, err := guardOutput(ctx, bucket, o.out, o.prefix, o.id(), o.fingerprint, o.replaceOutput)
	if err != nil {
		return err
	}
	if o.output == "visits" {
		w, err := o.openWriter(ctx, bucket, g, algo, enc, eng.Name(), len(starts), nSeeds)
		if err != nil {
			return err
		}
		return walkVisits(ctx, eng, g, o.vp, starts[:nSeeds:nSeeds], o.out, w, guard, o.asJSON, stdout, stderr)
	}
	extra, err := prepareEngine(eng, algo.Length, stderr)
	if err != nil {
		return err
	}
	w, err := o.openWriter(ctx, bucket, g, algo, enc, eng.Name(), len(starts), nSeeds, extra...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "walking %d walks (%d seeds x %d) of %s with the %s engine into %s\n", len(starts), nSeeds, o.perVertex,
		algo, eng.Name(), store.ObjectURL(o.out, w.Layout().Dir))
	return o.run(ctx, eng, algo, starts, w, guard, stdout, stderr)
}

// id is the run's batch id.
func (o *walkOptions) id() string {
	if o.batchID != "" {
		return o.batchID
	}
	return fmt.Sprintf("seed-%d", o.seed)
}

// runSamples hands a sampling algorithm to walkSamples.
func (o *walkOptions) runSamples(ctx context.Context, sk graphsample.SampleKind, stdout, stderr, logw io.Writer) error {
	comp, err := sink.ParseCompression(o.compression)
	if err != nil {
		return err
	}
	return walkSamples(ctx, sk, o.sf, sampleRun{graphPath: o.graphPath, seeds: o.seeds, out: o.out, prefix: o.prefix,
		batchID: o.batchID, compression: comp, replaceOutput: o.replaceOutput, name: o.name, engineName: o.engineName, cpuProfile: o.cpuProfile, traceFile: o.traceFile, version: o.version, log: cli.Logger(logw, o.quiet), asJSON: o.asJSON, seed: o.seed, weighted: o.weighted, instancesPerSeed: o.perVertex, workers: o.workers,
		set: o.set, sinkOpts: []sink.Option{sink.WithCompression(comp), sink.WithFileBytes(o.fileBytes),
			sink.WithZstdLevel(o.zstdLevel), sink.WithUploadBuffer(sink.DefaultUploadBuffer, o.uploads)}}, stdout, stderr)
}

// walkEncoding is the Parquet encoding a walk run's flags chose.
type walkEncoding struct {
	comp sink.Compression
	wenc sink.WalkEncoding
}

// algorithm builds the walk algorithm from the flags and checks it against
// no graph yet, together with the output's encoding.
func (o *walkOptions) algorithm() (walk.Algorithm, walkEncoding, error) {
	var enc walkEncoding
	for _, f := range []string{"fanouts", "replace", "layer-sizes", "burn-probability", "depth", "max-vertices",
		"frontier-size", "samples", "edge-weight"} {
		if o.set[f] {
			return walk.Algorithm{}, enc, fmt.Errorf("--%s is for the sampling algorithms, not %s", f, o.algoName)
		}
	}
	kind, err := walk.ParseKind(o.algoName)
	if err != nil {
		return walk.Algorithm{}, enc, err
	}
	sampler, err := walk.ParseStepper(o.samplerName)
	if err != nil {
		return walk.Algorithm{}, enc, err
	}
	if enc.comp, err = sink.ParseCompression(o.compression); err != nil {
		return walk.Algorithm{}, enc, err
	}
	if enc.wenc, err = sink.ParseWalkEncoding(o.walkEncoding); err != nil {
		return walk.Algorithm{}, enc, err
	}
	algo := walk.Algorithm{Kind: kind, Length: o.length, Weighted: o.weighted, Stepper: sampler}
	// Parameters of other algorithms are rejected when given explicitly,
	// and left out otherwise (their defaults belong to their algorithm).
	for _, f := range []struct {
		flag string
		kind walk.Kind
	}{{"p", walk.Node2Vec}, {"q", walk.Node2Vec}, {"stop-probability", walk.PPR}, {"schema", walk.MetaPath},
		{"time-bias", walk.Temporal}, {"time-scale", walk.Temporal}, {"start-time", walk.Temporal},
		{"max-time-gap", walk.Temporal}, {"direction", walk.Temporal}, {"with-times", walk.Temporal}} {
		if o.set[f.flag] && kind != f.kind && !(kind == walk.Temporal && (f.flag == "p" || f.flag == "q")) {
			return walk.Algorithm{}, enc, fmt.Errorf("--%s is for %s, not %s", f.flag, f.kind, kind)
		}
	}
	switch kind {
	case walk.Node2Vec:
		algo.P, algo.Q = o.p, o.q
	case walk.PPR:
		algo.StopProb = o.stop
	case walk.MetaPath:
		if algo.Schema, err = parseSchema(o.schema); err != nil {
			return walk.Algorithm{}, enc, err
		}
	case walk.Temporal:
		if algo.Time, err = o.timeParams(); err != nil {
			return walk.Algorithm{}, enc, err
		}
		if o.set["p"] || o.set["q"] { // temporal Node2Vec
			algo.P, algo.Q = o.p, o.q
		}
	}
	if err := algo.Validate(nil); err != nil {
		return walk.Algorithm{}, enc, err
	}
	return algo, enc, nil
}

// timeParams are the temporal flags' parameters.
func (o *walkOptions) timeParams() (walk.TimeParams, error) {
	bias, err := walk.ParseTimeBias(o.timeBias)
	if err != nil {
		return walk.TimeParams{}, err
	}
	t := walk.TimeParams{Bias: bias, Scale: o.timeScale, HasStart: o.set["start-time"], HasMaxGap: o.set["max-time-gap"]}
	if t.HasStart {
		t.Start = o.startTime
	}
	if t.HasMaxGap {
		t.MaxGap = o.maxTimeGap
	}
	switch o.direction {
	case "forward":
	case "backward":
		t.Backward = true
	default:
		return walk.TimeParams{}, fmt.Errorf("--direction %q: want forward or backward", o.direction)
	}
	return t, nil
}

// loadInputs loads the graph and resolves the seeds, for walks each
// repeated --walks-per-seed times; nSeeds is the number before repeating. For
// --output visits it also completes and validates o.vp. The caller closes g.
func (o *walkOptions) loadInputs(algo walk.Algorithm, stderr io.Writer) (g *graph.Graph, starts []uint32, nSeeds int, err error) {
	t0 := time.Now()
	g, err = graph.Load(o.graphPath)
	if err != nil {
		return nil, nil, 0, err
	}
	defer func() {
		if err != nil {
			g.Close()
			g = nil
		}
	}()
	if o.name != "" {
		g.Name = o.name
	}
	if err := algo.Validate(g); err != nil {
		return g, nil, 0, err
	}
	if starts, err = parseSeeds(g, o.seeds); err != nil {
		return g, nil, 0, err
	}
	nSeeds = len(starts)
	switch o.output {
	case "walks":
	case "visits":
		if o.vp.StepsPerQuery == 0 && o.set["walks-per-seed"] {
			o.vp.WalksPerSeed = o.perVertex
		}
		o.vp.Algorithm, o.vp.Seed = algo, o.seed
		if err := o.vp.Validate(g, nil); err != nil {
			return g, nil, 0, err
		}
	default:
		return g, nil, 0, fmt.Errorf("--output %q: want walks or visits", o.output)
	}
	if int64(nSeeds)*int64(o.perVertex) > int64(1)<<40 {
		return g, nil, 0, fmt.Errorf("%d seeds x %d walks each is too many for one run", nSeeds, o.perVertex)
	}
	if o.output == "walks" {
		// Visits count --walks-per-seed walks per query themselves.
		starts = repeatSeeds(starts, o.perVertex)
	}
	fmt.Fprintf(stderr, "graph %s (version %s): %d vertices, %d edges, loaded in %s\n", g.Name, g.Version, g.NumVertices(),
		g.NumEdges(), time.Since(t0).Round(time.Millisecond))
	return g, starts, nSeeds, nil
}

// prepareEngine readies eng for one run of walks of length steps, before
// the run is timed: the GPU engine allocates its batch slots (pinned host
// memory, 0.1 s at its default size on the H100 host), as a long-running
// stage pays once. It returns the writer options that let the sink give the
// engine's chunks back for reuse (sink.WithChunkRelease), where the engine
// takes them.
func prepareEngine(eng walk.Engine, length int, stderr io.Writer) ([]sink.Option, error) {
	if p, ok := eng.(walk.SlotPreparer); ok {
		t0 := time.Now()
		if err := p.PrepareSlots(length); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "engine batch buffers allocated in %s\n", time.Since(t0).Round(time.Millisecond))
	}
	if r, ok := eng.(walk.ChunkReleaser); ok {
		return []sink.Option{sink.WithChunkRelease(r.Release)}, nil
	}
	return nil, nil
}

// openWriter opens the batch writer of this run in bucket.
func (o *walkOptions) openWriter(ctx context.Context, bucket *blob.Bucket, g *graph.Graph, algo walk.Algorithm, enc walkEncoding,
	engine string, walks, nSeeds int, extra ...sink.Option) (*sink.BatchWriter, error) {
	meta := sink.BatchMeta{BatchID: o.id(), Algorithm: algo, Seed: o.seed, Engine: engine, WalkstageVersion: o.version, Walks: int64(walks),
		Fingerprint: o.fingerprint, Times: o.withTimes}
	if o.output == "visits" {
		meta.Walks, meta.Queries = 0, int64(nSeeds)
	}
	opts := []sink.Option{sink.WithCompression(enc.comp), sink.WithFileBytes(o.fileBytes), sink.WithMemoryLimit(o.memLimit),
		sink.WithParallelParts(o.parallelParts), sink.WithUploadBuffer(sink.DefaultUploadBuffer, o.uploads),
		sink.WithWalkEncoding(enc.wenc), sink.WithZstdLevel(o.zstdLevel)}
	switch {
	case o.rowGroupRows > 0:
		opts = append(opts, sink.WithRowGroupRows(o.rowGroupRows))
	case o.output == "walks":
		opts = append(opts, sink.WithRowGroupRows(max(1, min(sink.DefaultMaxRowGroupRows, oneShotRowGroupVertices/(algo.Length+1)))))
	}
	opts = append(opts, extra...)
	return sink.NewBatchWriter(ctx, bucket, o.prefix, meta, g, opts...)
}

// oneShotRowGroupVertices bounds the one-shot's row groups: twice the
// sink's default (which the stage keeps, its requests being smaller), so
// 32,768 walks of 80 steps. On the H200 machine's 16-core host (scale 22,
// GPU engine, /dev/shm) 32,768 walks a row group wrote 1,407-1,485 M walk
// vertices/s where the default 16,384 wrote 1,285-1,398, five runs each,
// alternating; 65,536 was slower with lent chunks (780-850: a batch slot
// waits for a whole row group's encoding).
const oneShotRowGroupVertices = 2 * sink.DefaultMaxRowGroupVertices

// run walks starts into w, showing progress, commits the batch (or aborts
// it on an error) and reports the figures.
func (o *walkOptions) run(ctx context.Context, eng walk.Engine, algo walk.Algorithm, starts []uint32, w *sink.BatchWriter,
	guard *outputGuard, stdout, stderr io.Writer) error {
	var walks, steps atomic.Int64
	var prog *progress
	if !o.quiet {
		prog = newProgress(stderr, int64(len(starts)), "walks")
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
				if prog != nil {
					prog.update(walks.Load(), steps.Load(), w.BytesWritten())
				}
			}
		}
	}()
	stopProfile, err := cli.StartCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	stopTrace, err := cli.StartTrace(o.traceFile)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer stopTrace()
	t1 := time.Now()
	err = eng.Run(runCtx, []walk.Job{{Algorithm: algo, Seed: o.seed, Starts: starts, WithTimes: o.withTimes}}, func(c walk.Chunk) error {
		walks.Add(int64(c.Len()))
		steps.Add(c.Steps())
		return w.Write(runCtx, c)
	})
	walkTime := time.Since(t1)
	var m *output.Manifest
	if err == nil {
		err = guard.clear(ctx, stderr)
	}
	if err == nil {
		m, err = w.Commit(ctx)
	}
	cancel()
	if err != nil {
		if aerr := w.Abort(context.WithoutCancel(ctx)); aerr != nil {
			err = fmt.Errorf("%w (abort: %v)", err, aerr)
		}
		if prog != nil {
			prog.finish(walks.Load(), steps.Load(), w.BytesWritten())
		}
		return err
	}
	total := time.Since(t1)
	if prog != nil {
		prog.finish(walks.Load(), steps.Load(), w.BytesWritten())
	}
	if o.asJSON {
		return cli.PrintJSON(stdout, newWalkResult(o.out, w, m, total))
	}
	reportWalks(stdout, o.out, eng, w, m, total, walkTime)
	return nil
}

// walkResult is the --json line of walkstage walk: the completion event's
// fields for the same batch (docs/reference/messages.md), with the output's kind,
// its bytes and the run's time.
type walkResult struct {
	Status          string   `json:"status"`
	BatchID         string   `json:"batch_id"`
	Output          string   `json:"output"`
	Graph           string   `json:"graph"`
	GraphVersion    string   `json:"graph_version"`
	Algorithm       string   `json:"algorithm"`
	Engine          string   `json:"engine"`
	RNGSeed         string   `json:"rng_seed"`
	Walks           int64    `json:"walks"`
	Steps           int64    `json:"steps"`
	Queries         int64    `json:"queries,omitempty"`
	Candidates      int64    `json:"candidates,omitempty"`
	Instances       int64    `json:"instances,omitempty"`
	Edges           int64    `json:"edges,omitempty"`
	Bytes           int64    `json:"bytes"`
	Objects         []string `json:"objects"`
	Manifest        string   `json:"manifest"`
	DurationSeconds float64  `json:"duration_seconds"`
}

// newWalkResult describes the batch w committed as manifest m into the
// bucket at bucketURL, total after the engine started.
func newWalkResult(bucketURL string, w *sink.BatchWriter, m *output.Manifest, total time.Duration) walkResult {
	r := walkResult{Status: "succeeded", BatchID: m.BatchID, Output: cmp.Or(m.Output, "walks"), Graph: m.Graph,
		GraphVersion: m.GraphVersion, Algorithm: m.Algorithm.Name, Engine: m.Engine, RNGSeed: strconv.FormatUint(m.Seed, 10),
		Walks: m.Walks, Steps: m.Steps, Queries: m.Queries, Candidates: m.Candidates, Instances: m.Instances, Edges: m.Edges,
		Bytes: m.Bytes, Objects: make([]string, len(m.Files)), Manifest: store.ObjectURL(bucketURL, w.Layout().SuccessKey()),
		DurationSeconds: total.Seconds()}
	for i, f := range m.Files {
		r.Objects[i] = store.ObjectURL(bucketURL, f.Key)
	}
	return r
}

// reportWalks prints what a committed walk run wrote and how fast.
func reportWalks(stdout io.Writer, out string, eng walk.Engine, w *sink.BatchWriter, m *output.Manifest, total, walkTime time.Duration) {
	fmt.Fprintf(stdout, "wrote %d walks, %d steps in %d part(s), %s, to %s\n", m.Walks, m.Steps, len(m.Files), cli.HumanBytes(m.Bytes),
		store.ObjectURL(out, w.Layout().SuccessKey()))
	fmt.Fprintf(stdout, "walk+encode %s (engine returned after %s): %.1f M steps/s, %.1f M walk vertices/s, %.1f MB/s\n",
		total.Round(time.Millisecond), walkTime.Round(time.Millisecond), float64(m.Steps)/total.Seconds()/1e6,
		float64(m.Steps+m.Walks)/total.Seconds()/1e6, float64(m.Bytes)/total.Seconds()/1e6)
	if st, ok := eng.(walk.StatsReporter); ok {
		rs := st.LastRunStats()
		fmt.Fprintf(stdout, "engine compute %s of run %s; %.2f bytes per walk vertex; sink held at most %s%s\n",
			rs.Compute.Round(time.Millisecond), rs.Wall.Round(time.Millisecond), float64(m.Bytes)/float64(m.Steps+m.Walks),
			cli.HumanBytes(w.PeakHeldBytes()), copiedNote(w.CopiedLentVertices(), m.Steps+m.Walks))
	}
	if h, ok := eng.(*hybrid.Engine); ok {
		sh := h.LastShare()
		fmt.Fprintf(stdout, "hybrid (%s): cpu %.1f%% of the steps (%d walks), gpu %.1f%% (%d walks); %d walks walked by both, emitted once\n",
			sh.Mode, 100*sh.CPUStepShare(), sh.CPUWalks, 100*(1-sh.CPUStepShare()), sh.GPUWalks, sh.Duplicates)
	}
}

// copiedNote tells how much of the walks lent by the engine the writer
// copied (walk.Chunk.LentRunEnd): nothing when it copied none.
func copiedNote(copied, vertices int64) string {
	if copied == 0 || vertices == 0 {
		return ""
	}
	return fmt.Sprintf(", copied %.1f%% of the lent walk vertices", 100*float64(copied)/float64(vertices))
}

// repeatSeeds lists each seed's walks together, seed-major, the stage's
// walk order (message.Request.Job): walk i starts at seeds[i / perSeed].
func repeatSeeds(seeds []uint32, perSeed int) []uint32 {
	if perSeed == 1 {
		return seeds
	}
	starts := make([]uint32, 0, len(seeds)*perSeed)
	for _, s := range seeds {
		for range perSeed {
			starts = append(starts, s)
		}
	}
	return starts
}

func parseSchema(s string) ([]uint8, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("metapath needs --schema, e.g. --schema 0,1,2")
	}
	var out []uint8
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 8)
		if err != nil {
			return nil, fmt.Errorf("--schema %q: label %q is not a number in 0..255", s, f)
		}
		out = append(out, uint8(v))
	}
	return out, nil
}

var seedRange = regexp.MustCompile(`^\s*(-?\d+)\s*-\s*(-?\d+)\s*$`)

// parseSeeds resolves --seeds to dense start vertices.
func parseSeeds(g *graph.Graph, spec string) ([]uint32, error) {
	if spec == "all" {
		out := make([]uint32, g.NumVertices())
		for i := range out {
			out[i] = uint32(i)
		}
		return out, nil
	}
	if list, ok := strings.CutPrefix(spec, "list:"); ok {
		return seedsFromList(g, list)
	}
	if _, err := os.Stat(spec); err != nil {
		if m := seedRange.FindStringSubmatch(spec); m != nil {
			if g.HasStringIDs() {
				return nil, fmt.Errorf("--seeds %s: a range needs integer ids, graph %s has string ids: give a file of ids or list:ID,ID,...", spec, g.Name)
			}
			return seedsInRange(g, m[1], m[2])
		}
		return nil, fmt.Errorf("--seeds %q: not \"all\", a range A-B, list:ID,ID,... or a readable file: %w", spec, err)
	}
	return seedsFromFile(g, spec)
}

// seedsFromList resolves the ids of --seeds list:ID,ID,... in order.
func seedsFromList(g *graph.Graph, list string) ([]uint32, error) {
	var out []uint32
	for i, id := range strings.Split(list, ",") {
		v, err := seedID(g, id)
		if err != nil {
			return nil, fmt.Errorf("--seeds list: id %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// seedID resolves one external id written as text: a string id of a graph
// with string ids (1 to 1024 bytes), else a decimal integer.
func seedID(g *graph.Graph, id string) (uint32, error) {
	if g.HasStringIDs() {
		if id == "" || len(id) > message.MaxStringIDLen {
			return 0, fmt.Errorf("%q is not a string id (1 to %d bytes)", truncateID(id), message.MaxStringIDLen)
		}
		v, ok := g.DenseIDString(id)
		if !ok {
			return 0, fmt.Errorf("vertex %q is not in graph %s", truncateID(id), g.Name)
		}
		return v, nil
	}
	x, err := strconv.ParseInt(strings.TrimSpace(id), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a vertex id", truncateID(id))
	}
	v, ok := g.DenseID(x)
	if !ok {
		return 0, fmt.Errorf("vertex %d is not in graph %s", x, g.Name)
	}
	return v, nil
}

func truncateID(id string) string {
	if len(id) > 64 {
		return id[:64] + "..."
	}
	return id
}

// seedsInRange selects the vertices whose external id lies in [a, b], in
// external id order. Ids in the range that the graph lacks are skipped (an
// external id space is often sparse); an empty selection is an error.
func seedsInRange(g *graph.Graph, a, b string) ([]uint32, error) {
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("--seeds %s-%s: %w", a, b, err)
	}
	if hi < lo {
		return nil, fmt.Errorf("--seeds %d-%d: empty range", lo, hi)
	}
	var out []uint32
	if g.IDs == nil {
		for x := max(lo, 0); x <= hi && x < int64(g.NumVertices()); x++ {
			out = append(out, uint32(x))
		}
	} else {
		for v, x := range g.IDs {
			if x >= lo && x <= hi {
				out = append(out, uint32(v))
			}
		}
		slices.SortFunc(out, func(u, v uint32) int { return cmp.Compare(g.IDs[u], g.IDs[v]) })
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--seeds %d-%d: no vertex of graph %s has an id in the range", lo, hi, g.Name)
	}
	return out, nil
}

func seedsFromFile(g *graph.Graph, path string) ([]uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--seeds: %w", err)
	}
	defer f.Close()
	var out []uint32
	sc := bufio.NewScanner(f)
	if g.HasStringIDs() {
		// A string id may hold spaces and #: the line is the id.
		sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
		for line := 1; sc.Scan(); line++ {
			s := strings.TrimSuffix(sc.Text(), "\r")
			if s == "" || s[0] == '#' {
				continue
			}
			v, err := seedID(g, s)
			if err != nil {
				return nil, fmt.Errorf("--seeds %s line %d: %w", path, line, err)
			}
			out = append(out, v)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("--seeds %s: %w", path, err)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("--seeds %s: no vertex ids", path)
		}
		return out, nil
	}
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if s == "" {
			continue
		}
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %s line %d: %q is not a vertex id", path, line, s)
		}
		v, ok := g.DenseID(x)
		if !ok {
			return nil, fmt.Errorf("--seeds %s line %d: vertex %d is not in graph %s", path, line, x, g.Name)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--seeds %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--seeds %s: no vertex ids", path)
	}
	return out, nil
}
