package graphcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graph/edgelist"
	"github.com/walkstage/walkstage/graph/edgelist/export"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/ooc"
)

const graphUsage = `usage: walkstage graph <subcommand> [flags]

subcommands:
  generate  write a deterministic R-MAT (Graph500) graph
            walkstage graph generate --scale 20 --edge-factor 16 --seed 1 [--undirected] [--weighted] [--labels 5] [--times N] --out g.wsg
  import    convert a text or Parquet edge list
            walkstage graph import [--format text|parquet] [--undirected] [--weighted] [--labelled] [--self-loops]
                                   [--duplicates keep-first|sum|keep-all|error] [--dense-ids] [--id-type int64|string]
                                   [--time-column N|NAME] [--name NAME] IN --out g.wsg
  info      describe a graph file
            walkstage graph info [--verify] g.wsg
  export    write a graph back out as an edge list that graph import rebuilds (same version)
            walkstage graph export g.wsg [--format text|parquet] --out edges.txt
`

// Usage is the help of walkstage graph, its subcommands with their usage
// lines.
const Usage = graphUsage + graphCatalogUsage

// Commands are the subcommands of walkstage graph.
func Commands() map[string]cli.Command {
	return map[string]cli.Command{
		"generate": {Summary: "write a deterministic R-MAT (Graph500) graph", Run: graphGenerate},
		"import":   {Summary: "convert a text or Parquet edge list", Run: graphImport},
		"info": {Summary: "describe a graph file", Run: func(_ context.Context, args []string, stdout, stderr io.Writer) error {
			return graphInfo(args, stdout, stderr)
		}},
		"export":  {Summary: "write a graph back out as an edge list", Run: graphExport},
		"publish": {Summary: "upload a graph version to a catalog", Run: graphPublish},
		"list":    {Summary: "list a catalog's versions", Run: graphList},
		"prune":   {Summary: "remove all but the newest versions of a catalog", Run: graphPrune},
	}
}

func graphGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, "walkstage graph generate --scale 20 --edge-factor 16 --seed 1 [--undirected] [--weighted] [--labels 5] [--times N] --out g.wsg")
	scale := fs.Int("scale", 20, "2^scale vertices (1..31)")
	ef := fs.Int("edge-factor", 16, "generated edges per vertex, before self-loops and duplicates are dropped")
	seed := fs.Uint64("seed", 1, "seed: the same seed gives the same file, byte for byte")
	undirected := fs.Bool("undirected", false, "store every edge in both directions")
	weighted := fs.Bool("weighted", false, "add edge weights uniform in [1, 5)")
	cli.Alias(fs, "weights", "weighted")
	labels := fs.Int("labels", 0, "add edge labels uniform in [0, N) (0: none, at most 256)")
	times := fs.Int64("times", 0, "add edge times uniform in [0, N), a function of the seed and the edge (0: none; a timed graph for temporal walks)")
	name := fs.String("name", "", "graph name stored in the file (default rmat-s<scale>-e<edge-factor>)")
	out := fs.String("out", "", "output graph file (required)")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", pos[0])
	}
	if *out == "" {
		return cli.UsageErrorf(fs, "--out is required")
	}
	if *name == "" {
		*name = fmt.Sprintf("rmat-s%d-e%d", *scale, *ef)
	}
	t0 := time.Now()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: *scale, EdgeFactor: *ef, Seed: *seed,
		Undirected: *undirected, Weighted: *weighted, Labels: *labels, Name: *name, TimeSpan: *times})
	if err != nil {
		return err
	}
	genTime := time.Since(t0)
	t1 := time.Now()
	if err := graph.Save(*out, g); err != nil {
		return err
	}
	saveTime := time.Since(t1)
	switch {
	case rf.JSON:
		return cli.PrintJSON(stdout, graphResult{Graph: g.Name, Version: g.Version, Vertices: g.NumVertices(), Edges: g.NumEdges(),
			Weighted: g.Weighted(), Labelled: g.Labelled(), Out: *out, Bytes: fileSize(*out),
			DurationSeconds: (genTime + saveTime).Seconds()})
	case rf.Quiet:
		return nil
	}
	fmt.Fprintf(stdout, "generated %s: V=%d E=%d in %s, saved %s (%s) in %s, version %s\n", g.Name, g.NumVertices(), g.NumEdges(),
		genTime.Round(time.Millisecond), *out, cli.HumanBytes(fileSize(*out)), saveTime.Round(time.Millisecond), g.Version)
	return nil
}

func graphImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, "walkstage graph import [flags] IN --out g.wsg\n\nIN is a text edge list (\"src dst [weight] [label]\" lines, .gz allowed, - for stdin) or a Parquet file\nwith columns src, dst[, weight][, label]; --time-column adds a time column.")
	format := fs.String("format", "", "input format: text or parquet (default: parquet for *.parquet, else text)")
	undirected := fs.Bool("undirected", false, "add the reverse of every edge")
	weighted := fs.Bool("weighted", false, "read a weight column (text: third column; parquet: 'weight')")
	labelled := fs.Bool("labelled", false, "read a label column 0..255 (text: after the weight; parquet: 'label')")
	selfLoops := fs.Bool("self-loops", false, "keep self-loops (dropped by default)")
	dups := fs.String("duplicates", "keep-first", "repeated (src, dst), with --time-column at the same time: keep-first, sum (add weights), keep-all or error")
	dense := fs.Bool("dense-ids", false, "ids are already 0..V-1: store no id map (ids that never occur become isolated vertices)")
	idType := fs.String("id-type", "int64", "vertex ids: int64, or string (any text without separators, 1-1024 bytes of UTF-8; Parquet: string columns); dense ids follow the ids' order")
	timeColumn := fs.String("time-column", "", "read edge times (integers, e.g. Unix ms) from this column: text, its number counted from 1 (src 1, dst 2; \"src dst time\" is 3); parquet, its name. An edge at two times is two edges")
	name := fs.String("name", "", "graph name stored in the file (default: input base name)")
	out := fs.String("out", "", "output graph file (required)")
	tmpDir := fs.String("tmp-dir", "", "directory for sorted runs (default: the output's directory)")
	runEdges := fs.Int("run-edges", 0, "edges sorted in memory at a time (default 4Mi; peak memory is about 150 bytes per run edge plus 24 per vertex)")
	workers := fs.Int("workers", 0, "goroutines decoding the input and merging the sorted runs (default: one per core)")
	var rf cli.ResultFlags
	rf.Register(fs)
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the import to this file")
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.UsageErrorf(fs, "want exactly one input file (or - for stdin), got %d", len(pos))
	}
	if *out == "" {
		return cli.UsageErrorf(fs, "--out is required")
	}
	policy, err := graph.ParseDuplicatePolicy(*dups)
	if err != nil {
		return cli.UsageErrorf(fs, "--duplicates: %v", err)
	}
	if *idType != "int64" && *idType != "string" {
		return cli.UsageErrorf(fs, "--id-type %q: want int64 or string", *idType)
	}
	in := pos[0]
	if *format == "" {
		*format = "text"
		if strings.HasSuffix(strings.ToLower(in), ".parquet") {
			*format = "parquet"
		}
	}
	var timeCol int
	var timeName string
	if *timeColumn != "" {
		if *format == "parquet" {
			timeName = *timeColumn
		} else if timeCol, err = strconv.Atoi(*timeColumn); err != nil || timeCol < 1 {
			return cli.UsageErrorf(fs, "--time-column %q: a text edge list's time column is its number, counted from 1", *timeColumn)
		}
	}
	stopProfile, err := cli.StartCPUProfile(*cpuProfile)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer stopProfile()
	t0 := time.Now()
	o := edgelist.ImportOptions{Name: *name, Undirected: *undirected, Weighted: *weighted, Labelled: *labelled,
		SelfLoops: *selfLoops, Duplicates: policy, DenseIDs: *dense, StringIDs: *idType == "string", TimeColumn: timeCol,
		TimeColumnName: timeName, TempDir: *tmpDir, RunEdges: *runEdges, Workers: *workers, ProgressInterval: 3 * time.Second}
	if !rf.Quiet {
		o.Progress = func(p edgelist.Progress) {
			// The importer also reports at the end of each phase; a short
			// import needs no progress lines.
			if el := time.Since(t0); el >= o.ProgressInterval {
				printProgress(stderr, p, el)
			}
		}
	}
	var st *edgelist.ImportStats
	switch *format {
	case "text":
		st, err = edgelist.ImportText(ctx, in, *out, o)
	case "parquet":
		st, err = edgelist.ImportParquet(ctx, in, *out, o)
	default:
		return cli.UsageErrorf(fs, "--format %q: want text or parquet", *format)
	}
	if err != nil {
		return err
	}
	el := time.Since(t0)
	switch {
	case rf.JSON:
		name := *name
		if g, err := graph.LoadWith(*out, graph.LoadOptions{SkipValidate: true}); err == nil {
			name = g.Name // the importer's default when --name is not given
			g.Close()
		}
		return cli.PrintJSON(stdout, graphResult{Graph: name, Version: st.Version, Vertices: st.Vertices, Edges: st.Edges,
			Weighted: *weighted, Labelled: *labelled, Out: *out, Bytes: st.OutputBytes, DurationSeconds: el.Seconds(),
			Input: in, InputEdges: st.InputEdges, SelfLoopsDropped: st.SelfLoopsDropped, Duplicates: st.Duplicates,
			DuplicatePolicy: *dups, IDType: *idType, Timed: *timeColumn != ""})
	case rf.Quiet:
		return nil
	}
	fmt.Fprintf(stdout, "imported %s: %d input edges (%d self-loops dropped, %d duplicates %s) -> V=%d E=%d in %s (%.1f MB/s, %.2f M edges/s, %d sorted runs), wrote %s (%s), version %s\n",
		in, st.InputEdges, st.SelfLoopsDropped, st.Duplicates, dupVerb(policy), st.Vertices, st.Edges, el.Round(time.Millisecond),
		float64(st.Bytes)/el.Seconds()/1e6, float64(st.InputEdges)/el.Seconds()/1e6, st.Runs, *out, cli.HumanBytes(st.OutputBytes), st.Version)
	fmt.Fprintln(stderr, phaseLine(st.Phases))
	return nil
}

