package benchcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/hybrid"
)

// benchCase is one line of the benchmark table.
type benchCase struct {
	name    string
	alg     walk.Algorithm
	fromMax bool // every walk starts at the highest-degree vertex
}

// benchCases are the walk cases; the temporal ones's exponential bias
// decays over timeScale.
func benchCases(length int, timeScale float64) map[string]benchCase {
	temporal := func(bias walk.TimeBias, weighted bool) walk.Algorithm {
		a := walk.Algorithm{Kind: walk.Temporal, Length: length, Weighted: weighted, Time: walk.TimeParams{Bias: bias}}
		if bias == walk.TimeExponential {
			a.Time.Scale = timeScale
		}
		return a
	}
	// n2v: temporal Node2Vec, p and q as gpu's TestBenchRMAT rows.
	n2v := func(a walk.Algorithm) walk.Algorithm {
		a.P, a.Q = 0.5, 2
		return a
	}
	return map[string]benchCase{
		"temporal":                      {"temporal", temporal(walk.TimeUniform, false), false},
		"temporal-linear":               {"temporal-linear", temporal(walk.TimeLinear, false), false},
		"temporal-exponential":          {"temporal-exp", temporal(walk.TimeExponential, false), false},
		"temporal-weighted":             {"temporal-weighted", temporal(walk.TimeUniform, true), false},
		"temporal-linear-weighted":      {"temporal-lin-w", temporal(walk.TimeLinear, true), false},
		"temporal-exponential-weighted": {"temporal-exp-w", temporal(walk.TimeExponential, true), false},
		"temporal-node2vec":             {"temporal-n2v", n2v(temporal(walk.TimeUniform, false)), false},
		"temporal-node2vec-exponential": {"temporal-n2v-exp", n2v(temporal(walk.TimeExponential, false)), false},
		"deepwalk":                      {"deepwalk", walk.Algorithm{Kind: walk.DeepWalk, Length: length}, false},
		"deepwalk-weighted":             {"deepwalk-weighted", walk.Algorithm{Kind: walk.DeepWalk, Length: length, Weighted: true}, false},
		"deepwalk-zprs":                 {"deepwalk-zprs", walk.Algorithm{Kind: walk.DeepWalk, Length: length, Weighted: true, Stepper: walk.StepperZPRS}, false},
		"deepwalk-dprs":                 {"deepwalk-dprs", walk.Algorithm{Kind: walk.DeepWalk, Length: length, Weighted: true, Stepper: walk.StepperDPRS}, false},
		"node2vec":                      {"node2vec", walk.Algorithm{Kind: walk.Node2Vec, Length: length, Weighted: true, P: 2, Q: 0.5}, false},
		"metapath":                      {"metapath", walk.Algorithm{Kind: walk.MetaPath, Length: length, Weighted: true, Schema: []uint8{0, 1, 2, 3, 4}}, false},
		"metapath-zprs":                 {"metapath-zprs", walk.Algorithm{Kind: walk.MetaPath, Length: length, Weighted: true, Schema: []uint8{0, 1, 2, 3, 4}, Stepper: walk.StepperZPRS}, false},
		"ppr":                           {"ppr", walk.Algorithm{Kind: walk.PPR, Length: length, StopProb: 0.2}, true},
	}
}

// Run is `walkstage bench`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, `walkstage bench [--graph g.wsg | --scale 20 --edge-factor 16] [--engine cpu|gpu|hybrid] [--algorithms LIST]

