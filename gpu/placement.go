package gpu

import (
	"fmt"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// A placement plan puts a graph whose edge arrays do not fit the device
// (or a budget: WALKSTAGE_GPU_MEMORY_LIMIT, WithMemoryLimit,
// WithDeviceFraction) partly in pinned, mapped host memory that the kernels
// read in place over PCIe (kernels/placement.cuh). The offsets and the
// per-vertex relocated starts stay on the device; the edges (targets,
// weights, labels and alias entries, the same for the MetaPath label
// tables) of the highest-degree vertices go to the device, the rest to the
// host. A walk visits a vertex of an undirected graph in proportion to its
// degree, so a device share f of the edges serves about f of the steps
// whichever vertices hold it; taking the hubs first keeps the per-vertex
// padding and the number of host-resident vertices that a reservoir
// sampler scans edge by edge small.
//
// Relocation: vertex v's edges move from offsets[v] to place[v] in a
// relocated index space, device edges [0, split), host edges [split, split
// + host). Each relocated start keeps offsets[v] modulo 4 (up to three pad
// edges before it), so the reservoir samplers' aligned four-edge chunks hold
// the same columns and their floating-point sums run in the same order:
// walks are byte-identical to the all-device run.

// placeAlign is the relocated index alignment kept per vertex (the
// reservoir samplers' chunk of four edges) and chunkPad the pad after each
// side's last edge (a chunk read may run up to three edges past it; 16
// keeps every side 64-byte aligned).
const (
	placeAlign = 4
	chunkPad   = 16
)

// Placement describes a plan: what is where, for logs, metrics and
// `walkstage graph info`.
type Placement struct {
	Graph          string
	Vertices       int64
	Edges          int64 // the graph's edges
	EdgeBytes      int64 // bytes per edge over the placed arrays
	DeviceVertices int64 // vertices whose edges are on the device (degree > 0)
	DeviceEdges    int64 // of the graph's edges, on the device
	DeviceSlots    int64 // relocated device edge slots (edges + padding)
	HostSlots      int64
	Parts          []PlacedPart
}

// PlacedPart is one array of a plan and where it lives.
type PlacedPart struct {
	Name  string
	Bytes int64
	Host  bool // pinned, mapped host memory
}

// DeviceShare is the fraction of the graph's edges on the device.
func (p *Placement) DeviceShare() float64 {
	if p.Edges == 0 {
		return 1
	}
	return float64(p.DeviceEdges) / float64(p.Edges)
}

// Bytes sums the parts on one side.
func (p *Placement) Bytes(host bool) int64 {
	var n int64
	for _, x := range p.Parts {
		if x.Host == host {
			n += x.Bytes
		}
	}
	return n
}

// String is the plan on one line.
func (p *Placement) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "placement of graph %s: %.1f%% of %d edges on the device (%d of %d vertices), device %s, host %s:",
		p.Graph, 100*p.DeviceShare(), p.Edges, p.DeviceVertices, p.Vertices, sizeString(p.Bytes(false)), sizeString(p.Bytes(true)))
	p.writeParts(&b, "on the device", "on the host")
	return b.String()
}

// writeParts lists the parts, each followed by where it lives.
func (p *Placement) writeParts(b *strings.Builder, device, host string) {
	for i, x := range p.Parts {
		sep := ","
		if i == 0 {
			sep = ""
		}
		where := device
		if x.Host {
			where = host
		}
		fmt.Fprintf(b, "%s %s %s %s", sep, x.Name, sizeString(x.Bytes), where)
	}
}

// edgeBytes is the bytes per edge of the arrays a plan places: targets,
// and weights and alias entries for a weighted graph, labels for a
// labelled one.
func edgeBytes(s graphShape) int64 {
	n := int64(4)
	if s.weighted {
		n += 4 + 16
	}
	if s.labelled {
		n++
	}
	return n
}