// phaseLine formats an import's phases as one line: seconds and M edges/s
// each, a phase that ran beside the one before it in brackets.
func phaseLine(ps []edgelist.PhaseTime) string {
	var b strings.Builder
	b.WriteString("import phases:")
	for i, p := range ps {
		if i > 0 {
			b.WriteString(",")
		}
		rate := ""
		if p.Edges > 0 && p.Duration >= 10*time.Millisecond { // a rate of a few ticks means nothing
			rate = fmt.Sprintf(" (%.1f M edges/s)", float64(p.Edges)/p.Duration.Seconds()/1e6)
		}
		f := " %s %.3f s%s"
		if p.Overlap {
			f = " [%s %.3f s%s]"
		}
		fmt.Fprintf(&b, f, p.Name, p.Duration.Seconds(), rate)
	}
	return b.String()
}

func dupVerb(p graph.DuplicatePolicy) string {
	switch p {
	case graph.DupSumWeights:
		return "summed"
	case graph.DupKeepAll:
		return "kept"
	}
	return "dropped"
}

func printProgress(w io.Writer, p edgelist.Progress, el time.Duration) {
	switch p.Phase {
	case "read":
		pct := ""
		if p.TotalBytes > 0 {
			pct = fmt.Sprintf(" of %s (%.0f%%)", cli.HumanBytes(p.TotalBytes), 100*float64(p.BytesRead)/float64(p.TotalBytes))
		}
		group := ""
		if p.RowGroups > 0 {
			group = fmt.Sprintf(", row group %d of %d", p.RowGroup+1, p.RowGroups)
		}
		fmt.Fprintf(w, "  %6s  read %.1fM edges, %s%s%s, %.1f MB/s\n", el.Round(time.Second), float64(p.EdgesRead)/1e6,
			cli.HumanBytes(p.BytesRead), pct, group, float64(p.BytesRead)/el.Seconds()/1e6)
	case "write":
		fmt.Fprintf(w, "  %6s  merged %.1fM of %.1fM directed edges into the graph file\n", el.Round(time.Second),
			float64(p.EdgesOut)/1e6, float64(p.EdgesTotal)/1e6)
	}
}

