package gpu

import (
	"math"

	"github.com/walkstage/walkstage/walk"
)

// Node2Vec under streaming (issue 35; docs/design/out-of-core.md, "Node2Vec
// under streaming"). A step at v (previous vertex u) runs the rejection
// loop of node2vec_reject: attempt a draws a proposal x from v's static
// bias and accepts it on word z against the threshold of its class (0:
// x = u, 1: x adjacent to u, 2: otherwise). Only the class test reads u's
// adjacency, which may lie in a partition not on the device. So a walker
// carries a phase beside its vertex: it proposes at part(v) and decides
// every attempt that needs no lookup there (or that needs one while u's
// partition is on the device too); an attempt that needs u's adjacency
// parks it in the check phase, queued by part(u), with its candidate and
// attempt; after walk.MaxRejections rejected attempts it waits for the
// host, which runs the exact scan (node2vecScanHost). Every decision is a
// function of the draws of (seed, walk id, step, attempt), never of a
// visit, so the walks are those of the all-device engine and of walk/cpu.
//
// This file holds what needs no GPU: the phases and the host's scan.
// kernels/stream.cuh walks the phases; stream_cuda.go runs the scans.

// Walker phases (the low byte of stream.wphase; the attempt is in bits
// 8-15). kN2V* in kernels/stream.cuh.
const (
	n2vPropose = 0 // waits at part(v): the next attempt's proposal
	n2vCheck   = 1 // waits at part(u): is the candidate adjacent to u?
	n2vScan    = 2 // waits for the host: MaxRejections attempts rejected
)

// n2vScanRecord is one walker handed to the host for its scan (8 words;
// kernels/stream.cuh writes them, stream_scan_apply reads x back): its
// slot, current and previous vertex, step, walk id, job, and the vertex
// the scan picks.
const n2vScanWords = 8

// n2vAdjacency gives v's targets (sorted) and, for a weighted walk, its
// weights (nil for an unweighted one).
type n2vAdjacency func(v uint32) ([]uint32, []float32, error)

// node2vecScanHost is node2vec_scan (kernels/samplers.cuh) on the host:
// a one-lane reservoir over v's edges with bias w(e) f(class(e)) in
// float64, element i on word i%4 of draw FallbackDraw + i/4, so the same
// additions, products and comparisons pick the same edge as the device
// (and walk/cpu's scan).
func node2vecScanHost(adj n2vAdjacency, f [3]float64, seed, walkID uint64, step, v, u uint32) (uint32, error) {
	tg, w, err := adj(v)
	if err != nil {
		return 0, err
	}
	ptg, _, err := adj(u)
	if err != nil {
		return 0, err
	}
	k0, k1 := uint32(seed), uint32(seed>>32)
	var run float64
	pick := 0
	var words [4]uint32
	for i, x := range tg {
		if i&3 == 0 {
			words[0], words[1], words[2], words[3] = walk.Philox(uint32(walkID), uint32(walkID>>32), step, walk.FallbackDraw+uint32(i>>2), k0, k1)
		}
		base := 1.0
		if w != nil {
			base = float64(w[i])
		}
		c := 2
		switch {
		case x == u:
			c = 0
		case sortedHas(ptg, x):
			c = 1
		}
		b := base * f[c]
		if b <= 0 {
			continue
		}
		run += b
		// Two roundings, as the device's __dmul_rn pair: Go does not
		// fuse an explicit float64 conversion.
		if float64(float64(words[i&3])*0x1p-32)*run < b {
			pick = i
		}
	}
	if len(tg) == 0 {
		return 0, nil
	}
	return tg[pick], nil
}

// sortedHas says whether the sorted adjacency a holds x.
func sortedHas(a []uint32, x uint32) bool {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(a) && a[lo] == x
}

// n2vFactors are the bias factors 1/p, 1, 1/q and the acceptance
// thresholds the kernels compare word z against (algorithmParams computes
// the same).
func n2vFactors(a walk.Algorithm) (f [3]float64, accept [3]uint64) {
	f = [3]float64{1 / a.P, 1, 1 / a.Q}
	fmax := math.Max(f[0], math.Max(f[1], f[2]))
	for i := range f {
		accept[i] = walk.Threshold(f[i] / fmax)
	}
	return f, accept
}
