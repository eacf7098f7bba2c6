package gpu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// fillLabelSegments builds the MetaPath label tables in layout l: each
// vertex's edges regrouped by label (stable, as label_tables_build and the
// CPU engine do), the segment offsets in the original index space (into
// segOffsets, V*L+1), the regrouped targets and, for a weighted graph, an
// alias table per segment at the vertex's relocated place.
func fillLabelSegments(g *graph.Graph, l *layout, segOffsets []uint64, dev, host sideArrays) {
	nl := g.NumLabels
	segOffsets[len(segOffsets)-1] = uint64(g.NumEdges())
	walk.ForVertexRanges(g, func(lo, hi int) {
		var b walk.AliasBuilder
		var w, prob []float32
		var col []uint32
		for v := lo; v < hi; v++ {
			a, z := g.Offsets[v], g.Offsets[v+1]
			side, base := dev, l.place[v]
			if base >= l.split {
				side, base = host, base-l.split
			}
			at := a
			for lab := 0; lab < nl; lab++ {
				seg := at
				segOffsets[v*nl+lab] = seg
				w = w[:0]
				for e := a; e < z; e++ {
					if int(g.Labels[e]) != lab {
						continue
					}
					side.targets[base+at-a] = g.Targets[e]
					if side.alias != nil {
						w = append(w, g.Weights[e])
					}
					at++
				}
				if side.alias == nil || at == seg {
					continue
				}
				d := len(w)
				if cap(prob) < d {
					prob, col = make([]float32, d), make([]uint32, d)
				}
				prob, col = prob[:d], col[:d]
				b.Build(w, prob, col)
				adj := side.targets[base+seg-a : base+at-a]
				for i := range d {
					side.alias[base+seg-a+uint64(i)] = aliasEntry{prob: prob[i], keep: adj[i], alt: adj[col[i]], alia: col[i]}
				}
			}
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
// MemAvailable, or less under a cgroup v2 limit; -1 when unknown.
func hostAvailable() int64 {
	avail := int64(-1)
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				if err == nil {
					avail = kb << 10
				}
			}
		}
		_ = f.Close()
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if lim, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			cur := int64(0)
			if c, err := os.ReadFile("/sys/fs/cgroup/memory.current"); err == nil {
				cur, _ = strconv.ParseInt(strings.TrimSpace(string(c)), 10, 64)
			}
			if avail < 0 || lim-cur < avail {
				avail = lim - cur
			}
		}
	}
	return avail
}
