package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
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
type Stripes struct {
	devices []int
	mu      sync.Mutex
	arrays  map[string]*stripedArray
	// graphBuilt and labelsBuilt say whether the edge arrays and alias
	// table, and the MetaPath label tables, are in the stripes.
	graphBuilt, labelsBuilt bool
	refs                    int
	// closeErr collects the first failure to free a stripe.
	closeErr error
}

// NewStripes is a partitioned store over devices (two or more ordinals;
// one may repeat). Pass WithStripes(s) to the New of one engine per device.
func NewStripes(devices []int) (*Stripes, error) {
	if len(devices) < 2 {
		return nil, errors.New("gpu: a partitioned graph needs at least two devices")
	}
	for _, d := range devices {
		if d < 0 {
			return nil, fmt.Errorf("gpu: device %d", d)
		}
	}
	return &Stripes{devices: append([]int(nil), devices...), arrays: map[string]*stripedArray{}}, nil
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
// of whole granules, the first size/gran mod k of them one granule larger.
// A piece may be empty when the array has fewer granules than devices.
func stripeCuts(size, gran int64, k int) []int64 {
	granules := size / gran
	cuts := make([]int64, k)
	for i := range cuts {
		n := granules / int64(k)
		if int64(i) < granules%int64(k) {
			n++
		}
		cuts[i] = n * gran
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
	fmt.Fprintf(&b, "partitioned over devices %v:", s.devices)
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
			fmt.Fprintf(&b, "%s on %d", shortSize(p.size), p.device)
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

// DeviceBytes is the memory the stripes hold on each device, by ordinal.
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