// layout is a plan's relocation: place[v] is v's relocated start, [0,
// split) the device's slots and [split, split+host) the host's.
type layout struct {
	place []uint64
	split uint64
	host  uint64
	hot   int64 // vertices with edges on the device
	// deviceEdges counts the graph's edges on the device.
	deviceEdges int64
}

// planLayout relocates g's edges so that at most maxSlots relocated slots
// (edges plus alignment padding) are on the device, hubs first: vertices by
// decreasing degree, ties by id, as long as they fit with their worst-case
// padding. Within each side vertices keep their id order.
func planLayout(offsets []uint64, maxSlots int64) *layout {
	nv := len(offsets) - 1
	hot := pickHot(offsets, maxSlots, nil)
	l := packHot(offsets, hot)
	at := l.split
	for v := range nv {
		if d := offsets[v+1] - offsets[v]; !hot[v] && d > 0 {
			at += (offsets[v] - at) % placeAlign
			l.place[v] = at
			at += d
		}
	}
	l.host = at - l.split
	return l
}

// planHubLayout is a partitioned engine's layout (stripes_cuda.go): the
// hubs among the vertices that are not local (eligible), as many as fit
// maxSlots, packed on the device in [0, split); every other vertex stays
// where it is in the stripes, at split + offsets[v], so the second side of
// the placed kernels is the stripes themselves (biased by -split).
func planHubLayout(offsets []uint64, maxSlots int64, eligible func(v int) bool) *layout {
	nv := len(offsets) - 1
	hot := pickHot(offsets, maxSlots, eligible)
	l := packHot(offsets, hot)
	for v := range nv {
		if !hot[v] {
			l.place[v] = l.split + offsets[v]
		}
	}
	l.host = offsets[nv]
	return l
}

// pickHot marks the vertices whose edges go to the device: by decreasing
// degree, ties by id, among the eligible ones (nil: all), while they fit
// maxSlots with their worst-case padding. Degree histogram, then the
// lowest degree taken whole and how many vertices of the next one fit:
// O(V), no sort.
func pickHot(offsets []uint64, maxSlots int64, eligible func(v int) bool) []bool {
	nv := len(offsets) - 1
	deg := func(v int) int64 { return int64(offsets[v+1] - offsets[v]) }
	ok := func(v int) bool { return eligible == nil || eligible(v) }
	var maxDeg int64
	for v := range nv {
		if ok(v) {
			maxDeg = max(maxDeg, deg(v))
		}
	}
	count := make([]int64, maxDeg+1)
	for v := range nv {
		if ok(v) {
			count[deg(v)]++
		}
	}
	cut, partial := maxDeg+1, int64(0) // degrees >= cut are hot; plus partial vertices of degree cut-1
	var used int64
	for d := maxDeg; d >= 1; d-- {
		need := count[d] * (d + placeAlign - 1)
		if used+need <= maxSlots {
			used += need
			cut = d
			continue
		}
		partial = (maxSlots - used) / (d + placeAlign - 1)
		break
	}
	hot := make([]bool, nv)
	for v := range nv {
		d := deg(v)
		switch {
		case d == 0 || !ok(v):
		case d >= cut:
			hot[v] = true
		case d == cut-1 && partial > 0:
			hot[v] = true
			partial--
		}
	}
	return hot
}

// packHot places the hot vertices' edges in [0, split), in id order, each
// start keeping offsets[v] modulo placeAlign; split is rounded up to
// chunkPad. A vertex without edges keeps place 0: the kernels read no edge
// of it.
func packHot(offsets []uint64, hot []bool) *layout {
	l := &layout{place: make([]uint64, len(hot))}
	var at uint64
	for v, h := range hot {
		if h {
			at += (offsets[v] - at) % placeAlign
			l.place[v] = at
			d := offsets[v+1] - offsets[v]
			at += d
			l.hot++
			l.deviceEdges += int64(d)
		}
	}
	l.split = (at + chunkPad - 1) &^ (chunkPad - 1)
	return l
}

