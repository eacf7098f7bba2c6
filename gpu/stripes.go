package gpu

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/walkstage/walkstage/graph"
)

// Stripes is the partitioned mode of several GPUs (WALKSTAGE_GPU_PARTITION):
// one copy of the graph's edge arrays and sampling tables for all the
// engines of a host, each array cut into contiguous pieces, one per device,
// and mapped into one virtual address range that every device reads
// (CUDA virtual memory management: cuMemCreate on each device, cuMemMap of
// the pieces side by side, cuMemSetAccess for all of them). Edges are
// sorted by source vertex, so each device holds a vertex range of the
// graph, cut where the edges (not the vertices) balance; a kernel on one
// device reads its own range locally and the others' over NVLink, in
// place, with the all-device kernels unchanged: to a kernel the range is
// one array. The offsets, the batch slots and everything per run stay on
// each engine's own device.
//
// So a graph of E edges needs about 1/k of its edge memory per device
// instead of all of it, and the walks are the one-GPU walks (the arrays
// are byte for byte those of one device). The first engine to open uploads
// the arrays and builds the alias tables into the stripes (its kernels
// write the other devices' pieces over NVLink); the others find them
// built. The MetaPath label tables are built the same way, once, by the
// first engine that needs them. The last engine to close frees them.
//
// A device may be named twice: the simulated run of CI-built code on one
// GPU (two pieces, both on device 0).
//
// When the graph does not fit the devices together, a host share puts the
// last part of each array (the highest vertex range) in pinned host memory
// mapped into the same range (cuMemCreate on the host's NUMA node 0): one
// placement over device, peer and host memory, which the kernels read in
// place without knowing which is which. Hub copies still come first, from
// every piece, host included, into each engine's own memory.
type Stripes struct {
	devices []int
	// hostShare is the fraction of each array's granules in host memory.
	hostShare float64
	mu        sync.Mutex
	arrays    map[string]*stripedArray
	// graphBuilt and labelsBuilt say whether the edge arrays and alias
	// table, and the MetaPath label tables, are in the stripes.
	graphBuilt, labelsBuilt bool
	refs                    int
	// closeErr collects the first failure to free a stripe.
	closeErr error
}

// NewStripes is a partitioned store over devices (two or more ordinals;
// one may repeat), with hostShare (in [0, 1)) of each array in host
// memory. Pass WithStripes(s) to the New of one engine per device.
func NewStripes(devices []int, hostShare float64) (*Stripes, error) {
	if len(devices) < 2 {
		return nil, errors.New("gpu: a partitioned graph needs at least two devices")
	}
	for _, d := range devices {
		if d < 0 {
			return nil, fmt.Errorf("gpu: device %d", d)
		}
	}
	if !(hostShare >= 0 && hostShare < 1) {
		return nil, fmt.Errorf("gpu: host share %v of a partitioned graph, want [0, 1)", hostShare)
	}
	return &Stripes{devices: append([]int(nil), devices...), hostShare: hostShare, arrays: map[string]*stripedArray{}}, nil
}

// hostPiece is the device of a piece in host memory.
const hostPiece = -1

// HostShare is the fraction of the arrays in host memory.
func (s *Stripes) HostShare() float64 { return s.hostShare }

// PartitionHostShare is the host share a partitioned graph g needs on k
// devices with free bytes each (the smallest device's, less nothing: the
// caller has taken the batch reserve off): 0 when the devices' pieces fit,
// else the share that leaves each device its offsets and its piece with a
// margin for the mapping granules. An error when even the offsets do not
// fit, or the share would be all of it.
func PartitionHostShare(g *graph.Graph, k int, free int64) (float64, error) {
	if k < 1 {
		return 0, fmt.Errorf("gpu: partition over %d devices", k)
	}
	sh := shapeOf(g)
	fixed := uploadBytes((sh.vertices+1)*8) + uploadBytes(sh.vertices*placeRecordBytes)
	striped := graphPlan(sh, 0).need() - uploadBytes((sh.vertices+1)*8)
	// Every array's piece rounds up to a granule (2 MiB or more) on each
	// device: room for eight arrays of slack.
	room := free - fixed - 8*(2<<20)
	if room <= 0 {
		return 0, &MemoryPlanError{What: "partitioned graph " + sh.name, Need: fixed + 8*(2<<20), Free: free,
			Parts: []MemoryPart{{Name: "graph.offsets", Bytes: uploadBytes((sh.vertices + 1) * 8)},
				{Name: "graph.place", Bytes: uploadBytes(sh.vertices * placeRecordBytes)}}}
	}
	if striped <= int64(k)*room {
		return 0, nil
	}
	share := 1 - float64(int64(k)*room)/float64(striped)
	share = min(1, share+0.01) // the granules' rounding of each cut
	if share >= 0.99 {
		return 0, fmt.Errorf("gpu: partitioned graph %s would be %.1f%% in host memory over %d devices of %s free: use the one-GPU placement plan",
			sh.name, 100*share, k, sizeString(free))
	}
	return share, nil
}