Measures walk throughput (steps/s, sampled edges/s) per algorithm on a graph
file or a generated R-MAT graph; the walks are discarded.`)
	graphPath := fs.String("graph", "", "graph file (walkstage format); empty generates an R-MAT graph")
	scale := fs.Int("scale", 20, "R-MAT scale (2^scale vertices) when no --graph")
	edgeFactor := fs.Int("edge-factor", 16, "R-MAT edge factor")
	seed := fs.Uint64("seed", 1, "graph and walk seed")
	undirected := fs.Bool("undirected", true, "symmetrise the generated graph")
	labels := fs.Int("labels", 5, "edge labels of the generated graph (0: none)")
	times := fs.Int64("times", 1_000_000, "edge times of the generated graph, uniform in [0, N), when --algorithms has a temporal case (the graph is untimed otherwise)")
	timeScale := fs.Float64("time-scale", 10_000, "temporal-exponential cases: the time bias's decay scale")
	engineName := fs.String("engine", "cpu", "engine: cpu, gpu or hybrid (both on every job, walks split by measured rate)")
	algos := fs.String("algorithms", "deepwalk,deepwalk-weighted,node2vec,ppr,metapath,deepwalk-zprs", "comma-separated: "+caseNames())
	length := fs.Int("length", 80, "steps per walk")
	perVertex := fs.Int("walks-per-seed", 1, "walks started from every vertex (each vertex is a seed)")
	cli.Alias(fs, "walks-per-vertex", "walks-per-seed")
	maxWalks := fs.Int("max-walks", 0, "cap the walks per algorithm (0: one per vertex times --walks-per-seed)")
	repeat := fs.Int("repeat", 1, "runs per algorithm; the best is reported")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "CPU engine workers")
	fusedLimit := fs.Int64("fused-table-limit", -1, "most bytes the CPU engine's fused table may take (0: off, -1: a quarter of memory)")
	hostMemory := fs.Int64("host-memory", 0, "host memory budget in bytes: a graph needing more is walked out of core (0: WALKSTAGE_HOST_MEMORY_LIMIT, else the cgroup's memory limit, else MemAvailable; -1: always in memory)")
	gpuLimit := fs.Int64("gpu-memory-limit", 0, "GPU engine: most device memory in bytes (0: the free memory; as WALKSTAGE_GPU_MEMORY_LIMIT)")
	deviceFraction := fs.Float64("device-fraction", 1, "GPU engine: most of the edges on the device, the rest in mapped host memory (placement plan)")
	streamPart := fs.Int64("stream-partition-bytes", 0, "GPU engine under --gpu-stream: the size of a streamed partition, in bytes (0: an eighth of the device budget, at most 48 MiB)")
	streamMode := fs.String("gpu-stream", "off", "GPU engine: stream the graph to the walkers in partitions always (on: --device-fraction then caps the share resident), never (off, the default: the placement plan reads host memory in place and walks every algorithm), or hold both plans when it does not fit the device or --device-fraction is below 1 and walk each batch under the faster (auto)")
	partition := fs.String("partition", "auto", "GPU engine with several --gpus: partition one copy of the graph over their memory (on), copy it to each (off), or partition only when it does not fit one (auto); as WALKSTAGE_GPU_PARTITION")
	hostShare := fs.Float64("host-share", 0, "with --partition: put this share (0 to 1) of the partitioned graph in host memory, as when it does not fit the GPUs together (0: only what does not fit)")
	gpus := fs.String("gpus", "all", "GPU engine: devices to spread walks over, all or ordinals such as 0,1 (as WALKSTAGE_GPUS; 0,0 runs two engines on one device)")
	hostRead := fs.Int64("host-read-bytes", 0, "GPU engine: first measure random 32/64-byte reads from mapped host memory and a host-to-device copy over a region of this size (0: skip)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the walks (not the graph set-up) to this file")
	var vb visitsBench
	fs.IntVar(&vb.queries, "visits-queries", 1000, "visits case: queries (one random seed each)")
	fs.Int64Var(&vb.steps, "visits-steps", 100_000, "visits case: steps per query")
	fs.IntVar(&vb.topK, "visits-top-k", 100, "visits case: candidates per query")
	fs.Float64Var(&vb.restart, "visits-restart", 0.2, "visits case: PPR stop (restart) probability")
	sb := sampleBench{}
	fs.IntVar(&sb.seeds, "sample-seeds", 1000, "sampling cases: seeds (one instance each), drawn among vertices with out-edges")
	fs.IntVar(&sb.frontierSize, "sample-frontier-size", 2000, "frontier case: frontier size")
	fs.IntVar(&sb.frontierSteps, "sample-frontier-steps", 100_000, "frontier case: steps per instance")
	fs.IntVar(&sb.frontierInstances, "sample-frontier-instances", 16, "frontier case: instances (one frontier of random seeds)")
	fs.Int64Var(&sb.waveEdges, "sample-wave-edges", message.SampleWaveEdges, "sampling cases: about the edges one call samples and holds, as the stage samples in waves (0: each case in one call, memory growing with the sample)")
	var rf cli.ResultFlags
	rf.Register(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", fs.Arg(0))
	}
	// Rows are printed as each case finishes; --json collects them into
	// one line at the end.
	rfStdout := stdout
	stdout, stderr = rf.Writers(stdout, stderr)
	logw := stderr
	sb.workers = *workers
	sampleCases := sampleBenchCases(sb)

	var span int64
	if strings.Contains(*algos, "temporal") {
		span = *times
	}
	t0 := time.Now()
	g, err := benchGraph(ctx, *graphPath, graph.RMATOptions{Scale: *scale, EdgeFactor: *edgeFactor, Seed: *seed,
		Undirected: *undirected, Weighted: true, Labels: *labels, Name: fmt.Sprintf("rmat-s%d-e%d", *scale, *edgeFactor), TimeSpan: span})
	if err != nil {
		return err
	}
	defer g.Close()
	maxDeg, maxV := g.MaxDegree()
	res := benchResult{Graph: g.Name, GraphVersion: g.Version, Vertices: g.NumVertices(), Edges: g.NumEdges(), MaxDegree: maxDeg,
		CPUCores: runtime.NumCPU(), Cases: []benchRow{}}
	fmt.Fprintf(stdout, "graph %s: V=%d E=%d max degree %d, %.1f MiB, ready in %s\n", g.Name, g.NumVertices(), g.NumEdges(),
		maxDeg, float64(g.MemoryBytes())/(1<<20), time.Since(t0).Round(time.Millisecond))

	t1 := time.Now()
	if *deviceFraction <= 0 || *deviceFraction > 1 {
		return fmt.Errorf("--device-fraction %v is outside (0, 1]", *deviceFraction)
	}
	devices, err := engines.ParseGPUs(*gpus)
	if err != nil {
		return fmt.Errorf("--gpus: %w", err)
	}
	part, err := engines.ParsePartition(*partition)
	if err != nil {
		return fmt.Errorf("--partition: %w", err)
	}
	stream, err := gpu.ParseStreamMode(*streamMode)
	if err != nil {
		return fmt.Errorf("--gpu-stream: %w", err)
	}
	eng, err := engines.New(g, *engineName, engines.Settings{Workers: *workers, FusedTableBytes: *fusedLimit, HostMemoryLimit: *hostMemory,
		GPUMemoryLimit: *gpuLimit, GPUDeviceFraction: *deviceFraction, GPUStream: stream, GPUStreamPartitionBytes: *streamPart, GPUs: devices, GPUPartition: part, GPUHostShare: *hostShare}, cli.Logger(logw, rf.Quiet))
	if err != nil {
		return err
	}
	defer eng.Close()
	res.Engine = eng.Name()
	fmt.Fprintf(stdout, "engine %s ready in %s (sampling tables included), %d CPU cores\n", eng.Name(), time.Since(t1).Round(time.Millisecond), runtime.NumCPU())
	// The hybrid engine's GPU half has the placement and the stream plan.
	devEng := eng
	if h, ok := eng.(*hybrid.Engine); ok {
		_, devEng = h.Parts()
	}
	if err := benchPlacement(devEng, *hostRead, stdout); err != nil {
		return err
	}

	cases := benchCases(*length, *timeScale)
	stopProfile, err := cli.StartCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	fmt.Fprintf(stdout, benchRowFmt, "algorithm", "sampler", "walks", "steps", "time", "M steps/s", "M SEPS", "kernel M/s", "engine MiB", "tables MiB", "table build", "peak RSS MiB")
	for _, name := range strings.Split(*algos, ",") {
		var row benchRow
		if p, ok := sampleCases[strings.TrimSpace(name)]; ok {
			row, err = benchSample(ctx, eng, strings.TrimSpace(name), p, g, sb, *seed, *repeat, stdout)
		} else if strings.TrimSpace(name) == "visits" {
			row, err = benchVisits(ctx, eng, g, vb, *length, *seed, *repeat, stdout)
		} else if c, ok := cases[strings.TrimSpace(name)]; ok {
			row, err = benchWalk(ctx, eng, g, c, benchWalkRun{perVertex: *perVertex, maxWalks: *maxWalks, seed: *seed,
				repeat: *repeat, from: maxV}, stdout, stderr)
			if err == nil && row.Skipped == "" {
				benchStreamStats(devEng, stdout)
				benchHybridShare(eng, &row, stdout)
			}
		} else {
			return fmt.Errorf("unknown algorithm %q (want %s)", name, caseNames())
		}
		if err != nil {
			return err
		}
		res.Cases = append(res.Cases, row)
	}
	if rf.JSON {
		return cli.PrintJSON(rfStdout, res)
	}
	fmt.Fprintln(stdout, "SEPS = sampled edges per second (C-SAW's measure; one sampled edge per walk step). time = the whole Run with chunks handed to a no-op consumer; kernel M/s = steps over the engine's compute time (GPU: kernel time; CPU: same as time).")
	return nil
}

// benchGraph loads path, or generates the R-MAT graph rmat when path is empty.
func benchGraph(ctx context.Context, path string, rmat graph.RMATOptions) (*graph.Graph, error) {
	if path != "" {
		return graph.Load(path)
	}
	return graph.GenerateRMAT(ctx, rmat)
}

// Rows are printed as each algorithm finishes (a slow reservoir row
// must not hide the others), so widths are fixed rather than tabulated.
const benchRowFmt = "%-18s %-13s %9s %11s %12s %10s %8s %12s %10s %10s %11s %12s\n"

// benchWalkRun is how benchWalk runs a case: walks per vertex (capped at
// maxWalks when positive), the walk seed, the runs of which the best is
// reported, and the start vertex of the cases that all start at one.
type benchWalkRun struct {
	perVertex, maxWalks, repeat int
	seed                        uint64
	from                        uint32
}

// benchWalk runs one walk case and prints its row; a case the graph cannot
// run is skipped with a note on stderr.
func benchWalk(ctx context.Context, eng walk.Engine, g *graph.Graph, c benchCase, r benchWalkRun, stdout, stderr io.Writer) (benchRow, error) {
	if err := c.alg.Validate(g); err != nil {
		fmt.Fprintf(stderr, "skip %s: %v\n", c.name, err)
		return benchRow{Case: c.name, Skipped: err.Error()}, nil
	}
	if err := walk.CheckAlgorithm(eng, c.alg); err != nil {
		fmt.Fprintf(stderr, "skip %s: %v\n", c.name, err)
		return benchRow{Case: c.name, Skipped: err.Error()}, nil
	}
	n := g.NumVertices() * r.perVertex
	if r.maxWalks > 0 && n > r.maxWalks {
		n = r.maxWalks
	}
	starts := make([]uint32, n)
	for i := range starts {
		if c.fromMax {
			starts[i] = r.from
		} else {
			starts[i] = uint32(i % g.NumVertices())
		}
	}
	job := []walk.Job{{Algorithm: c.alg, Seed: r.seed, Starts: starts}}
	// Chunks go back to an engine that reuses their memory, as the stage's
	// and the one-shot's writers give them back once encoded.
	release := func(walk.Chunk) {}
	if cr, ok := eng.(walk.ChunkReleaser); ok {
		release = cr.Release
	}
	var best walk.RunStats
	for i := 0; i < r.repeat; i++ {
		var steps int64
		t := time.Now()
		err := eng.Run(ctx, job, func(ch walk.Chunk) error { steps += ch.Steps(); release(ch); return nil })
		if err != nil {
			return benchRow{}, fmt.Errorf("%s: %w", c.name, err)
		}
		st := walk.RunStats{Walks: int64(n), Steps: steps, Wall: time.Since(t)}
		st.Compute = st.Wall
		if sr, ok := eng.(walk.StatsReporter); ok {
			s := sr.LastRunStats()
			st.Compute, st.MemoryBytes, st.TableBytes, st.TableBuild = s.Compute, s.MemoryBytes, s.TableBytes, s.TableBuild
		}
		if h, ok := eng.(*hybrid.Engine); ok {
			// Each run, not only the best: the engine picks its mode
			// from the earlier runs' rates (hybrid.Share.Mode).
			sh := h.LastShare()
			fmt.Fprintf(stdout, "  hybrid run %d: %.1f M steps/s, %s, cpu %.1f%% of the steps\n", i+1,
				float64(steps)/st.Wall.Seconds()/1e6, sh.Mode, 100*sh.CPUStepShare())
		}
		if i == 0 || st.Wall < best.Wall {
			best = st
		}
	}
	rate := float64(best.Steps) / best.Wall.Seconds() / 1e6
	fmt.Fprintf(stdout, benchRowFmt, c.name, walk.StepperName(c.alg, g), fmt.Sprint(best.Walks), fmt.Sprint(best.Steps),
		best.Wall.Round(time.Microsecond), fmt.Sprintf("%.1f", rate), fmt.Sprintf("%.1f", rate),
		fmt.Sprintf("%.1f", float64(best.Steps)/best.Compute.Seconds()/1e6),
		fmt.Sprintf("%.1f", float64(best.MemoryBytes)/(1<<20)), fmt.Sprintf("%.1f", float64(best.TableBytes)/(1<<20)),
		best.TableBuild.Round(time.Millisecond), fmt.Sprintf("%.0f", peakRSSMiB()))
	return benchRow{Case: c.name, Stepper: walk.StepperName(c.alg, g), Walks: best.Walks, Steps: best.Steps,
		DurationSeconds: best.Wall.Seconds(), StepsPerSecond: perSecond(best.Steps, best.Wall),
		KernelStepsPerSecond: perSecond(best.Steps, best.Compute), EngineBytes: best.MemoryBytes, TableBytes: best.TableBytes,
		TableBuildSeconds: best.TableBuild.Seconds(), PeakRSSBytes: int64(peakRSSMiB() * (1 << 20))}, nil
}

// benchResult is bench's --json line: the graph, the engine and one row
// per case, in the order of --algorithms.
type benchResult struct {
	Graph        string     `json:"graph"`
	GraphVersion string     `json:"graph_version"`
	Vertices     int        `json:"vertices"`
	Edges        int64      `json:"edges"`
	MaxDegree    int        `json:"max_degree"`
	Engine       string     `json:"engine"`
	CPUCores     int        `json:"cpu_cores"`
	Cases        []benchRow `json:"cases"`
}

// benchRow is one case of benchResult: the table's columns for a walk
// case, a sampling case's or the visits case's figures, or why the case
// was skipped. Rates are per second of the best run's duration.
type benchRow struct {
	Case                 string  `json:"case"`
	Skipped              string  `json:"skipped,omitempty"`
	Stepper              string  `json:"stepper,omitempty"`
	Sampling             string  `json:"sampling,omitempty"` // a sampling case's parameters
	SampledOn            string  `json:"sampled_on,omitempty"`
	Walks                int64   `json:"walks,omitempty"`
	Steps                int64   `json:"steps,omitempty"`
	Instances            int64   `json:"instances,omitempty"`
	Edges                int64   `json:"edges,omitempty"`
	Queries              int64   `json:"queries,omitempty"`
	Candidates           int64   `json:"candidates,omitempty"`
	EngineRuns           int64   `json:"engine_runs,omitempty"`
	DurationSeconds      float64 `json:"duration_seconds,omitempty"`
	StepsPerSecond       float64 `json:"steps_per_second,omitempty"`
	KernelStepsPerSecond float64 `json:"kernel_steps_per_second,omitempty"`
	WalkedStepsPerSecond float64 `json:"walked_steps_per_second,omitempty"`
	EdgesPerSecond       float64 `json:"edges_per_second,omitempty"`
	InstancesPerSecond   float64 `json:"instances_per_second,omitempty"`
	QueriesPerSecond     float64 `json:"queries_per_second,omitempty"`
	EngineBytes          int64   `json:"engine_bytes,omitempty"`
	TableBytes           int64   `json:"table_bytes,omitempty"`
	TableBuildSeconds    float64 `json:"table_build_seconds,omitempty"`
	PeakRSSBytes         int64   `json:"peak_rss_bytes,omitempty"`
	// The hybrid engine's split of the best run: the CPU engine's share
	// of the steps, and the walks both engines walked (emitted once).
	CPUStepShare   float64 `json:"cpu_step_share,omitempty"`
	DuplicateWalks int64   `json:"duplicate_walks,omitempty"`
}

// perSecond is n per d, 0 for no time: JSON has no infinity.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func caseNames() string {
	return "deepwalk, deepwalk-weighted, deepwalk-zprs, deepwalk-dprs, node2vec, metapath, metapath-zprs, ppr, " +
		"temporal, temporal-linear, temporal-exponential, temporal-weighted, temporal-linear-weighted, temporal-exponential-weighted, temporal-node2vec, temporal-node2vec-exponential (p 0.5, q 2; on a timed graph, see --times), visits (recommendation queries, see --visits-*); graph sampling (C-SAW, on the GPU where it has kernels, see --sample-*): neighbor, neighbor-weighted, layer, layer-weighted, forest-fire, snowball, frontier, frontier-weighted"
}

// peakRSSMiB reads the process's peak resident set (VmHWM) on Linux.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
