package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/directio"
	"github.com/walkstage/walkstage/walk"
)

// Streaming from disk (issue 35, "beyond host memory" on the GPU): when the
// pinned host copy of the streamed arrays (StreamPlan.HostBytes) does not
// fit the host memory budget (WithHostMemoryLimit), the partitions are
// read from files instead: large sequential preads, through O_DIRECT where
// the filesystem takes it, into a bounded ring of pinned host buffers, and
// copied to the device from there on the copy stream while the previous
// partition is walked. A vertex-range partition is a contiguous range of
// every CSR array, so each read is one range:
//
//   - uniform walks (and every walk of an unweighted graph) read the
//     targets section of the .wsg itself, 4 bytes an edge;
//   - alias walks of a weighted graph read 12-byte {prob, keep, alt}
//     entries from an entries file built once when the engine starts
//     (buildEntriesFile: the .wsg holds weights, and building a
//     partition's alias tables on each of its tens of loads would cost
//     ten times the read). It is a scratch file, unlinked once open, so
//     nothing is left behind and a changed graph can never meet stale
//     entries.
//
// The ring also caches: a partition still in a ring buffer is copied from
// there without a read (the busiest are kept: ringVictim). The walks are
// those of the pinned-host path byte for byte: the partitions, the order
// they are visited in and the kernels are the same; only where a
// partition's bytes come from differs.
//
// This file holds what needs no GPU: the reader, the entries file, the
// ring's sizing and victim choice. stream_cuda.go runs it.

// Host budget shares under disk streaming: the ring of pinned buffers
// takes what caches every streamed partition, at most half; the batch
// slot's pinned result share the rest of three quarters (the tasks and
// lengths of a batch's walks and the result window their rows come back
// through: every batch sweeps the streamed partitions again, so a batch
// should hold as many walks as the device does); the last quarter is the
// Go heap (the chunks in flight: a few window pieces), the mapped offsets
// and the page cache's share.
const (
	diskRingShare    = 0.5
	diskPinnedTotal  = 0.75
	minRingBuffers   = 3 // one copying, one read ahead, one cached
	maxRingBuffers   = 64
	diskPinnedShare  = 0.5 // the pinned path needs HostBytes within this share of the budget
	entriesFileBytes = 12
)

// openDiskReader opens one file the partitions are read from
// (directio.File: large parallel preads, through O_DIRECT where the
// filesystem takes it).
func openDiskReader(path string, direct bool) (*directio.File, error) {
	f, err := directio.Open(path, direct)
	if err != nil {
		return nil, fmt.Errorf("gpu: stream from disk: %w", err)
	}
	return f, nil
}

// fileSections is where the CSR sections of a graph's file lie (0 for one
// the file does not hold).
type fileSections struct{ targets, weights, labels int64 }