// WithStripes makes the engine one of a partitioned group: its edge arrays
// and tables live in s, shared with the group's other engines.
func WithStripes(s *Stripes) Option { return func(c *config) { c.stripes = s } }

// stripedArray is one array of a Stripes: a reserved virtual range and the
// pieces mapped into it.
type stripedArray struct {
	name   string
	va     uint64 // device address of the range
	size   int64  // reserved bytes, a multiple of the mapping granularity
	used   int64  // bytes asked for
	pieces []stripePiece
}

// stripePiece is the part of an array physically on one device.
type stripePiece struct {
	device int
	off    int64
	size   int64
	handle uint64 // CUmemGenericAllocationHandle
}

// stripeCuts cuts size bytes, a multiple of gran, into k contiguous pieces
// of whole granules, the first size/gran mod k of them one granule larger,
// and a last, host piece of hostShare of the granules (rounded up; none
// when hostShare is 0). A piece may be empty when the array has fewer
// granules than devices.
func stripeCuts(size, gran int64, k int, hostShare float64) []int64 {
	granules := size / gran
	var host int64
	if hostShare > 0 {
		host = min(granules, int64(math.Ceil(hostShare*float64(granules))))
		granules -= host
	}
	cuts := make([]int64, k, k+1)
	for i := range cuts {
		n := granules / int64(k)
		if int64(i) < granules%int64(k) {
			n++
		}
		cuts[i] = n * gran
	}
	if hostShare > 0 {
		cuts = append(cuts, host*gran)
	}
	return cuts
}

// roundUp rounds n up to a multiple of gran (a power of two or not).
func roundUp(n, gran int64) int64 { return (n + gran - 1) / gran * gran }

// String lists each array and how much of it each device holds.
func (s *Stripes) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stringLocked()
}

func (s *Stripes) stringLocked() string {
	var b strings.Builder
	fmt.Fprintf(&b, "partitioned over devices %v", s.devices)
	if s.hostShare > 0 {
		fmt.Fprintf(&b, " and the host (%.1f%%)", 100*s.hostShare)
	}
	b.WriteString(":")
	for _, name := range stripeOrder {
		a := s.arrays[name]
		if a == nil {
			continue
		}
		fmt.Fprintf(&b, " %s %s (", name, shortSize(a.used))
		for i, p := range a.pieces {
			if i > 0 {
				b.WriteString(", ")
			}
			if p.device == hostPiece {
				fmt.Fprintf(&b, "%s on the host", shortSize(p.size))
			} else {
				fmt.Fprintf(&b, "%s on %d", shortSize(p.size), p.device)
			}
		}
		b.WriteString(")")
	}
	return b.String()
}

// shortSize is n in MiB or GiB, one decimal.
func shortSize(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// DeviceBytes is the memory the stripes hold on each device, by ordinal
// (the host's pieces under hostPiece, -1).
func (s *Stripes) DeviceBytes() map[int]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int64{}
	for _, a := range s.arrays {
		for _, p := range a.pieces {
			out[p.device] += p.size
		}
	}
	return out
}

// stripeOrder is the arrays a Stripes may hold, in the order String lists
// them.
var stripeOrder = []string{"graph.targets", "graph.weights", "graph.labels", "alias.table",
	"labels.offsets", "labels.targets", "labels.alias"}

// isStriped says whether the engine array name lives in the stripes.
func isStriped(name string) bool {
	for _, n := range stripeOrder {
		if n == name {
			return true
		}
	}
	return false
}