func graphInfo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, "walkstage graph info [--verify] [--gpu-memory BYTES] [--host-memory BYTES] g.wsg")
	verify := fs.Bool("verify", false, "also verify the content checksum (reads every byte)")
	gpuMemory := fs.Int64("gpu-memory", 0, "also print the GPU engine's placement plan for this much device memory for the graph (WALKSTAGE_GPU_MEMORY_LIMIT less the batch slots' quarter)")
	hostMemory := fs.Int64("host-memory", 0, "also print the out-of-core CPU engine's partition plan for this host memory budget in bytes (WALKSTAGE_HOST_MEMORY_LIMIT); with --gpu-memory, the GPU stream plan reads from disk when its pinned host copy exceeds half of it")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.UsageErrorf(fs, "want exactly one graph file, got %d", len(pos))
	}
	path := pos[0]
	t0 := time.Now()
	g, err := graph.LoadWith(path, graph.LoadOptions{VerifyChecksum: *verify})
	if err != nil {
		return err
	}
	defer g.Close()
	load := time.Since(t0)
	n := g.NumVertices()
	degs := make([]uint32, n)
	dead := 0
	for v := range degs {
		degs[v] = uint32(g.Degree(uint32(v)))
		if degs[v] == 0 {
			dead++
		}
	}
	maxDeg, maxV := g.MaxDegree()
	slices.Sort(degs)
	q := func(p float64) uint32 {
		if n == 0 {
			return 0
		}
		return degs[min(n-1, int(p*float64(n)))]
	}
	if rf.JSON {
		ts := cpu.EstimateTables(g)
		info := graphInfoResult{Graph: g.Name, Version: g.Version, File: path, FileBytes: fileSize(path), Vertices: n,
			Edges: g.NumEdges(), Weighted: g.Weighted(), Labelled: g.Labelled(), Labels: g.NumLabels, ExternalIDs: g.IDs != nil || g.HasStringIDs(),
			IDType: idType(g), Timed: g.Timed(),
			DeadEnds: dead, MemoryBytes: g.MemoryBytes(), CPUFusedBytes: ts.Fused, CPUPackedBytes: ts.Packed,
			CPUFenceBytes: ts.Fences, GPUBytes: gpu.DeviceBytesNeeded(g), LoadSeconds: load.Seconds()}
		if n > 0 {
			info.MaxDegree, info.MedianDegree, info.P99Degree = maxDeg, q(0.5), q(0.99)
		}
		if g.Timed() && g.NumEdges() > 0 {
			// Strings: times may be 64-bit, beyond what JSON numbers
			// carry exactly in JavaScript.
			lo, hi := g.TimeRange()
			info.TimeMin, info.TimeMax = strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)
		}
		return cli.PrintJSON(stdout, info)
	}
	if rf.Quiet {
		return nil
	}
	tw := func(k, f string, a ...any) { fmt.Fprintf(stdout, "%-14s "+f+"\n", append([]any{k + ":"}, a...)...) }
	tw("file", "%s (%s)", path, cli.HumanBytes(fileSize(path)))
	tw("name", "%s", g.Name)
	tw("version", "%s", g.Version)
	tw("vertices", "%d", n)
	tw("edges", "%d (directed, as stored)", g.NumEdges())
	tw("weighted", "%v", g.Weighted())
	if g.Labelled() {
		tw("labelled", "true, %d labels", g.NumLabels)
	} else {
		tw("labelled", "false")
	}
	switch {
	case g.HasStringIDs():
		tw("id map", "string ids (%d entries, %s)", n, cli.HumanBytes(int64(len(g.StrBytes))))
	case g.IDs != nil:
		tw("id map", "external 64-bit ids (%d entries)", len(g.IDs))
	default:
		tw("id map", "none (external id = dense id)")
	}
	if g.Timed() {
		if g.NumEdges() > 0 {
			lo, hi := g.TimeRange()
			tw("timed", "true, times %d .. %d", lo, hi)
		} else {
			tw("timed", "true, no edges")
		}
	} else {
		tw("timed", "false")
	}
	mean := 0.0
	if n > 0 {
		mean = float64(g.NumEdges()) / float64(n)
	}
	if n > 0 {
		tw("out-degree", "min %d  mean %.2f  median %d  p99 %d  max %d", degs[0], mean, q(0.5), q(0.99), maxDeg)
		tw("max degree at", "vertex %d (external id %s)", maxV, externalName(g, maxV))
	}
	tw("dead ends", "%d vertices without out-edges (%.2f%%)", dead, 100*float64(dead)/float64(max(n, 1)))
	tw("memory", "%s (%d bytes, mapped from the file)", cli.HumanBytes(g.MemoryBytes()), g.MemoryBytes())
	// What the CPU engine adds, built on first use (the alias table at
	// stage start): for sizing a deployment's memory limit.
	ts := cpu.EstimateTables(g)
	if ts.Fused > 0 {
		tw("cpu alias", "%s fused (when within WALKSTAGE_CPU_FUSED_TABLE_BYTES, by default a quarter of memory: %s here), else %s packed",
			cli.HumanBytes(ts.Fused), cli.HumanBytes(cpu.DefaultFusedTableLimit()), cli.HumanBytes(ts.Packed))
	} else if ts.Packed > 0 {
		tw("cpu alias", "%s packed", cli.HumanBytes(ts.Packed))
	}
	tw("cpu node2vec", "%s fence index", cli.HumanBytes(ts.Fences))
	tw("gpu memory", "%s for the graph and its tables on the device (offsets, targets, weights, labels, alias table, build scratch)",
		cli.HumanBytes(gpu.DeviceBytesNeeded(g)))
	if *hostMemory > 0 {
		printHostPlan(tw, g, path, *hostMemory)
	}
	if *gpuMemory > 0 {
		if *gpuMemory >= gpu.DeviceBytesNeeded(g) {
			tw("gpu placement", "the whole graph fits %s", cli.HumanBytes(*gpuMemory))
		} else {
			// The stream plan is what WALKSTAGE_GPU_STREAM=on gets (auto:
			// it and a placement plan, each with half);
			// the placement plan, the default's (off), is printed too.
			// With --host-memory, a plan whose pinned host copy exceeds
			// half of it reads the partitions from the file.
			if p, err := gpu.PlanStreamHost(g, *gpuMemory, *hostMemory); err != nil {
				tw("gpu stream", "%v", err)
			} else {
				tw("gpu stream", "%s (with WALKSTAGE_GPU_STREAM=on; under auto the stream plan gets half of the device's share for the graph and a placement plan the rest, and each batch walks under the faster; bytes per step streamed are about the streamed edges' bytes over the walkers in flight)", p)
			}
			if p, err := gpu.PlanPlacement(g, *gpuMemory, 1); err != nil {
				tw("gpu placement", "%v", err)
			} else {
				tw("gpu placement", "%s (with the stream mode off: host edges read in place)", p)
			}
		}
	}
	if ts.Labels > 0 {
		tw("cpu metapath", "%s label tables", cli.HumanBytes(ts.Labels))
	}
	check := "structure"
	if *verify {
		check += " and checksum"
	}
	tw("load time", "%s (%s verified)", load.Round(time.Microsecond), check)
	return nil
}

func graphExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, `walkstage graph export g.wsg [--format text|parquet] --out PATH

Writes every stored directed edge as a row of external ids (integers or
strings), with the weight, label and time when the graph has them: a text
edge list (the format graph import reads, with '#' header lines) or a
Parquet file (columns src, dst, weight, label, time). A vertex without any edge is written as one self-loop row, which
graph import drops while keeping the vertex. The header (text) or the
key-value metadata (Parquet) gives the graph import command that rebuilds
the graph with the same version.`)
	format := fs.String("format", "", "text or parquet (default: parquet for *.parquet, else text)")
	out := fs.String("out", "", "output file (required)")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return cli.UsageErrorf(fs, "want exactly one graph file, got %d", len(pos))
	}
	if *out == "" {
		return cli.UsageErrorf(fs, "--out is required")
	}
	if *format == "" {
		*format = "text"
		if strings.HasSuffix(strings.ToLower(*out), ".parquet") {
			*format = "parquet"
		}
	}
	f, err := export.ParseFormat(*format)
	if err != nil {
		return cli.UsageErrorf(fs, "--format: %v", err)
	}
	t0 := time.Now()
	g, err := graph.Load(pos[0])
	if err != nil {
		return err
	}
	defer g.Close()
	st, err := export.WriteFile(ctx, g, *out, f)
	if err != nil {
		return err
	}
	el := time.Since(t0)
	w, notes := rf.Writers(stdout, stderr)
	fmt.Fprintf(w, "exported %s (version %s): %d edges", g.Name, g.Version, st.Edges)
	if st.MarkerRows > 0 {
		fmt.Fprintf(w, " and %d self-loop rows for vertices without edges", st.MarkerRows)
	}
	fmt.Fprintf(w, " to %s (%s) in %s\nrebuild with: walkstage graph import --format %s %s --name %q %s --out %s.wsg\n",
		*out, cli.HumanBytes(fileSize(*out)), el.Round(time.Millisecond), f, strings.Join(st.ImportFlags, " "), g.Name, *out, g.Name)
	if !st.Exact {
		fmt.Fprintf(notes, "warning: importing this export will not give version %s: %s\n", g.Version, st.Inexact)
	}
	return rf.Print(stdout, exportResult{Graph: g.Name, Version: g.Version, Out: *out, Format: string(f), Bytes: fileSize(*out),
		Edges: st.Edges, MarkerRows: st.MarkerRows, ImportFlags: st.ImportFlags, Exact: st.Exact, Inexact: st.Inexact,
		DurationSeconds: el.Seconds()})
}