// graphSections is where the targets, weights and labels sections of g's
// file lie (graph.FileLayout, as Save lays the file out), checked against
// the file's size so a file that is not the one g was loaded from is
// refused.
func graphSections(g *graph.Graph) (fileSections, error) {
	path := g.File()
	if path == "" {
		return fileSections{}, errors.New("gpu: stream from disk: the graph was not loaded from a file")
	}
	l, err := graph.NewFileLayout(graph.FileShape{
		Vertices: uint64(g.NumVertices()), Edges: uint64(g.NumEdges()), NameBytes: len(g.Name),
		Weighted: g.Weighted(), Labelled: g.Labelled(), External: g.IDs != nil, Timed: g.Timed(),
		StringIDs: g.StrOffsets != nil, StringBytes: uint64(len(g.StrBytes)),
	})
	if err != nil {
		return fileSections{}, fmt.Errorf("gpu: stream from disk: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fileSections{}, fmt.Errorf("gpu: stream from disk: %w", err)
	}
	if uint64(st.Size()) != l.Size() {
		return fileSections{}, fmt.Errorf("gpu: stream from disk: %w: %s is %d bytes, its header's layout says %d", graph.ErrFormat, path, st.Size(), l.Size())
	}
	t, _ := l.Section(graph.SectionTargets)
	w, _ := l.Section(graph.SectionWeights)
	lb, _ := l.Section(graph.SectionLabels)
	return fileSections{targets: int64(t), weights: int64(w), labels: int64(lb)}, nil
}

// putStreamEntries writes a vertex's 12-byte alias entries {prob, keep,
// alt} (as uint32 words) into dst, 3 words an edge: the layout
// kernels/stream.cuh reads, shared by the pinned path and the entries file.
func putStreamEntries(dst []uint32, adj []uint32, prob []float32, col []uint32) {
	for i := range adj {
		dst[3*i], dst[3*i+1], dst[3*i+2] = math.Float32bits(prob[i]), adj[i], adj[col[i]]
	}
}

// entriesChunkEdges bounds the edges one worker of buildEntriesFile holds:
// targets, weights and entries, 20 bytes an edge (80 MiB).
const entriesChunkEdges = 4 << 20

// buildEntriesFile writes the 12-byte alias entries of every edge of the
// weighted graph g, edge by edge, into a new file in dir (the system's
// temporary directory where dir refuses it), reading the targets and
// weights from g's file with preads in vertex-range chunks on all cores (never
// through g's mapping, which would fault the whole graph into memory), and
// returns the file, already unlinked, and the bytes it read. With labels
// it writes the label layout instead (streamlabels.go: 12 bytes an edge
// for a weighted graph, 4 for an unweighted one), reading the labels too,
// and returns the segment ends (labels-1 a vertex; nil for one label).
func buildEntriesFile(ctx context.Context, g *graph.Graph, dir string, labels int) (*os.File, []uint32, int64, error) {
	sec, err := graphSections(g)
	if err != nil {
		return nil, nil, 0, err
	}
	name := "stream-entries"
	if labels > 0 {
		name = "stream-label-entries"
	}
	f, err := os.CreateTemp(dir, ".walkstage-"+name+"-*")
	if err != nil {
		var err2 error
		if f, err2 = os.CreateTemp("", "walkstage-"+name+"-*"); err2 != nil {
			return nil, nil, 0, fmt.Errorf("gpu: %s file: in %s: %v; in the temporary directory: %w", name, dir, err, err2)
		}
	}
	os.Remove(f.Name())
	src, err := os.Open(g.File())
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("gpu: %s file: %w", name, err)
	}
	defer src.Close()
	weighted := g.Weighted()
	per := int64(3) // words an edge
	if labels > 0 && !weighted {
		per = 1
	}
	var ends []uint32
	k := max(labels-1, 0)
	if k > 0 {
		ends = make([]uint32, g.NumVertices()*k)
	}
	// Chunks of whole vertices of about entriesChunkEdges edges (a
	// vertex of more edges gets a chunk of its own).
	type chunk struct{ lo, hi int }
	var chunks []chunk
	n := g.NumVertices()
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && g.Offsets[hi+1]-g.Offsets[lo] <= entriesChunkEdges {
			hi++
		}
		chunks = append(chunks, chunk{lo, hi})
		lo = hi
	}
	var next, read atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, min(runtime.GOMAXPROCS(0), len(chunks)))
	for w := range errs {
		wg.Go(func() {
			var adj []uint32
			var wts []float32
			var lab []uint8
			var ent []uint32
			var prob []float32
			var col []uint32
			var scaled []float64
			var small, large []uint32
			var sc labelScratch
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) || errs[w] != nil {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[w] = err
					return
				}
				c := chunks[i]
				e0, e1 := int64(g.Offsets[c.lo]), int64(g.Offsets[c.hi])
				m := int(e1 - e0)
				if m == 0 {
					continue
				}
				adj, ent = grow(adj, m), grow(ent, int(per)*m)
				if _, err := src.ReadAt(bytesOf(adj), sec.targets+4*e0); err != nil {
					errs[w] = fmt.Errorf("gpu: %s file: read targets: %w", name, err)
					return
				}
				read.Add(4 * int64(m))
				if weighted {
					wts = grow(wts, m)
					if _, err := src.ReadAt(bytesOf(wts), sec.weights+4*e0); err != nil {
						errs[w] = fmt.Errorf("gpu: %s file: read weights: %w", name, err)
						return
					}
					read.Add(4 * int64(m))
				}
				if labels > 0 {
					lab = grow(lab, m)
					if _, err := src.ReadAt(lab, sec.labels+e0); err != nil {
						errs[w] = fmt.Errorf("gpu: %s file: read labels: %w", name, err)
						return
					}
					read.Add(int64(m))
				}
				for v := c.lo; v < c.hi; v++ {
					a, b := int(int64(g.Offsets[v])-e0), int(int64(g.Offsets[v+1])-e0)
					if labels > 0 {
						var vw []float32
						if weighted {
							vw = wts[a:b]
						}
						putLabelEntries(ent[int(per)*a:int(per)*b], ends[v*k:(v+1)*k], adj[a:b], vw, lab[a:b], labels, &sc)
						continue
					}
					if a == b {
						continue
					}
					prob, col = grow(prob, b-a), grow(col, b-a)
					scaled, small, large = walk.AliasVertex(wts[a:b], prob, col, scaled, small, large)
					putStreamEntries(ent[3*a:3*b], adj[a:b], prob, col)
				}
				if _, err := f.WriteAt(bytesOf(ent), 4*per*e0); err != nil {
					errs[w] = fmt.Errorf("gpu: %s file: write: %w", name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		f.Close()
		return nil, nil, 0, err
	}
	return f, ends, read.Load(), nil
}

// bytesOf is s's memory as bytes.
func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// DiskStream is the disk side of a stream plan (StreamPlan.Disk): where the
// partitions are read from and the ring of pinned buffers they go through.
type DiskStream struct {
	File        string // the .wsg whose targets section uniform walks read
	Entries     bool   // alias walks read an entries file built at start
	HostBudget  int64  // the host memory budget the plan was made for
	RingBuffers int
	BufferBytes int64 // each ring buffer's (a partition's bytes and a page each side)
	// ResultBytes is the batch slot's pinned result share
	// (WithHostBufferBytes): the tasks and lengths of a batch's walks
	// and WindowBytes, through which the walks' rows come back in
	// pieces (batchplan.go), so the device's memory, not this share,
	// sizes a batch (unless WithLentChunks, which lends chunks out of
	// the rows: then the rows and the tasks share it walk by walk).
	ResultBytes int64
	WindowBytes int64
}

// RingBytes is the pinned host memory of the ring.
func (d *DiskStream) RingBytes() int64 { return int64(d.RingBuffers) * d.BufferBytes }

// planStreamDisk is the stream plan under a host budget that cannot pin
// the streamed arrays: partitions no larger than a third of the ring's
// share (so at least minRingBuffers fit) and as many ring buffers as the
// share holds, up to one per streamed partition (all cached: no read after
// the first sweep).
func planStreamDisk(s graphShape, offsets []uint64, file string, deviceBudget, hostBudget, partBytes int64) (*StreamPlan, error) {
	eb := streamEntryBytes(s.weighted)
	ring := int64(float64(hostBudget) * diskRingShare)
	most := ring/minRingBuffers - 2*directio.Align
	if most < eb {
		return nil, fmt.Errorf("gpu: stream plan of graph %s from disk: a host memory budget of %s leaves %s for %d pinned read buffers: raise the host budget (WALKSTAGE_HOST_MEMORY_LIMIT)",
			s.name, sizeString(hostBudget), sizeString(ring), minRingBuffers)
	}
	if partBytes <= 0 {
		partBytes = min(max((deviceBudget-streamFixedBytes(s.vertices, streamLabelBytes(s.vertices, streamLabels(s))))/8, eb), streamPartCap)
	}
	p, err := planStream(s, offsets, deviceBudget, min(partBytes, most))
	if err != nil {
		return nil, err
	}
	if p.Streamed() == 0 {
		return p, nil // all resident: read once at start
	}
	buf := directio.Span(p.BufferEdges * eb)
	if minRingBuffers*buf > ring {
		return nil, fmt.Errorf("gpu: stream plan of graph %s from disk: partitions of %d edges (%s; the largest vertex or the %d-partition bound sets it) need %d pinned read buffers of %s, the host budget of %s leaves %s for them: raise the host budget (WALKSTAGE_HOST_MEMORY_LIMIT) to at least %s",
			s.name, p.BufferEdges, sizeString(p.BufferEdges*eb), maxStreamParts, minRingBuffers, sizeString(buf), sizeString(hostBudget), sizeString(ring),
			sizeString(int64(float64(minRingBuffers*buf)/diskRingShare)+1))
	}
	n := int(min(ring/buf, int64(p.Streamed()), maxRingBuffers))
	p.Disk = &DiskStream{File: file, Entries: s.weighted, HostBudget: hostBudget, RingBuffers: max(n, minRingBuffers), BufferBytes: buf}
	p.Disk.ResultBytes = min(max(int64(diskPinnedTotal*float64(hostBudget))-p.Disk.RingBytes(), 1<<20), streamHostBufferBytes)
	p.Disk.WindowBytes = resultWindow(p.Disk.ResultBytes)
	p.HostBytes = p.Disk.RingBytes()
	return p, nil
}

// streamFromDisk says whether a stream plan of hostBytes pinned (the
// pinned path's StreamPlan.HostBytes) must read from disk under a host
// budget of budget bytes (0: unknown, never).
func streamFromDisk(hostBytes, budget int64) bool {
	return budget > 0 && float64(hostBytes) > diskPinnedShare*float64(budget)
}

// PlanStreamHost is PlanStream under a host memory budget: the pinned-host
// plan when its pinned arrays fit half the budget (or hostBytes is 0),
// else the plan that reads partitions from g's file. `walkstage graph info
// --gpu-memory B --host-memory B` prints it.
func PlanStreamHost(g *graph.Graph, deviceBytes, hostBytes int64) (*StreamPlan, error) {
	p, err := PlanStream(g, deviceBytes, 0)
	if err != nil || !streamFromDisk(p.HostBytes, hostBytes) || p.Streamed() == 0 {
		return p, err
	}
	if g.File() == "" {
		return nil, fmt.Errorf("gpu: stream plan of graph %s: its pinned host arrays need %s, above half the %s host budget, and it was not loaded from a file to stream from",
			g.Name, sizeString(p.HostBytes), sizeString(hostBytes))
	}
	return planStreamDisk(shapeOf(g), g.Offsets, g.File(), deviceBytes, hostBytes, 0)
}

// ringVictim is the ring buffer to read a partition into: an empty one,
// else the one whose partition has the fewest waiting walkers (counts;
// ties to the lower index), keeping the busiest cached. parts[i] is the
// partition in buffer i, -1 for none.
func ringVictim(parts []int, counts []uint32) int {
	best := -1
	for i, p := range parts {
		if p < 0 {
			return i
		}
		if best < 0 || counts[p] < counts[parts[best]] {
			best = i
		}
	}
	return best
}

// entriesDir is where the entries file goes: beside the graph (the disk
// the graph is on was chosen to hold graphs).
func entriesDir(graphPath string) string { return filepath.Dir(graphPath) }
