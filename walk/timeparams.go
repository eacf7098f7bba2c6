package walk

import (
	"fmt"
	"math"
	"strings"
)

// Temporal walks (issue 38; CTDNE, Nguyen et al., "Continuous-Time Dynamic
// Network Embeddings", WWW'18 companion) run on a timed graph, which holds
// each vertex's edge times in time order (Graph.Times) with the permutation
// to its target-sorted edges (Graph.ByTime): position k of vertex v's time
// order is edge Offsets[v] + ByTime[Offsets[v]+k], ties in time in target
// order. A forward walk takes, at each step, an edge whose time is at or
// after the time of the edge it arrived by, and, with a maximum gap, at most that much later; a backward walk
// takes edges at or before it (and at most the gap earlier), still along
// out-edges: a CSR of out-edges has no in-edges to walk, so "backward" is
// time running backward, not the edge direction reversed (reverse the
// edges at import for that). The first step's bound is the start time when
// one is given, otherwise none: any edge of the start vertex.
//
// The edges a step may take are its window: a contiguous range [lo, hi) of
// positions of the vertex's time order (indices into Times) found by binary
// search. The rank p of position k counts from the window's near end, the
// end closest in time to the bound: p = k-lo forward, hi-1-k backward. The
// time bias weighs position k of a window of n by
//
//	uniform      1
//	linear       n - p                        (CTDNE's linear: the nearest in time weighs most)
//	exponential  exp(-|t(k) - t(near)| / s)   (t(near): the time at the window's near end)
//
// times its edge's weight when the walk is weighted. Ties in time are
// ranked by target, as the time order has them. Measuring the exponential
// from the window's nearest edge rather than from the bound keeps the
// weights in (0, 1] and the nearest edge at 1, so no window underflows to
// all zeros.
//
// The draw of step k of walk id uses Philox draws (seed, id, k, d), words
// x0..x3 (index is Bounded, the multiply-high map to [0, n); unit53(x, y)
// = (x<<21 | y>>11) * 2^-53):
//
//	uniform, unweighted   d=0: k = lo + index(x0, n)
//	linear, unweighted    d=0: i = index(x0, n+1), j = index(x1, n), j++ if j >= i;
//	                      p = min(i, j): the smaller of a uniform pair of distinct
//	                      values of 0..n, which is p with probability (n-p)/(n(n+1)/2)
//	uniform, weighted     d=0: r = cumw[lo-1] + unit53(x0, x1) * W (cumw[lo-1] = 0
//	                      at the vertex's first position), W the window's weight;
//	                      k = the first position in [lo, hi) with cumw[k] > r, else
//	                      hi-1 (cumw: per-vertex inclusive prefix sums, in float64,
//	                      of the weights in time order)
//	linear, weighted      rejection: attempt a < maxRejections uses d=a: k drawn as
//	                      "uniform, weighted" from (x0, x1), accepted when
//	                      uint64(x2) * n < (n-p) << 32
//	exponential           d=0: the window's cell sums S (temporalexp.go: per vertex,
//	                      per time cell of width G = expCell(s) = int64(256 s) in
//	                      [1, 2^63-1] by u(t) = uint64(t) ^ 2^63, the sums of
//	                      w * exp(-o/s) over the cell's positions from k to its
//	                      end forward, w * exp(-(G-1-o)/s) from its start to k
//	                      backward, o = u(t(k)) mod G, w the weight or 1).
//	                      The window's parts by cell from the near end, at most
//	                      maxExpCells, each weighing (its sums' difference) times
//	                      exp(±(near end's offset to the cell)/s), stopping at a
//	                      factor of 0; with one part no exp is computed. The part:
//	                      the first with positive mass whose cumulative mass exceeds
//	                      unit53(x2, x3) * total (else the last with mass); in it
//	                      r = base + unit53(x0, x1) * (part's sums), k = the last
//	                      position with S[k] > r forward, the first with S[k] > r
//	                      backward. A window whose sums are 0 goes to the fallback.
//	                      Exact up to the float64 rounding of the sums (as the
//	                      weighted draws are up to cumw's): a difference loses at
//	                      most about (edges within ~37 scales of the near end) *
//	                      2^-53 of the window's mass
//
// Temporal Node2Vec (P and Q set), from the second step on: by rejection
// (draws.go). Attempt a proposes a position by the draw above on draw 2a
// (weighted linear: by weight, accepted by rank on draw 2a+1's x0) and
// keeps it when draw 2a+1's next word is under Threshold(f/fmax), f the
// p/q factor of its target against the previous vertex. After
// MaxRejections attempts, or on an exponential window whose sums are 0:
// ZPRS (32 lanes, zprs) over the window in time order, element i =
// position lo+i with bias temporalBias times the factor, its word being
// word i%4 of draw TemporalN2VFallbackDraw + i/4 (the zprs stepper's
// contract, which a warp runs in parallel). Its first step is the plain
// temporal draw above.
//
// exp is detExp (detexp.go), which the GPU engine computes to the same
// bits, and no product here is fused with a sum into an FMA (float64()
// around it), so both engines make every comparison alike.
//
// After maxRejections failed attempts (linear weighted), or for an
// exponential window whose sums are 0 (every weight zero, or rounded
// away), the exact one-lane reservoir scan over the window in time order
// (zprs with k = 1, the bias of temporalBias) with word i%4 of draw
// fallbackDraw+i/4 decides, as for Node2Vec: the bounded loop stays exact.
// Each draw is one binary search for the window plus O(1) work (uniform
// and linear, unweighted), a binary search in the prefix sums (weighted),
// or one galloping search in the cell sums from the window's near end,
// where its mass is (exponential; a window over several cells, rare with
// cells of 256 scales, adds a galloping search and an exp per cell), which
// is what a GPU thread can do; linear weighted has no acceptance bound
// (the mean of (n-p)/n under the weights).