// exportResult is graph export's --json line: the keys of graphResult
// where they overlap, and what rebuilds the graph (import_flags, exact:
// whether importing with them gives graph_version again, inexact: why
// not).
type exportResult struct {
	Graph           string   `json:"graph"`
	Version         string   `json:"graph_version"`
	Out             string   `json:"out"`
	Format          string   `json:"format"`
	Bytes           int64    `json:"bytes"`
	Edges           int64    `json:"edges"`
	MarkerRows      int64    `json:"marker_rows"`
	ImportFlags     []string `json:"import_flags"`
	Exact           bool     `json:"exact"`
	Inexact         string   `json:"inexact,omitempty"`
	DurationSeconds float64  `json:"duration_seconds"`
}

// idType names a graph's external ids as graph import's --id-type does
// (dense ids are int64 ids equal to the dense ones).
func idType(g *graph.Graph) string {
	if g.HasStringIDs() {
		return "string"
	}
	return "int64"
}

// externalName is vertex v's external id for a message: a string id
// quoted.
func externalName(g *graph.Graph, v uint32) string {
	if g.HasStringIDs() {
		return strconv.Quote(g.ExternalString(v))
	}
	return strconv.FormatInt(g.ExternalID(v), 10)
}

func fileSize(path string) int64 {
	st, err := os.Stat(filepath.Clean(path))
	if err != nil {
		return 0
	}
	return st.Size()
}

