package gpu

import (
	"fmt"
	"slices"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Partition streaming (issue 35, GPU side; C-SAW §V, GStream): a graph
// whose edge arrays do not fit the device budget is cut into vertex-range
// partitions; the densest partitions that fit stay resident on the device,
// the others are copied whole into one of two device buffers, in one
// sequential transfer on a copy stream, while the walkers of the partition
// in the other buffer are walked. Walkers (walk slot, current vertex, step)
// stay on the device, bucketed by the partition of their current vertex;
// the partition with the most waiting walkers is walked next (one already
// in a buffer counts double), and each walker takes every step it can
// inside the resident partitions and the streamed one before it waits
// again. Rows are written in place in the batch slot's result pool, so the
// batch's pack, copy and hand-over are those of an all-device batch, and
// each step draws the counters of walk/draws.go: the walks are those of the
// all-device engine and of walk/cpu, byte for byte.
//
// This file holds what needs no GPU: the mode, the plan and the choice of
// the next partition. stream_cuda.go runs it, kernels/stream.cuh walks it.

// StreamMode says when the engine streams partitions (WithStream).
type StreamMode int

// Off is the default (the zero value): streaming walks DeepWalk, PPR,
// Node2Vec (rejection) and MetaPath (label tables) only. Auto holds a
// placement plan beside the stream plan (streamchoice.go), which walks
// the rest, but at the cost of both plans' memory (the edges in two
// layouts), so it is asked for, not the default.
const (
	// StreamOff never streams: a graph that does not fit is placed
	// (placement.go).
	StreamOff StreamMode = iota
	// StreamAuto holds both a stream plan and a placement plan when the
	// graph's arrays do not fit the device (or WithMemoryLimit), or
	// under a WithDeviceFraction below 1, and walks each batch under the
	// faster by the cost model (streamchoice.go); what the stream engine
	// cannot walk walks under the placement plan.
	StreamAuto
	// StreamOn always streams: the device budget for the graph is the
	// memory limit's (less the batch slots' share), or WithDeviceFraction
	// of the streamed arrays' bytes, whichever is smaller.
	StreamOn
)

// ParseStreamMode reads auto, on or off.
func ParseStreamMode(s string) (StreamMode, error) {
	switch s {
	case "auto":
		return StreamAuto, nil
	case "on":
		return StreamOn, nil
	case "", "off":
		return StreamOff, nil
	}
	return 0, fmt.Errorf("gpu stream mode %q: want auto, on or off", s)
}

func (m StreamMode) String() string {
	switch m {
	case StreamOn:
		return "on"
	case StreamAuto:
		return "auto"
	}
	return "off"
}

// streamHostBufferBytes is the pinned host buffer a slot gets under
// streaming unless WithHostBufferBytes asked for more: every batch walks
// the streamed partitions again, so the bytes copied per step fall with
// the walkers in flight and a batch should hold a whole group of walks.
const streamHostBufferBytes = 8 << 30

// maxStreamParts bounds the partitions (kMaxStreamParts in
// kernels/stream.cuh: the bounds and bases are copied into shared memory).
const maxStreamParts = 1024

// streamPartCap caps a stream plan's default partition size (an eighth of
// the budget): smaller partitions leave more of the budget to the resident
// ones, larger ones cost fewer visits. On the H200 host (scale 22,
// weighted, four walks a vertex, half the graph's bytes on the device,
// docs/benchmarks/out-of-core.md) partitions of 47 MiB walked 1,120 M
// steps/s against 1,020 with the eighth's 90 MiB and 1,064 with 23 MiB;
// at a quarter the eighth (43 MiB) was within 3% of 23 MiB, and at a tenth
// (15 MiB) 27% faster than 9.4 MiB.
const streamPartCap = 48 << 20

// countRemaining is the index, in the stream counts' 32-bit words, of the
// 8-byte sum of the steps a batch's walkers have left (stream_count's
// remaining; even, so 8-byte aligned).
const countRemaining = maxStreamParts + 2

// streamEntryBytes is the bytes one edge takes in the streamed arrays: the
// target (4) of an unweighted graph; for a weighted graph the alias column
// {prob, keep, alt} (12; keep is the target itself, so uniform walks of a
// weighted graph read it too and one array serves both).
func streamEntryBytes(weighted bool) int64 {
	if weighted {
		return 12
	}
	return 4
}

// StreamPart is one partition of a stream plan: vertices [VLo, VHi) and
// their edges [ELo, EHi).
type StreamPart struct {
	VLo, VHi int64
	ELo, EHi int64
	Resident bool // on the device for the engine's lifetime
}

// StreamPlan is the engine's partitions under streaming: what is resident
// and what is copied in visit by visit.
type StreamPlan struct {
	Graph           string
	Vertices, Edges int64
	EntryBytes      int64 // per edge in the streamed arrays
	BudgetBytes     int64 // device bytes the plan may use for the graph
	BufferEdges     int64 // each of the two stream buffers' capacity
	// HostBytes is the pinned host memory the partitions are copied
	// from: every edge's entry, and for a weighted graph its bare target
	// too (uniform walks copy those, a third of the bytes).
	HostBytes int64
	Parts     []StreamPart
	// Disk, when set, says the partitions are read from the graph's file
	// (and an entries file) through a ring of pinned buffers instead of
	// pinned whole: the pinned arrays do not fit the host budget
	// (streamdisk.go). HostBytes is then the ring's.
	Disk *DiskStream
	// Labels is the label count of a graph whose MetaPath walks stream
	// (label tables: 1 to walk.MaxTableLabels labels), else 0. MetaPath
	// walks a second layout of the same partitions: each vertex's edges
	// regrouped by label (the label tables' order), built on the host at
	// the first MetaPath batch, and LabelBytes of segment ends on the
	// device for the plan's lifetime (streamLabelBytes).
	Labels     int
	LabelBytes int64
	// LabelsLeftOut is the bytes of segment ends a plan of a graph
	// MetaPath could stream left out because the budget does not hold
	// them beside the offsets and the two buffers (Labels is then 0 and
	// MetaPath is refused, naming them); 0 otherwise.
	LabelsLeftOut int64
}

// ResidentEdges counts the edges of the resident partitions.
func (p *StreamPlan) ResidentEdges() int64 {
	var n int64
	for _, x := range p.Parts {
		if x.Resident {
			n += x.EHi - x.ELo
		}
	}
	return n
}

// Streamed counts the partitions that are copied in when walked.
func (p *StreamPlan) Streamed() int {
	n := 0
	for _, x := range p.Parts {
		if !x.Resident {
			n++
		}
	}
	return n
}

// fixedBytes is the device memory a plan needs beside the edges: the
// offsets (every step reads its vertex's degree there, so they are always
// resident), the partition bounds and bases, and the label segment ends.
func streamFixedBytes(vertices, labelBytes int64) int64 {
	return uploadBytes((vertices+1)*8) + allocBytes((maxStreamParts+1)*4) + allocBytes(maxStreamParts*8) + labelBytes
}

// streamLabels is the label count a stream plan of s carries (Labels): a
// labelled graph's when MetaPath walks it on label tables
// (walk.MaxTableLabels at most, the rule walk.UsesLabelTables applies),
// else 0.
func streamLabels(s graphShape) int {
	if !s.labelled || s.labels < 1 || s.labels > walk.MaxTableLabels {
		return 0
	}
	return int(s.labels)
}

// streamLabelBytes is the device memory of the label segment ends: for
// each vertex the end of each of its first labels-1 segments, relative to
// its first edge (uint32: a degree fits 32 bits; the last segment ends at
// the degree). A MetaPath step reads its vertex's two ends, so they are
// resident like the offsets, a quarter of the offsets' bytes per label.
func streamLabelBytes(vertices int64, labels int) int64 {
	if labels < 2 {
		return 0
	}
	return uploadBytes(vertices * int64(labels-1) * 4)
}

// DeviceBytes is the device memory the plan takes: offsets, tables, the
// resident partitions and the two buffers.
func (p *StreamPlan) DeviceBytes() int64 {
	n := streamFixedBytes(p.Vertices, p.LabelBytes) + allocBytes(p.ResidentEdges()*p.EntryBytes)
	if p.Streamed() > 0 {
		n += 2 * allocBytes(p.BufferEdges*p.EntryBytes)
	}
	return n
}

// DeviceShare is the fraction of the edges resident on the device.
func (p *StreamPlan) DeviceShare() float64 {
	if p.Edges == 0 {
		return 1
	}
	return float64(p.ResidentEdges()) / float64(p.Edges)
}

// String is the plan on one line.
func (p *StreamPlan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stream plan of graph %s: %d partitions of at most %d edges (%s a buffer), %d resident (%.1f%% of %d edges), %d streamed through 2 buffers; device %s of a %s budget, host %s pinned",
		p.Graph, len(p.Parts), p.BufferEdges, sizeString(p.BufferEdges*p.EntryBytes), len(p.Parts)-p.Streamed(),
		100*p.DeviceShare(), p.Edges, p.Streamed(), sizeString(p.DeviceBytes()), sizeString(p.BudgetBytes),
		sizeString(p.HostBytes))
	if p.Labels > 0 {
		fmt.Fprintf(&b, "; metapath (%d labels) walks the partitions regrouped by label, a host copy built at its first batch, with %s of label segment ends on the device",
			p.Labels, sizeString(p.LabelBytes))
	}
	if p.LabelsLeftOut > 0 {
		fmt.Fprintf(&b, "; no metapath: the budget does not hold its %s of label segment ends", sizeString(p.LabelsLeftOut))
	}
	if d := p.Disk; d != nil {
		src := "the targets section of " + d.File
		if d.Entries {
			src += " (uniform walks) and an entries file of 12 bytes an edge built beside it at start (alias walks)"
		}
		fmt.Fprintf(&b, "; read from disk (the pinned arrays exceed half the %s host budget): %s, in preads into a ring of %d pinned buffers of %s; %s of pinned results: tasks and lengths of a batch's walks, their rows copied back in pieces through a window of %s",
			sizeString(d.HostBudget), src, d.RingBuffers, sizeString(d.BufferBytes), sizeString(d.ResultBytes), sizeString(d.WindowBytes))
	}
	return b.String()
}