// hubRuns are the copies that fill a hub layout's device side from the
// stripes: runs of hot vertices whose edges are adjacent in both layouts,
// as (source edge, destination slot, edges).
func hubRuns(offsets []uint64, l *layout) [][3]uint64 {
	var runs [][3]uint64
	for v := range len(l.place) {
		d := offsets[v+1] - offsets[v]
		if d == 0 || l.place[v] >= l.split {
			continue
		}
		if n := len(runs); n > 0 {
			r := &runs[n-1]
			if r[0]+r[2] == offsets[v] && r[1]+r[2] == l.place[v] {
				r[2] += d
				continue
			}
		}
		runs = append(runs, [3]uint64{offsets[v], l.place[v], d})
	}
	return runs
}

// placeRecord mirrors the kernels' per-vertex record under a plan
// (kernels/placement.cuh: vertex_edges): the relocated start and the degree
// in one aligned 16-byte load.
type placeRecord struct {
	start uint64
	deg   uint32
	_     uint32
}

const placeRecordBytes = 16

// placeRecords are l's starts with g's degrees, on all cores.
func placeRecords(g *graph.Graph, l *layout) []placeRecord {
	r := make([]placeRecord, len(l.place))
	walk.ForVertexRanges(g, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			r[v] = placeRecord{start: l.place[v], deg: uint32(g.Offsets[v+1] - g.Offsets[v])}
		}
	})
	return r
}

// placementOf describes layout l of graph shape s. labelTables adds the
// MetaPath label tables, placed like the edges (labelsOnHost: all of them on
// the host).
func placementOf(s graphShape, l *layout, labelTables, labelsOnHost bool) *Placement {
	p := &Placement{Graph: s.name, Vertices: s.vertices, Edges: s.edges, EdgeBytes: edgeBytes(s),
		DeviceVertices: l.hot, DeviceEdges: l.deviceEdges, DeviceSlots: int64(l.split), HostSlots: int64(l.host)}
	add := func(name string, n int64, host bool) {
		if n > 0 {
			p.Parts = append(p.Parts, PlacedPart{name, n, host})
		}
	}
	dev, host := int64(l.split)+chunkPad, int64(l.host)+chunkPad
	add("graph.offsets", uploadBytes((s.vertices+1)*8), false)
	add("graph.place", uploadBytes(s.vertices*placeRecordBytes), false)
	for _, a := range placedArrays(s) {
		add(a.name, uploadBytes(dev*a.size), false)
		add(a.name+".host", host*a.size, true)
	}
	if labelTables {
		add("labels.offsets", allocBytes((s.vertices*s.labels+1)*8), false)
		arrays := []placedArray{{"labels.targets", 4}}
		if s.weighted {
			arrays = append(arrays, placedArray{"labels.alias", 16})
		}
		for _, a := range arrays {
			if labelsOnHost {
				add(a.name+".host", (dev+host)*a.size, true)
			} else {
				add(a.name, uploadBytes(dev*a.size), false)
				add(a.name+".host", host*a.size, true)
			}
		}
	}
	return p
}

type placedArray struct {
	name string
	size int64
}

// placedArrays are the edge arrays a plan places, with their element sizes.
func placedArrays(s graphShape) []placedArray {
	a := []placedArray{{"graph.targets", 4}}
	if s.weighted {
		a = append(a, placedArray{"graph.weights", 4})
	}
	if s.labelled {
		a = append(a, placedArray{"graph.labels", 1})
	}
	if s.weighted && s.edges > 0 {
		a = append(a, placedArray{"alias.table", 16})
	}
	return a
}

// DeviceBytesNeeded is the device memory the GPU engine needs to hold g and
// its tables whole (with the alias build's scratch), without batch slots:
// below it (plus the slots' share) the engine walks under a placement plan.
func DeviceBytesNeeded(g *graph.Graph) int64 { return graphPlan(shapeOf(g), 0).need() }