// graphInfoResult is graph info's --json line; the keys are those of
// graph generate and import's (graphResult) where they overlap.
type graphInfoResult struct {
	Graph          string  `json:"graph,omitempty"`
	Version        string  `json:"graph_version"`
	File           string  `json:"file"`
	FileBytes      int64   `json:"file_bytes"`
	Vertices       int     `json:"vertices"`
	Edges          int64   `json:"edges"`
	Weighted       bool    `json:"weighted"`
	Labelled       bool    `json:"labelled"`
	Labels         int     `json:"labels"`
	ExternalIDs    bool    `json:"external_ids"`
	IDType         string  `json:"id_type"`
	Timed          bool    `json:"timed"`
	TimeMin        string  `json:"time_min,omitempty"`
	TimeMax        string  `json:"time_max,omitempty"`
	MaxDegree      int     `json:"max_degree"`
	MedianDegree   uint32  `json:"median_degree"`
	P99Degree      uint32  `json:"p99_degree"`
	DeadEnds       int     `json:"dead_ends"`
	MemoryBytes    int64   `json:"memory_bytes"`
	CPUFusedBytes  int64   `json:"cpu_fused_table_bytes"`
	CPUPackedBytes int64   `json:"cpu_packed_table_bytes"`
	CPUFenceBytes  int64   `json:"cpu_fence_index_bytes"`
	GPUBytes       int64   `json:"gpu_bytes"`
	LoadSeconds    float64 `json:"load_seconds"`
}

// graphResult is the --json line of graph generate and graph import; the
// keys are those of graph info and of the request and event fields
// (docs/reference/vocabulary.md).
type graphResult struct {
	Graph            string  `json:"graph,omitempty"`
	Version          string  `json:"graph_version"`
	Vertices         int     `json:"vertices"`
	Edges            int64   `json:"edges"`
	Weighted         bool    `json:"weighted"`
	Labelled         bool    `json:"labelled"`
	Out              string  `json:"out"`
	Bytes            int64   `json:"bytes"`
	DurationSeconds  float64 `json:"duration_seconds"`
	Input            string  `json:"input,omitempty"`
	InputEdges       int64   `json:"input_edges,omitempty"`
	SelfLoopsDropped int64   `json:"self_loops_dropped,omitempty"`
	Duplicates       int64   `json:"duplicates,omitempty"`
	DuplicatePolicy  string  `json:"duplicate_policy,omitempty"`
	IDType           string  `json:"id_type,omitempty"`
	Timed            bool    `json:"timed,omitempty"`
}

// printHostPlan prints the out-of-core CPU engine's plan for budget bytes of
// host memory (walk/ooc), or that the graph fits in memory.
func printHostPlan(tw func(k, f string, a ...any), g *graph.Graph, path string, budget int64) {
	need := ooc.InMemoryBytes(g)
	if need <= budget {
		tw("host plan", "in memory: the CPU engine needs %s of the %s budget", cli.HumanBytes(need), cli.HumanBytes(budget))
		return
	}
	p, err := ooc.PlanFor(context.Background(), g, path, budget, 0, 0)
	if err != nil {
		tw("host plan", "%v", err)
		return
	}
	tw("host plan", "out of core: the CPU engine needs %s, above the %s budget; %d partitions of at most %s (%d B/vertex, %d B/edge loaded), %d held at once (%s), %s for walkers",
		cli.HumanBytes(need), cli.HumanBytes(budget), len(p.Partitions), cli.HumanBytes(p.PartitionBytes), p.BytesPerVertex, p.BytesPerEdge,
		p.Slots, cli.HumanBytes(p.PoolBytes), cli.HumanBytes(p.WalkerBytes))
	for i, q := range p.Partitions {
		if i == 8 && len(p.Partitions) > 10 {
			tw("  ...", "%d more", len(p.Partitions)-9)
			i, q = len(p.Partitions)-1, p.Partitions[len(p.Partitions)-1]
			tw(fmt.Sprintf("  part %d", i), "vertices [%d, %d) edges %d, %s", q.Lo, q.Hi, q.Edges(), cli.HumanBytes(q.Bytes))
			break
		}
		tw(fmt.Sprintf("  part %d", i), "vertices [%d, %d) edges %d, %s", q.Lo, q.Hi, q.Edges(), cli.HumanBytes(q.Bytes))
	}
}
