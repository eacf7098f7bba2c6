package walkcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// sampleFlags are the flags of `walkstage walk --algorithm <sampler>`
// (neighbor, layer, forest_fire, snowball, frontier; docs/reference/messages.md,
// "Graph samples").
type sampleFlags struct {
	fanouts, layerSizes string
	replace, edgeWeight bool
	burn                float64
	depth, maxVertices  int
	frontierSize        int
	samples             int
	waveEdges           int64
}

func addSampleFlags(fs *flag.FlagSet) *sampleFlags {
	f := &sampleFlags{}
	fs.StringVar(&f.fanouts, "fanouts", "", "neighbor: per-hop fan-outs, e.g. 25,10")
	fs.BoolVar(&f.replace, "replace", false, "neighbor: select with replacement")
	fs.StringVar(&f.layerSizes, "layer-sizes", "", "layer: per-hop layer sizes, e.g. 25,10")
	fs.Float64Var(&f.burn, "burn-probability", 0, "forest_fire: burning probability in (0, 1)")
	fs.IntVar(&f.depth, "depth", 0, "forest_fire, snowball: hops")
	fs.IntVar(&f.maxVertices, "max-vertices", 10_000, "forest_fire, snowball: most vertices per sample")
	fs.IntVar(&f.frontierSize, "frontier-size", 0, "frontier: seeds per instance (consecutive --seeds)")
	fs.IntVar(&f.samples, "samples", 0, "frontier: steps (sampled edges) per instance")
	fs.BoolVar(&f.edgeWeight, "edge-weight", false, "sampling: add an edge_weight column")
	fs.Int64Var(&f.waveEdges, "sample-wave-edges", message.SampleWaveEdges, "sampling: about the edges one wave samples and holds (two waves are held at a time, three for neighbor)")
	return f
}

// errWaveNotWritten stops the sampling loop of walkSamples once a write
// has failed; the write's own error is the one returned.
var errWaveNotWritten = errors.New("walkstage: a sampled wave was not written")

// sampleRun is what walkSamples needs of walk's other flags.
type sampleRun struct {
	graphPath, seeds, out, prefix, batchID, name string
	engineName, cpuProfile, traceFile, version   string
	compression                                  sink.Compression
	seed                                         uint64
	weighted, replaceOutput, asJSON              bool
	instancesPerSeed, workers                    int
	sinkOpts                                     []sink.Option
	log                                          *slog.Logger
	set                                          map[string]bool
}

// sampleWavesHeld is how many waves' columns walkSamples holds at once.
// Neighbour sampling holds three: one sampling, one being written, and one
// sampled and waiting for the writer. With two, the sampling waited for
// the writer after every wave in which it outran it, the two in lockstep,
// each step as long as the slower (neighbour [25, 10] over 1 M seeds on
// the H200 host: 18-28 ms of waiting in 29 waves with two sets, 9-17 ms in
// 32 waves with three; about 25 MiB more peak RSS). Other samplers hold
// two: a third set is a whole wave more of memory (snowball 98 MiB more
// peak RSS, layer 50), and neither got faster with it.
func sampleWavesHeld(p graphsample.SampleParams) int {
	if p.Kind == graphsample.NeighborSampling {
		return 3
	}
	return 2
}

func parseSizes(flag, s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--%s %q: %q is not an integer", flag, s, f)
		}
		out = append(out, v)
	}
	return out, nil
}

// params builds the sampling parameters, refusing flags of walks and of
// other samplers.
func (f *sampleFlags) params(kind graphsample.SampleKind, r sampleRun) (graphsample.SampleParams, error) {
	for _, name := range []string{"length", "p", "q", "stop-probability", "schema", "sampler", "output", "top-k", "steps-per-query",
		"min-visits", "n-p", "n-v", "exclude-seeds", "exclude-neighbors", "walk-encoding", "row-group-rows"} {
		if r.set[name] {
			return graphsample.SampleParams{}, fmt.Errorf("--%s is not for the sampling algorithm %s", name, kind)
		}
	}
	if f.waveEdges < 1 {
		return graphsample.SampleParams{}, fmt.Errorf("--sample-wave-edges %d: want at least 1", f.waveEdges)
	}
	p := graphsample.SampleParams{Kind: kind, Seed: r.seed, InstancesPerSeed: r.instancesPerSeed, Replace: f.replace}
	var err error
	if p.Fanouts, err = parseSizes("fanouts", f.fanouts); err != nil {
		return p, err
	}
	if p.LayerSizes, err = parseSizes("layer-sizes", f.layerSizes); err != nil {
		return p, err
	}
	if r.weighted {
		p.EdgeBias = graphsample.Bias{Kind: graphsample.BiasEdgeWeight}
	}
	switch kind {
	case graphsample.ForestFire:
		p.BurnProb, p.Depth, p.MaxVertices = f.burn, f.depth, f.maxVertices
	case graphsample.Snowball:
		p.Depth, p.MaxVertices = f.depth, f.maxVertices
	case graphsample.FrontierWalk:
		p.FrontierSize, p.Samples = f.frontierSize, f.samples
	}
	for _, x := range []struct {
		flag  string
		kinds []graphsample.SampleKind
	}{{"fanouts", []graphsample.SampleKind{graphsample.NeighborSampling}}, {"replace", []graphsample.SampleKind{graphsample.NeighborSampling}},
		{"layer-sizes", []graphsample.SampleKind{graphsample.LayerSampling}}, {"burn-probability", []graphsample.SampleKind{graphsample.ForestFire}},
		{"depth", []graphsample.SampleKind{graphsample.ForestFire, graphsample.Snowball}}, {"max-vertices", []graphsample.SampleKind{graphsample.ForestFire, graphsample.Snowball}},
		{"frontier-size", []graphsample.SampleKind{graphsample.FrontierWalk}}, {"samples", []graphsample.SampleKind{graphsample.FrontierWalk}}} {
		ok := false
		for _, k := range x.kinds {
			ok = ok || k == kind
		}
		if r.set[x.flag] && !ok {
			return p, fmt.Errorf("--%s is not for %s", x.flag, kind)
		}
	}
	return p, p.Validate(nil)
}