// StreamBytesNeeded is the device memory the streamed arrays of g would
// take whole (offsets and entries): 100% of the graph for a stream plan's
// budget fractions.
func StreamBytesNeeded(g *graph.Graph) int64 {
	s := shapeOf(g)
	return uploadBytes((s.vertices+1)*8) + s.edges*streamEntryBytes(s.weighted)
}

// PlanStream is the stream plan the engine makes for g with deviceBytes
// of device memory for the graph (after the batch slots) and partitions of
// about partBytes (0: an eighth of the edges' budget, at most 48 MiB). It needs no GPU:
// `walkstage graph info --gpu-memory` prints it.
func PlanStream(g *graph.Graph, deviceBytes, partBytes int64) (*StreamPlan, error) {
	return planStream(shapeOf(g), g.Offsets, deviceBytes, partBytes)
}

// planStream is the plan of planStreamLabels with the graph's labels
// (streamLabels), or without them when the budget cannot hold their
// segment ends beside the offsets and the two buffers (a graph of few
// edges a vertex: the ends, 4 bytes a vertex a label, can outweigh its
// edges), so that DeepWalk and PPR stream wherever they did.
func planStream(s graphShape, offsets []uint64, budget, partBytes int64) (*StreamPlan, error) {
	l := streamLabels(s)
	if l == 0 {
		return planStreamLabels(s, offsets, budget, partBytes, 0)
	}
	if p, err := planStreamLabels(s, offsets, budget, partBytes, l); err == nil {
		return p, nil
	}
	p, err := planStreamLabels(s, offsets, budget, partBytes, 0)
	if err != nil {
		return nil, err
	}
	p.LabelsLeftOut = streamLabelBytes(s.vertices, l)
	return p, nil
}

