package gpu

import (
	"fmt"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/sysmem"
	"github.com/walkstage/walkstage/walk"
)

// fillLabelSegments builds the MetaPath label tables in layout l: the
// segments of walk.ForLabelSegments (the CPU engine's regrouping), their
// offsets in the original index space (into segOffsets, V*L+1), and the
// regrouped targets and, for a weighted graph, alias entries at each
// vertex's relocated place.
func fillLabelSegments(g *graph.Graph, l *layout, segOffsets []uint64, dev, host sideArrays) {
	nl := g.NumLabels
	segOffsets[len(segOffsets)-1] = uint64(g.NumEdges())
	weighted := dev.alias != nil || host.alias != nil
	walk.ForLabelSegments(g, weighted, func(v, lab int, seg uint64, adj []uint32, prob []float32, col []uint32) {
		segOffsets[v*nl+lab] = seg
		side, p := dev, l.place[v]
		if p >= l.split {
			side, p = host, p-l.split
		}
		p += seg - g.Offsets[v]
		copy(side.targets[p:], adj)
		for i := range prob {
			side.alias[p+uint64(i)] = aliasEntry{prob: prob[i], keep: adj[i], alt: adj[col[i]], alia: col[i]}
		}
	})
}

// HostMemoryError says that a placement plan's host half does not fit the
// host's available memory, part by part. Nothing was allocated.
type HostMemoryError struct {
	Plan      *Placement
	Need      int64 // host parts plus the device halves staged on the host
	Available int64 // MemAvailable (or the cgroup's limit, when lower)
}

func (e *HostMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpu: graph %s does not fit device and host memory: its host part needs %s with %s available:",
		e.Plan.Graph, sizeString(e.Need), sizeString(e.Available))
	e.Plan.writeParts(&b, "(device, staged on the host)", "(host)")
	return b.String()
}

// checkHostMemory compares a plan's host memory (host parts, plus the
// device parts, which are built on the host before their upload) with
// available (negative: unknown, not checked).
func checkHostMemory(p *Placement, available int64) error {
	need := p.Bytes(true) + p.Bytes(false)
	if available >= 0 && need > available {
		return &HostMemoryError{Plan: p, Need: need, Available: available}
	}
	return nil
}

// hostAvailable is the memory a placement may pin: /proc/meminfo's
// MemAvailable, or less under the cgroup's limit (v2 or v1) less its
// usage; -1 when unknown.
func hostAvailable() int64 { return sysmem.Available() }
