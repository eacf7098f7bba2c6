// overlaytemporal.cuh: temporal walks on a live graph's snapshot (issues 37
// and 38), the device twin of walk/cpu/overlaytemporal.go's
// walkOverlayTemporal, draw for draw:
//
//   a vertex without a delta  the base's temporal step (temporal.cuh's
//                             temporal_step, its next records after a base
//                             step into another such vertex)
//   a vertex with one         its timed list: the vertex's live edges in
//                             (time, target) order (walk.AppendTimed),
//                             gathered on the host per snapshot
//                             (gpu/overlaytemporal.go) and laid out as the
//                             base's time order is, so the window's search
//                             (search_time), the weighted pick
//                             (weighted_pick on the lists' prefix sums) and
//                             the exponential draw (exp_step on the lists'
//                             cell sums, built by the base's kernels) are the
//                             base's; only the exact fallback differs, as on
//                             the CPU: timed_list_scan, a cumulative scan
//                             from the window's near end, not the base's
//                             reservoir
//   an added vertex with no   a dead end
//   list of its own
//
// Every double operation that decides a draw is written with the _rn
// intrinsics (never an FMA), as temporal.cuh's are.
#pragma once
#include <stdint.h>

#include "params.cuh"
#include "rng.cuh"
#include "temporal.cuh"

namespace ws {

// TimedLists is a snapshot's timed lists on the device (kernel arguments,
// gpu/overlaytemporal_cuda.go passes them in this order). List j holds
// positions [off[j], off[j+1]) of the arrays; index[v] is 1 + j for a vertex
// v with a delta, 0 without one.
struct TimedLists {
  const uint32_t* index;  // n_index
  uint64_t n_index;       // the snapshot's vertices
  uint64_t base_vertices;
  const uint64_t* off;
  const int64_t* times;
  const int64_t* coarse;  // every kCoarse-th time, as the base's
  const uint32_t* targets;
  const float* weights;   // null unless weighted
  const double* cumw;     // weighted, uniform and linear: prefix sums by list
  const double* exp_sums; // exponential: cell sums by list
};

// timed_list_scan is walk/cpu's overlayTemporalScan without Node2Vec:
// window [lo, hi) of the list's times weighed from the near end (linear: n
// - p; exponential: det_exp of the time distance to the near end, the scan
// stopping at the first zero, as every later one is zero too; times the
// weight), and the first position whose running sum exceeds unit53 of draw
// d times the total; where rounding leaves none, the last that added
// anything. Two passes over the window instead of the CPU's stored sums:
// the same additions in the same order give the same sums. ~0 when the
// window weighs nothing. Not inlined: it is rare.
template <int kBias, bool kWeighted>
__device__ __noinline__ uint64_t timed_list_scan(const int64_t* __restrict__ times, const float* __restrict__ weights,
                                                 uint64_t lo, uint64_t hi, double scale, bool backward, uint64_t seed,
                                                 uint64_t walk, uint32_t step, uint32_t d) {
  const uint64_t n = hi - lo;
  const double near = (double)__ldg(times + (backward ? hi - 1 : lo));
  auto bias = [&](uint64_t p) -> double {
    const uint64_t k = backward ? hi - 1 - p : lo + p;
    double b = 1.0;
    if (kBias == kTimeLinear) {
      b = (double)(n - p);
    } else if (kBias == kTimeExponential) {
      double dt = __dsub_rn((double)__ldg(times + k), near);
      if (dt < 0) dt = -dt;
      b = det_exp(__ddiv_rn(-dt, scale));
    }
    if (kWeighted) b = __dmul_rn(b, (double)__ldg(weights + k));
    return b;
  };
  double sum = 0;
  uint64_t m = 0;
  for (; m < n; m++) {
    const double b = bias(m);
    if (kBias == kTimeExponential && b == 0) break;
    sum = __dadd_rn(sum, b);
  }
  if (!(sum > 0)) return ~0ull;
  const uint4 w = draw(seed, walk, step, d);
  const double r = __dmul_rn(unit53(w.x, w.y), sum);
  double s = 0;
  uint64_t last = 0;
  for (uint64_t p = 0; p < m; p++) {
    const double before = s;
    s = __dadd_rn(s, bias(p));
    if (s > r) return backward ? hi - 1 - p : lo + p;
    if (p == 0 || s != before) last = p;
  }
  return backward ? hi - 1 - last : lo + last;
}

// timed_list_step is walk/cpu's overlayTemporalDraw without Node2Vec: the
// window of list [a, b) under bound t (none unless bounded), and the list
// position its draw picks; ~0 when the window holds no edge of positive
// bias (the walk ends).
template <int kBias, bool kWeighted>
__device__ __forceinline__ uint64_t timed_list_step(const TimedLists& L, const TemporalCtx& C, uint64_t a, uint64_t b,
                                                    int64_t t, bool bounded, uint64_t seed, uint64_t walk,
                                                    uint32_t step) {
  uint64_t lo = a, hi = b;
  if (bounded && !C.backward) {
    lo = search_time<false, kGallopNone>(L.times, L.coarse, a, b, t);
    if (C.has_gap) hi = search_time<true, kGallopUp>(L.times, L.coarse, lo, b, sat_add(t, C.max_gap));
  } else if (bounded) {
    hi = search_time<true, kGallopNone>(L.times, L.coarse, a, b, t);
    if (C.has_gap) lo = search_time<false, kGallopDown>(L.times, L.coarse, a, hi, sat_add(t, -C.max_gap));
  }
  if (lo == hi) return ~0ull;
  const uint64_t n = hi - lo;
  if (kBias == kTimeExponential) {
    TemporalCtx E = C;
    E.times = L.times;
    E.coarse = L.coarse;
    E.exp_sums = L.exp_sums;
    const uint64_t k = exp_step(E, a, b, lo, hi, false, seed, walk, step);
    if (k != ~0ull) return k;
    return timed_list_scan<kBias, kWeighted>(L.times, L.weights, lo, hi, C.scale, C.backward, seed, walk, step,
                                             kFallbackDraw);
  }
  if (!kWeighted) {
    const uint4 w = draw(seed, walk, step, 0);
    if (kBias == kTimeLinear) {
      const uint64_t i = index(w.x, (uint32_t)(n + 1));
      uint64_t j = index(w.y, (uint32_t)n);
      if (j >= i) j++;
      const uint64_t p = min(i, j);
      return C.backward ? hi - 1 - p : lo + p;
    }
    return lo + index(w.x, (uint32_t)n);
  }
  const double base = lo > a ? __ldg(L.cumw + lo - 1) : 0.0;
  if (!(__ldg(L.cumw + hi - 1) > base)) return ~0ull;  // every weight 0
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    const uint4 w = draw(seed, walk, step, att);
    const uint64_t k = weighted_pick(L.cumw, a, lo, hi, w.x, w.y);
    if (kBias == kTimeUniform) return k;
    const uint64_t rank = C.backward ? hi - 1 - k : k - lo;
    if ((uint64_t)w.z * n < (n - rank) << 32) return k;
  }
  return timed_list_scan<kBias, kWeighted>(L.times, L.weights, lo, hi, C.scale, C.backward, seed, walk, step,
                                           kMaxRejections);
}

}  // namespace ws