// planStreamLabels cuts the vertices into contiguous ranges of at most
// BufferEdges edges (a vertex of more edges gets a partition of its own and
// the buffers grow to hold it), then makes resident, densest first (edges
// per vertex; ties by index), the partitions that fit the budget left after
// the offsets, the label segment ends of labels labels (0: none) and the
// two buffers.
func planStreamLabels(s graphShape, offsets []uint64, budget, partBytes int64, labels int) (*StreamPlan, error) {
	eb := streamEntryBytes(s.weighted)
	p := &StreamPlan{Graph: s.name, Vertices: s.vertices, Edges: s.edges, EntryBytes: eb, BudgetBytes: budget, HostBytes: s.edges * eb}
	if s.weighted {
		p.HostBytes += s.edges * 4
	}
	p.Labels = labels
	p.LabelBytes = streamLabelBytes(s.vertices, p.Labels)
	fixed := streamFixedBytes(s.vertices, p.LabelBytes)
	edgeBudget := budget - fixed
	if edgeBudget <= 0 {
		return nil, &MemoryPlanError{What: "stream plan of graph " + s.name, Need: fixed, Free: budget,
			Parts: []MemoryPart{{Name: "graph.offsets", Bytes: uploadBytes((s.vertices + 1) * 8)},
				{Name: "stream.labels", Bytes: p.LabelBytes},
				{Name: "stream.tables", Bytes: fixed - uploadBytes((s.vertices+1)*8) - p.LabelBytes}}}
	}
	if s.edges*eb <= edgeBudget {
		// Everything fits: one resident partition, no buffers.
		p.Parts = []StreamPart{{VLo: 0, VHi: s.vertices, ELo: 0, EHi: s.edges, Resident: true}}
		return p, nil
	}
	if partBytes <= 0 {
		partBytes = min(edgeBudget/8, streamPartCap)
	}
	part := max(partBytes/eb, 1)
	var maxDeg int64
	for v := range s.vertices {
		maxDeg = max(maxDeg, int64(offsets[v+1]-offsets[v]))
	}
	part = max(part, maxDeg)
	// Greedy cuts leave any two neighbouring partitions more than part
	// edges together, so twice the edges over the bound keeps the count
	// within maxStreamParts.
	part = max(part, (2*s.edges+maxStreamParts-1)/maxStreamParts)
	if need := 2 * allocBytes(part*eb); need > edgeBudget {
		return nil, fmt.Errorf("gpu: stream plan of graph %s: two buffers of %d edges (%s, the largest vertex has %d) need %s, the budget leaves %s after the offsets: give the device at least %s",
			s.name, part, sizeString(part*eb), maxDeg, sizeString(need), sizeString(edgeBudget), sizeString(fixed+need))
	}
	lo := int64(0)
	for lo < s.vertices {
		hi := lo + 1
		for hi < s.vertices && int64(offsets[hi+1]-offsets[lo]) <= part {
			hi++
		}
		p.Parts = append(p.Parts, StreamPart{VLo: lo, VHi: hi, ELo: int64(offsets[lo]), EHi: int64(offsets[hi])})
		lo = hi
	}
	if len(p.Parts) > maxStreamParts {
		// Greedy cuts may leave partitions less than half full; a rare
		// degree sequence could need a larger part than the bound above.
		return nil, fmt.Errorf("gpu: stream plan of graph %s: %d partitions, at most %d: raise the partition size", s.name, len(p.Parts), maxStreamParts)
	}
	p.BufferEdges = part
	left := edgeBudget - 2*allocBytes(part*eb)
	order := make([]int, len(p.Parts))
	for i := range order {
		order[i] = i
	}
	density := func(x StreamPart) float64 { return float64(x.EHi-x.ELo) / float64(x.VHi-x.VLo) }
	slices.SortStableFunc(order, func(a, b int) int {
		da, db := density(p.Parts[a]), density(p.Parts[b])
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return 0
	})
	for _, i := range order {
		n := (p.Parts[i].EHi - p.Parts[i].ELo) * eb
		if n <= left {
			p.Parts[i].Resident = true
			left -= n
		}
	}
	return p, nil
}

