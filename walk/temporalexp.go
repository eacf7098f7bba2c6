package walk

import (
	"math"

	"github.com/walkstage/walkstage/graph"
)

// The exponential bias's draw (walk/timeparams.go's header comment is the
// specification): per-vertex sums of the bias over time cells, so a step
// is one search in the sums instead of a band per time scale of its window.
//
// The bias of position k relative to the window's near end t(near),
// exp(-|t(k) - t(near)|/s), is the same distribution over a window as
// exp(-t(k)/s) (forward) or exp(t(k)/s) (backward): a fixed weight per
// edge, independent of the window. Its per-vertex prefix sums would make
// every draw one binary search, but exp(-t/s) spans more than float64's
// range over a vertex's times. Time cells keep it in range: cell c is the
// times whose key u(t) = uint64(t) ^ 2^63 (t + 2^63, order-preserving and
// never overflowing) has u / G = c, G = expCell(s) = int64(256 s) clamped to
// [1, 2^63-1], so inside a cell the bias relative to the cell's start (or
// end) is in [e^-256, 1] and never underflows. The sums restart at every
// cell and every vertex:
//
//	forward   S[k] = sum over positions j >= k of k's cell (and vertex) of
//	                 w(j) * exp(-o(j)/s)              (suffix sums)
//	backward  S[k] = sum over positions j <= k of k's cell (and vertex) of
//	                 w(j) * exp(-(G-1-o(j))/s)        (prefix sums)
//
// with o(j) = u(t(j)) - c*G the offset in the cell and w the edge's weight
// (1 unweighted). Suffix sums forward and prefix sums backward put the
// window's near end, where its mass is, on the large end of each
// difference, so a window's sum S[near] - S[far] loses at most about
// (edges within ~37 scales of the near end) * 2^-53 of its value to
// cancellation: the draw is exact up to that rounding, as the weighted
// uniform draw is up to its prefix sums'.

// expCellScales is a time cell's most width in time scales: exp(-256) is
// far from float64's underflow even times the smallest positive float32
// weight, and cells this wide put every window of a walk with up to about
// 200 scales of time span into one cell, where a draw needs no exp at all.
const expCellScales = 256

// MaxExpCells bounds the cells of a window a draw weighs: G >= 128 s, so the
// seventh cell past the near end's starts more than 6*128 > 745.2 scales
// away, where every weight underflows to zero (detExp), as the spec's do.
const MaxExpCells = 8

// expCell is G, the width of the exponential bias's time cells for scale:
// int64(256 * scale) in [1, 2^63-1].
func expCell(scale float64) uint64 {
	d := expCellScales * scale // a power of two: exact
	switch {
	case d >= 9e18:
		return math.MaxInt64
	case d < 1:
		return 1
	}
	return uint64(d)
}

// ExpCell is the exponential bias's time cell width for scale (the GPU
// engine passes it to its kernels).
func ExpCell(scale float64) uint64 { return expCell(scale) }

// TimeKey is u(t): t + 2^63 as an unsigned integer, order-preserving.
func TimeKey(t int64) uint64 { return uint64(t) ^ 1<<63 }

// KeyTime inverts TimeKey.
func KeyTime(u uint64) int64 { return int64(u ^ 1<<63) }

// BuildExpSums fills sums[Offsets[v]:Offsets[v+1]] for vertices [v0, v1)
// (one worker's part of the table): each vertex's cells in time order,
// each summed alone in the order the GPU's temporal_exp_build adds them.
func BuildExpSums(g *graph.Graph, scale float64, backward, weighted bool, sums []float64, v0, v1 int) {
	G := expCell(scale)
	times := g.Times
	for v := v0; v < v1; v++ {
		a, b := g.Offsets[v], g.Offsets[v+1]
		if a == b {
			continue
		}
		var sum float64
		var cell uint64
		for i := uint64(0); i < b-a; i++ {
			k := a + i // backward: positions in order
			if !backward {
				k = b - 1 - i // forward: from the last position down
			}
			u := TimeKey(times[k])
			c := u / G
			if i == 0 || c != cell {
				sum, cell = 0, c
			}
			o := u - c*G
			if backward {
				o = G - 1 - o
			}
			x := DetExp(-float64(o) / scale)
			if weighted {
				x = float64(x * float64(g.Weights[a+uint64(g.ByTime[k])])) // float64(): never an FMA
			}
			sum += x
			sums[k] = sum
		}
	}
}

// ExpSums is the exponential bias's per-edge cell sums of g for scale and
// direction (see BuildExpSums), built on one goroutine: the GPU engine's
// tests compare the device's table with it bit for bit.
func ExpSums(g *graph.Graph, scale float64, backward, weighted bool) []float64 {
	s := make([]float64, g.NumEdges())
	BuildExpSums(g, scale, backward, weighted, s, 0, g.NumVertices())
	return s
}