// PlanPlacement is the plan the engine makes for g with deviceBytes of
// device memory for the graph and its tables (after the batch slots), and
// at most fraction of its edges on the device (1: no cap). It needs no GPU:
// `walkstage graph info` prints it.
func PlanPlacement(g *graph.Graph, deviceBytes int64, fraction float64) (*Placement, error) {
	s := shapeOf(g)
	maxSlots, err := slotBudget(s, deviceBytes, fraction)
	if err != nil {
		return nil, err
	}
	return placementOf(s, planLayout(g.Offsets, maxSlots), false, false), nil
}

// slotBudget is the relocated edge slots that fit deviceBytes after the
// offsets and starts, capped at fraction of the edges.
func slotBudget(s graphShape, deviceBytes int64, fraction float64) (int64, error) {
	fixed := uploadBytes((s.vertices+1)*8) + uploadBytes(s.vertices*placeRecordBytes)
	if deviceBytes < fixed {
		return 0, &MemoryPlanError{What: "placement of graph " + s.name, Need: fixed, Free: deviceBytes,
			Parts: []MemoryPart{{Name: "graph.offsets", Bytes: uploadBytes((s.vertices + 1) * 8)},
				{Name: "graph.place", Bytes: uploadBytes(s.vertices * placeRecordBytes)}}}
	}
	// Each device array also carries chunkPad slots and 64-byte rounding.
	n := (deviceBytes-fixed)/edgeBytes(s) - chunkPad - 64
	if fraction < 1 {
		n = min(n, int64(fraction*float64(s.edges)))
	}
	return max(n, 0), nil
}

// aliasEntry mirrors ws::AliasEntry (16 bytes).
type aliasEntry struct {
	prob            float32
	keep, alt, alia uint32
}

// sideArrays are one side's relocated edge arrays (nil when the graph has
// none of that kind).
type sideArrays struct {
	targets []uint32
	weights []float32
	labels  []uint8
	alias   []aliasEntry
}

// fillPlaced writes g's edges, and their alias tables for a weighted
// graph, into the device and host arrays at their relocated places, on all
// cores. dev holds slots [0, split), host [split, split+host).
func fillPlaced(g *graph.Graph, l *layout, dev, host sideArrays) {
	// at is the side and index vertex v's relocated edges start at.
	at := func(v int) (sideArrays, uint64) {
		if p := l.place[v]; p >= l.split {
			return host, p - l.split
		}
		return dev, l.place[v]
	}
	walk.ForVertexRanges(g, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			a, z := g.Offsets[v], g.Offsets[v+1]
			if a == z {
				continue
			}
			side, p := at(v)
			copy(side.targets[p:], g.Targets[a:z])
			if side.weights != nil {
				copy(side.weights[p:], g.Weights[a:z])
			}
			if side.labels != nil {
				copy(side.labels[p:], g.Labels[a:z])
			}
		}
	})
	if dev.alias == nil && host.alias == nil {
		return
	}
	walk.ForAliasVertices(g, func(v int, _ uint64, adj []uint32, prob []float32, col []uint32) {
		side, p := at(v)
		for i := range adj {
			side.alias[p+uint64(i)] = aliasEntry{prob: prob[i], keep: adj[i], alt: adj[col[i]], alia: col[i]}
		}
	})
}

// HostReadReport is what the host side of a placement plan can deliver on
// this machine, measured by HostReadBench.
type HostReadReport struct {
	Rows []HostReadRow
	// CopyGBps is a sequential host-to-device copy from pinned memory.
	CopyGBps float64
}

// HostReadRow is one measurement: random reads of ReadBytes from a kernel
// over RegionBytes of Memory ("pinned": mapped cuMemHostAlloc memory, as a
// placement's host arrays; "device"), in chains of dependent reads as a
// walk's.
type HostReadRow struct {
	Memory      string
	RegionBytes int64
	ReadBytes   int
	ReadsPerSec float64
}