// walkSamples is `walkstage walk --algorithm <sampler>`: every seed (every
// --frontier-size consecutive seeds for frontier) is the start of
// --walks-per-seed instances, sampled on the GPU when --engine finds one
// that takes the parameters (graphsample.SampleRangeOn), else on the CPU, and
// written as the stage writes a sampling request listing the same seeds
// with rng_seed = --rng-seed and instances_per_seed = --walks-per-seed.
func walkSamples(ctx context.Context, kind graphsample.SampleKind, f *sampleFlags, r sampleRun, stdout, stderr io.Writer) error {
	p, err := f.params(kind, r)
	if err != nil {
		return err
	}
	t0 := time.Now()
	g, err := graph.Load(r.graphPath)
	if err != nil {
		return err
	}
	defer g.Close()
	if r.name != "" {
		g.Name = r.name
	}
	if err := p.Validate(g); err != nil {
		return err
	}
	if f.edgeWeight && !g.Weighted() {
		return errors.New("--edge-weight: the graph has no edge weights")
	}
	starts, err := parseSeeds(g, r.seeds)
	if err != nil {
		return err
	}
	if per := p.SeedsPerInstance(); len(starts)%per != 0 {
		return fmt.Errorf("%d seeds are not whole sets of --frontier-size %d", len(starts), per)
	}
	fmt.Fprintf(stderr, "graph %s (version %s): %d vertices, %d edges, loaded in %s\n", g.Name, g.Version, g.NumVertices(),
		g.NumEdges(), time.Since(t0).Round(time.Millisecond))
	// Only a device engine is opened, the CPU samples without one; and
	// under auto none for a sampler that has no device kernels.
	engineName := r.engineName
	if engineName == "auto" && !gpu.DeviceSamples(p) {
		engineName = "cpu"
	}
	eng, err := engines.NewDevice(g, engineName, engines.Settings{Workers: r.workers, FusedTableBytes: -1}, r.log)
	if err != nil {
		return err
	}
	if eng != nil {
		defer eng.Close()
	}
	engine := graphsample.SampleEngine(eng, p)
	bucket, err := store.OpenBucket(ctx, r.out)
	if err != nil {
		return err
	}
	defer bucket.Close()
	id := r.batchID
	if id == "" {
		id = fmt.Sprintf("seed-%d", r.seed)
	}
	req := runRequest{Tool: "walkstage walk", Graph: g.Name, GraphVersion: g.Version, Output: output.KindSamples,
		Algorithm: sink.DescribeSample(p), Params: p, Seed: r.seed, PerSeed: r.instancesPerSeed, Engine: engine,
		Compression: string(r.compression), EdgeWeight: f.edgeWeight}
	fp := req.fingerprint(g, starts)
	guard, err := guardOutput(ctx, bucket, r.out, r.prefix, id, fp, r.replaceOutput)
	if err != nil {
		return err
	}
	stopProfile, err := cli.StartCPUProfile(r.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	stopTrace, err := cli.StartTrace(r.traceFile)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer stopTrace()
	n := p.NumInstances(len(starts))
	meta := sink.BatchMeta{BatchID: id, Seed: r.seed, Engine: engine, WalkstageVersion: r.version, Sample: &p,
		Instances: int64(n), SampleEdgeWeight: f.edgeWeight, Fingerprint: fp}
	w, err := sink.NewBatchWriter(ctx, bucket, r.prefix, meta, g, r.sinkOpts...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sampling %d instances (%s) with the %s engine into %s\n", n, p, engine, store.ObjectURL(r.out, w.Layout().Dir))
	if most := message.MaxSampleEdges(p); int64(n) > f.waveEdges/most {
		// The worst case is not held at once: waves bound the memory
		// (the stage also refuses a request whose worst case exceeds
		// WALKSTAGE_MAX_SAMPLED_EDGES).
		fmt.Fprintf(stderr, "notice: %d instances of up to %d edges each are sampled and written in waves of about %d edges, %d held at a time\n",
			n, most, f.waveEdges, sampleWavesHeld(p))
	}
	// Waves of instances bound the edges held, as in the stage. A wave is
	// written on its own goroutine while the next ones sample: column sets
	// take turns (free), so at most sampleWavesHeld waves are held and
	// their memory is reused from wave to wave.
	type sampledWave struct {
		lo    int
		seeds []int64
		cols  *graphsample.Columns
	}
	held := sampleWavesHeld(p)
	waves := make(chan sampledWave, held-2)
	free := make(chan *graphsample.Columns, held)
	for range held {
		free <- &graphsample.Columns{WithEdges: f.edgeWeight}
	}
	written := make(chan error, 1)
	writeFailed := make(chan struct{}) // closed when a write fails: stop sampling
	t1 := time.Now()
	go func() {
		var werr error
		for wv := range waves {
			if werr == nil {
				tw := time.Now()
				trace.WithRegion(ctx, "write wave", func() { werr = w.WriteSampleColumns(ctx, int64(wv.lo), wv.seeds, wv.cols) })
				if werr != nil {
					close(writeFailed)
				}
				r.log.Debug("sample wave handed to the writer", "first", wv.lo, "instances", wv.cols.Instances(), "edges", wv.cols.Len(),
					"at_seconds", tw.Sub(t1).Seconds(), "duration", time.Since(tw))
			}
			free <- wv.cols
		}
		written <- werr
	}()
	var sampled time.Duration
	var st graphsample.SampleStats
	var wave int
	var waveEdges int64
	for lo := 0; lo < n && err == nil; lo += wave {
		wave = message.SampleTailWave(p, f.waveEdges, n-lo, wave, waveEdges)
		var cols *graphsample.Columns
		tf := time.Now()
		select {
		case cols = <-free:
		case <-writeFailed:
			err = errWaveNotWritten
			continue
		}
		ts := time.Now()
		var ws graphsample.SampleStats
		trace.WithRegion(ctx, "sample wave", func() {
			ws, err = graphsample.SampleColumnsOn(ctx, eng, g, p, starts, lo, wave, r.workers, cols)
		})
		d := time.Since(ts)
		sampled += d
		st.Edges += ws.Edges
		waveEdges = ws.Edges
		th := time.Now()
		if err == nil {
			seeds := make([]int64, wave)
			for k := range seeds {
				// A graph with string ids takes dense seeds (sink.BatchWriter.WriteSamples).
				if s := starts[(lo+k)/p.InstancesPerSeed*p.SeedsPerInstance()]; g.HasStringIDs() {
					seeds[k] = int64(s)
				} else {
					seeds[k] = g.ExternalID(s)
				}
			}
			select {
			case waves <- sampledWave{lo, seeds, cols}:
			case <-writeFailed:
				err = errWaveNotWritten
			}
		}
		// A timeline of the command: when each wave sampled, and how long
		// the sampling waited for a column set and for the writer to take
		// the wave (the writer's lines say when it wrote which wave).
		r.log.Debug("sample wave", "first", lo, "instances", wave, "edges", ws.Edges, "at_seconds", ts.Sub(t1).Seconds(),
			"duration", d, "waited_for_columns", ts.Sub(tf), "waited_for_the_writer", time.Since(th))
	}
	close(waves)
	tl := time.Now()
	if werr := <-written; werr != nil && (err == nil || errors.Is(err, errWaveNotWritten)) {
		err = werr
	}
	r.log.Debug("sample waves written", "at_seconds", time.Since(t1).Seconds(), "after_the_last_sample", time.Since(tl))
	var m *output.Manifest
	if err == nil {
		err = guard.clear(ctx, stderr)
	}
	if err == nil {
		tc := time.Now()
		m, err = w.Commit(ctx)
		wt := w.SampleWriteTimes()
		r.log.Debug("sample output committed", "duration", time.Since(tc), "at_seconds", time.Since(t1).Seconds(),
			"encode_wait", wt.EncodeWait, "part_wait", wt.PartWait, "part_write", wt.PartWrite,
			"finish_drain", wt.FinishDrain, "finish_parts", wt.FinishParts)
	}
	if err != nil {
		if aerr := w.Abort(context.WithoutCancel(ctx)); aerr != nil {
			err = fmt.Errorf("%w (abort: %v)", err, aerr)
		}
		return err
	}
	total := time.Since(t1)
	if r.asJSON {
		return cli.PrintJSON(stdout, newWalkResult(r.out, w, m, total))
	}
	fmt.Fprintf(stdout, "wrote %d instances, %d sampled edges in %d part(s), %s, to %s\n", m.Instances, m.Edges, len(m.Files),
		cli.HumanBytes(m.Bytes), store.ObjectURL(r.out, w.Layout().SuccessKey()))
	fmt.Fprintf(stdout, "sample %s (%.1f M SEPS), sample+write %s (%.1f M edges/s)\n", sampled.Round(time.Millisecond),
		float64(st.Edges)/sampled.Seconds()/1e6, total.Round(time.Millisecond), float64(m.Edges)/total.Seconds()/1e6)
	return nil
}