// TimeBias weighs the edges of a temporal step's window.
type TimeBias uint8

const (
	TimeUniform     TimeBias = iota // every edge of the window alike
	TimeLinear                      // by rank from the window's near end: n, n-1, ..., 1
	TimeExponential                 // exp(-(time distance to the window's near end) / scale)
)

var timeBiasNames = map[TimeBias]string{TimeUniform: "uniform", TimeLinear: "linear", TimeExponential: "exponential"}

func (b TimeBias) String() string {
	if s, ok := timeBiasNames[b]; ok {
		return s
	}
	return fmt.Sprintf("time_bias(%d)", uint8(b))
}

// ParseTimeBias accepts the names String returns (case-insensitive).
func ParseTimeBias(s string) (TimeBias, error) {
	for k, n := range timeBiasNames {
		if strings.EqualFold(s, n) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown time_bias %q (want uniform, linear or exponential)", ErrInvalidAlgorithm, s)
}

// TimeParams are a Temporal walk's parameters. Times are in the graph's
// time unit (whatever the edge list's time column held, e.g. Unix ms).
type TimeParams struct {
	Bias TimeBias
	// Scale is the exponential bias's decay scale: an edge Scale later
	// than the window's nearest weighs 1/e of it. Required (> 0) for
	// exponential, zero otherwise.
	Scale float64
	// Start bounds the first step when HasStart: forward walks take an
	// edge at or after it, backward walks one at or before it. Without
	// it the first step may take any edge of the start vertex.
	Start    int64
	HasStart bool
	// MaxGap, when HasMaxGap, bounds how far in time a step's edge may be
	// from the previous step's (or from Start, for the first step); >= 0.
	MaxGap    int64
	HasMaxGap bool
	// Backward walks time backward (non-increasing edge times) along
	// out-edges.
	Backward bool
}

func (t TimeParams) validate() error {
	if _, ok := timeBiasNames[t.Bias]; !ok {
		return invalid("unknown time_bias %d", t.Bias)
	}
	if t.Bias == TimeExponential {
		if !(t.Scale > 0) || math.IsInf(t.Scale, 0) {
			return invalid("exponential time_bias needs a time_scale > 0 (in the graph's time unit), got %v", t.Scale)
		}
	} else if t.Scale != 0 {
		return invalid("time_scale is only for the exponential time_bias, not %s", t.Bias)
	}
	if t.HasMaxGap && t.MaxGap < 0 {
		return invalid("max_time_gap %d must be 0 or more", t.MaxGap)
	}
	if !t.HasMaxGap && t.MaxGap != 0 || !t.HasStart && t.Start != 0 {
		return invalid("max_time_gap or start_time set without its flag")
	}
	return nil
}

// String renders the parameters for Algorithm.String.
func (t TimeParams) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "time_bias=%s", t.Bias)
	if t.Bias == TimeExponential {
		fmt.Fprintf(&b, " time_scale=%g", t.Scale)
	}
	if t.HasStart {
		fmt.Fprintf(&b, " start_time=%d", t.Start)
	}
	if t.HasMaxGap {
		fmt.Fprintf(&b, " max_time_gap=%d", t.MaxGap)
	}
	if t.Backward {
		b.WriteString(" direction=backward")
	}
	return b.String()
}

// Bound is the time a walk's first step is bounded by: Start when given,
// else the earliest (forward) or latest (backward) int64. It is the first
// entry of a walk's times (Chunk.Times).
func (t TimeParams) Bound() int64 {
	switch {
	case t.HasStart:
		return t.Start
	case t.Backward:
		return math.MaxInt64
	}
	return math.MinInt64
}