// chooseStreamed is the streamed partition to walk next: the one with the
// most waiting walkers (counts), one already in a buffer (loaded) counting
// double, since walking it copies nothing; ties go to the lower index; skip
// is left out (-1: none). -1 when no streamed partition has a walker.
func chooseStreamed(parts []StreamPart, counts []uint32, loaded [2]int, skip int) int {
	best, bestScore := -1, uint64(0)
	for i, x := range parts {
		if x.Resident || i == skip || counts[i] == 0 {
			continue
		}
		score := uint64(counts[i])
		if i == loaded[0] || i == loaded[1] {
			score *= 2
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// streamVictim is the buffer to load a partition into that neither buffer
// holds: an empty one, else the one whose partition has fewer waiting
// walkers, keeping the busier one for a later visit.
func streamVictim(counts []uint32, loaded [2]int) int {
	for b, p := range loaded {
		if p < 0 {
			return b
		}
	}
	if counts[loaded[1]] < counts[loaded[0]] {
		return 1
	}
	return 0
}

// StreamStats counts what streaming did in an engine's last Run.
type StreamStats struct {
	Batches        int64 // batches walked by copying partitions in
	InPlaceBatches int64 // batches that read the streamed share in place (streamCheaper)
	// Tails counts the copying batches whose last walkers read the
	// streamed partitions in place (streamTail) rather than wait for
	// more copies.
	Tails int64
	// PlacedBatches counts the batches walked under the placement plan
	// held beside the stream plan (StreamAuto: streamchoice.go), and
	// LastChoice says how the run's last batch was walked and why: the
	// plan and the cost model's estimates.
	PlacedBatches int64
	LastChoice    string
	Visits        int64 // kernel visits (one streamed partition, or the resident ones alone, each)
	// Walkers sums, over the visits, the walkers waiting in the
	// partitions a visit walks (the streamed one and the resident ones):
	// Walkers / Visits is C-SAW's walkers per partition visit, what a
	// copied partition is shared by.
	Walkers     int64
	Copies      int64 // partitions copied into a buffer
	BytesCopied int64
	Steps       int64 // steps of the run, for bytes per step
	// Under a disk plan (StreamPlan.Disk): partitions read from the
	// files, the bytes read (whole pages), the time in reads, and copies
	// served from a ring buffer without a read.
	Reads, BytesRead, RingHits int64
	ReadSeconds                float64
	Direct                     bool // reads bypass the page cache (O_DIRECT)
	// ResultPieces counts the pieces of batches whose walks came back
	// through a result window (DiskStream.WindowBytes) rather than whole.
	ResultPieces int64
	// ResidentSwaps counts the copies of the resident partitions in the
	// other layout (a MetaPath batch after other batches, or the other
	// way round); their bytes are in BytesCopied.
	ResidentSwaps int64
	// Scans counts the Node2Vec steps decided by the host's exact scan
	// after walk.MaxRejections rejected proposals (streamn2v.go).
	Scans int64
}

// streamSupported says whether a streaming engine with plan p walks a:
// DeepWalk and PPR on the uniform and alias samplers (a step needs only its
// vertex's partition), MetaPath on label tables (a step needs its
// vertex's partition in the label layout, the resident segment ends and
// the walk's step, which gives its place in the schema) when the plan
// carries labels (StreamPlan.Labels), and Node2Vec on the rejection
// sampler (a step's class test reads the previous vertex's partition, so
// a walker waits at whichever partition its phase needs, and the host
// scans after walk.MaxRejections: streamn2v.go).
func streamSupported(a walk.Algorithm, p *StreamPlan) error {
	fromDisk := p.Disk != nil
	pre := "the graph is streamed to the device in partitions (larger than the device budget)"
	way := "set the GPU stream mode off (gpu.WithStream(StreamOff), bench --gpu-stream off) to walk it under the placement plan"
	if fromDisk {
		pre = "the graph is streamed to the device in partitions read from its file (larger than the device budget, and its pinned host copy larger than half the host memory budget)"
		way = "the placement plan would read the graph in place from host memory it does not fit, so walk it with the CPU engine (out of core) or raise the host budget (WALKSTAGE_HOST_MEMORY_LIMIT)"
	}
	s := a.ResolvedStepper()
	switch {
	case a.Kind == walk.MetaPath && a.Stepper != walk.StepperAuto:
		return fmt.Errorf("%w: %s, which walks metapath on label tables only (the auto sampler; this request forces %s): leave the sampler auto, or %s",
			walk.ErrInvalidAlgorithm, pre, a.Stepper, way)
	case a.Kind == walk.MetaPath && p.LabelsLeftOut > 0:
		return fmt.Errorf("%w: %s, and the device budget (%s) does not hold metapath's %s of label segment ends beside the offsets and the stream buffers: raise the device budget (WALKSTAGE_GPU_MEMORY_LIMIT, --device-fraction), or %s",
			walk.ErrInvalidAlgorithm, pre, sizeString(p.BudgetBytes), sizeString(p.LabelsLeftOut), way)
	case a.Kind == walk.MetaPath && p.Labels == 0:
		return fmt.Errorf("%w: %s, which walks metapath on label tables only, for graphs of 1 to %d labels (this graph has more, or none); %s",
			walk.ErrInvalidAlgorithm, pre, walk.MaxTableLabels, way)
	case a.Kind == walk.MetaPath:
		return nil
	case a.Kind == walk.Node2Vec && s != walk.StepperRejection:
		return fmt.Errorf("%w: %s, which runs node2vec on the rejection sampler only (this request: %s); leave the sampler auto",
			walk.ErrInvalidAlgorithm, pre, s)
	case a.Kind == walk.Node2Vec:
		return nil
	case a.Kind != walk.DeepWalk && a.Kind != walk.PPR:
		return fmt.Errorf("%w: %s, which walks deepwalk, ppr, node2vec and metapath only (this request: %s); %s",
			walk.ErrInvalidAlgorithm, pre, a.Kind, way)
	case s != walk.StepperUniform && s != walk.StepperAlias:
		return fmt.Errorf("%w: %s, which runs the uniform and alias samplers only (this request: %s); leave the sampler auto",
			walk.ErrInvalidAlgorithm, pre, s)
	}
	return nil
}

// How a streaming engine walks one batch (streamBatchMode): copying the
// streamed partitions in, or reading them in place from the mapped host
// entries in one visit (what a placement plan does), whichever the cost
// model says is faster; the tests force either.
const (
	streamChoose  = iota // streamCheaper decides
	streamCopy           // always copy partitions in
	streamInPlace        // always read the streamed share in place
	streamPlaced         // always the placement plan, when the engine holds one (setupBoth)
	// streamCopyTail copies partitions in for one visit, then reads the
	// rest in place (streamTail's switch, forced). streamCopy never
	// switches; streamChoose switches when streamTail says so.
	streamCopyTail
)

// The cost model's constants, measured on the H200 host (scale 22,
// docs/benchmarks/out-of-core.md): a batch sweeps the streamed partitions
// about 0.8 times per step of its walks' length whatever its walker count
// (64, 60 and 49 sweeps for 80-step walks at 50, 25 and 10% resident);
// the copies run at about 50 GB/s; a kernel reads the host's edges in
// place at about 80 M steps/s for 12-byte entries and 450 M for 4-byte
// targets (the placement plan's host share at 50-10% on the device).
const (
	streamSweepsPerStep   = 0.8
	streamCopyBytesPerSec = 50e9
	inPlaceEntrySteps     = 80e6
	inPlaceTargetSteps    = 450e6
)

// streamCheaper says whether a batch of walks walks is faster copying the
// streamed partitions in (the sweeps go on until the batch's longest walk
// ends, each copying all of them, so the time follows st.Longest, not the
// walks) than reading them in place (a host read for each step that lands
// there, in proportion to the streamed share of the edges: st.Mean steps a
// walk). copyBytes is the bytes per edge a copy moves (4 for a uniform walk
// of a weighted graph's targets), readBytes the entries read in place (12
// for a weighted graph, else 4). With every walk at its full length (st
// both Length) this was the model of the first streaming engine; MetaPath
// walks that average 14 of 80 steps made it copy at 83 M steps/s where
// reading in place walked 196 M.
func streamCheaper(p *StreamPlan, walks int64, st walk.StepsEstimate, copyBytes, readBytes int64) bool {
	if p.Streamed() == 0 {
		return false
	}
	tCopy, tInPlace := streamCosts(p, walks, st, copyBytes, readBytes)
	return tCopy < tInPlace
}

// streamTail says whether the rest of a batch that copies partitions in
// is faster read in place, from its walkers' counts (counts), the buffers'
// partitions (loaded) and the steps its unfinished walkers have left
// (remaining, summed by the count kernel): reading in place costs those
// steps' share on the streamed partitions at the in-place rate (readBytes
// an edge there, reads a step: node2vecHostReads for Node2Vec); copying
// costs at least one copy of each streamed partition a walker waits at
// that no buffer holds (copyBytes an edge). The copy side is a lower bound
// (a late walker usually needs several more sweeps), so the switch comes
// late rather than early. The sweeps' tail is what it cuts: a batch copies
// every partition again for its last few walkers (on a scale-20 R-MAT
// graph with half the edges on the device, 39 sweeps of one walk a vertex
// became 26-31 in a simulation of the visits, under 1% of the steps read
// in place). The walks are the same either way (each step's draw is keyed
// by its walk and step).
func streamTail(p *StreamPlan, counts []uint32, loaded [2]int, remaining uint64, copyBytes, readBytes int64, reads float64) bool {
	if p.Streamed() == 0 || p.Edges == 0 {
		return false
	}
	var need int64
	for i, x := range p.Parts {
		if !x.Resident && counts[i] > 0 && i != loaded[0] && i != loaded[1] {
			need += x.EHi - x.ELo
		}
	}
	if need == 0 {
		return false // nothing left to copy: the buffers hold what the walkers wait at
	}
	streamed := float64(p.Edges-p.ResidentEdges()) / float64(p.Edges)
	tInPlace := float64(remaining) * streamed * reads / inPlaceRate(readBytes)
	tCopy := float64(need*copyBytes) / streamCopyBytesPerSec
	return tInPlace < tCopy
}

// stepsPilots keeps walk.PilotSteps per algorithm (its String) for a
// streaming engine's graph: the cost model asks for every batch, the
// pilot costs a few hundred thousand random reads.
type stepsPilots map[string]walk.StepsPilot

// estimate is walk.EstimateSteps of a batch of walks walks of a on g,
// the pilot walked once per algorithm.
func (c stepsPilots) estimate(g *graph.Graph, a walk.Algorithm, walks int64) walk.StepsEstimate {
	k := a.String()
	p, ok := c[k]
	if !ok {
		p = walk.PilotSteps(g, a)
		c[k] = p
	}
	return p.For(a, walks)
}

// noPart is the partition of a visit that walks no streamed partition
// (kNoPart in kernels/stream.cuh).
const noPart = 0xFFFFFFFF

// visitWalkers is the walkers a visit to partition cur walks, from the
// visit's counts of waiting walkers per partition: cur's and the resident
// partitions'; every waiting walker when cur is noPart (the resident
// partitions alone, or a batch that reads the streamed share in place,
// whose one visit moves them all).
func visitWalkers(parts []StreamPart, counts []uint32, cur uint64) uint64 {
	var n uint64
	for i, c := range counts[:len(parts)] {
		if cur == noPart || uint64(i) == cur || parts[i].Resident {
			n += uint64(c)
		}
	}
	return n
}
