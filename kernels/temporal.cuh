// temporal.cuh: temporal walks (issue 38), the device twin of
// walk/timeparams.go, whose header comment is the specification: the same
// window, the same Philox draws, the same float64 arithmetic rounded the
// same way (the _rn intrinsics: never an FMA), so a walk here equals the
// CPU engine's vertex for vertex and time for time.
//
//   temporal_cumw_build  one thread per vertex: the inclusive prefix sums of
//                        its weights in time order (float64, in order, as
//                        cpu.Engine.windowWeights adds them)
//   temporal_exp_build   one warp per vertex: the exponential bias's cell
//                        sums for one scale and direction (walk.ExpSums),
//                        the biases computed a lane an edge, the sums added
//                        in walk's order through shuffles
//   walk_temporal_*      persistent blocks, one walk per thread (as
//                        walk_thread): a step binary-searches the window in
//                        the vertex's contiguous, sorted times, draws a
//                        position k of it, and takes edge off + bytime[k];
//                        after the first step, the window's near end is
//                        next[k] of the position taken last, where next is
//                        built (temporal_next_build), so only the first
//                        step and a gap's far end search
//   temporal_next_build  one warp per vertex: next[k], the search a step
//                        bounded by position k's time makes in its target's
//                        time order (the CPU's timeRec.nx)
//
// Memory: times (int64), bytime (uint32), cumw and exp_sums (float64), E
// each, are global and read through the read-only path, with a coarse
// index of every 32nd time (search_time); a walk's state (vertex, time
// bound, step) is in registers; an exponential window over several time
// cells (rare: cells are 256 scales wide) keeps its parts' bounds and
// masses in per-thread arrays of kMaxExpCells (local memory).
#pragma once
#include <stdint.h>

#include "params.cuh"
#include "rng.cuh"

namespace ws {

enum TimeBias : uint32_t { kTimeUniform = 0, kTimeLinear = 1, kTimeExponential = 2 };  // walk.TimeBias
// WalkParams.time_flags bits.
constexpr uint64_t kTimeHasStart = 1, kTimeHasMaxGap = 2, kTimeBackward = 4;

// det_exp is walk.detExp, operation for operation: math's pure-Go exp
// (FreeBSD e_exp.c) in single-rounded IEEE operations, so the acceptance
// tests and the fallback's biases equal the CPU's to the bit. (CUDA's exp()
// is a different polynomial and differs from Go's in the last place.)
__device__ __forceinline__ double det_exp(double x) {
  constexpr double ln2Hi = 6.93147180369123816490e-01, ln2Lo = 1.90821492927058770002e-10,
                   log2e = 1.44269504088896338700e+00, overflow = 7.09782712893383973096e+02,
                   underflow = -7.45133219101941108420e+02, nearZero = 1.0 / (1 << 28);
  constexpr double p1 = 1.66666666666666657415e-01, p2 = -2.77777777770155933842e-03,
                   p3 = 6.61375632143793436117e-05, p4 = -1.65339022054652515390e-06,
                   p5 = 4.13813679705723846039e-08;
  if (x != x) return x;
  if (x > overflow) return __longlong_as_double(0x7FF0000000000000ll);
  if (x < underflow) return 0;
  if (-nearZero < x && x < nearZero) return __dadd_rn(1.0, x);
  const int64_t k = x < 0 ? __double2ll_rz(__dsub_rn(__dmul_rn(log2e, x), 0.5))
                          : __double2ll_rz(__dadd_rn(__dmul_rn(log2e, x), 0.5));
  const double fk = (double)k;
  const double hi = __dsub_rn(x, __dmul_rn(fk, ln2Hi));
  const double lo = __dmul_rn(fk, ln2Lo);
  const double r = __dsub_rn(hi, lo);
  const double t = __dmul_rn(r, r);
  double q = __dadd_rn(p4, __dmul_rn(t, p5));
  q = __dadd_rn(p3, __dmul_rn(t, q));
  q = __dadd_rn(p2, __dmul_rn(t, q));
  q = __dadd_rn(p1, __dmul_rn(t, q));
  const double c = __dsub_rn(r, __dmul_rn(t, q));
  const double y = __dsub_rn(1.0, __dsub_rn(__dsub_rn(lo, __ddiv_rn(__dmul_rn(r, c), __dsub_rn(2.0, c))), hi));
  // walk.scale2: exact powers of two, one rounding where subnormal.
  auto pow2 = [](int64_t e) { return __longlong_as_double((long long)((uint64_t)(e + 1023) << 52)); };
  if (k > 1023) return __dmul_rn(__dmul_rn(y, 2.0), pow2(k - 1));
  if (k < -1021) return __dmul_rn(__dmul_rn(y, pow2(k + 64)), pow2(-64));
  return __dmul_rn(y, pow2(k));
}

// sat_add is walk.satAdd: t+d clamped to the int64 range.
__device__ __forceinline__ int64_t sat_add(int64_t t, int64_t d) {
  const int64_t r = (int64_t)((uint64_t)t + (uint64_t)d);
  if (d > 0 && r < t) return INT64_MAX;
  if (d < 0 && r > t) return INT64_MIN;
  return r;
}

// kCoarse is the spacing of the coarse time index: coarse[j] =
// times[j * kCoarse] (global positions, so no per-vertex offsets; a
// vertex's searches use the entries that fall inside its range). It is an
// eighth of the bytes of times, so it stays in L2 where times cannot, and
// a search costs a few cached probes there plus one 256-byte run of times.
constexpr uint64_t kCoarse = 32;
enum Gallop { kGallopNone, kGallopUp, kGallopDown };

template <bool kUpper>
__device__ __forceinline__ bool before_time(int64_t x, int64_t t) { return kUpper ? x <= t : x < t; }

// search_time is the first k in [a, b) with times[k] >= t (kUpper: > t),
// or b: walk's lowerTime (upperTime), and its gallops, which return the
// same positions; kGallop searches the coarse index outward from a (kUp)
// or downward from b (kDown), for answers expected near that end.
template <bool kUpper, int kGallop>
__device__ __forceinline__ uint64_t search_time(const int64_t* __restrict__ times, const int64_t* __restrict__ coarse,
                                                uint64_t a, uint64_t b, int64_t t) {
  // A gallop's first probe: the answer at the near end (an empty band, a
  // gap that admits nothing) costs one load, mostly a cached one.
  if (kGallop == kGallopUp && a < b && !before_time<kUpper>(__ldg(times + a), t)) return a;
  if (kGallop == kGallopDown && a < b && before_time<kUpper>(__ldg(times + b - 1), t)) return b;
  uint64_t fa = a, fb = b;
  const uint64_t j0 = (a + kCoarse - 1) / kCoarse, j1 = (b + kCoarse - 1) / kCoarse;  // entries inside [a, b)
  if (b - a > 2 * kCoarse) {  // smaller ranges: a few lines of times, searched directly
    uint64_t l = j0, h = j1;  // the first entry not before t is in [l, h]
    if (kGallop == kGallopUp) {
      if (!before_time<kUpper>(__ldg(coarse + j0), t)) {
        h = j0;
      } else {
        uint64_t at = j0, step = 1;
        for (;;) {
          const uint64_t next = at + step;
          if (next >= j1) { l = at + 1; break; }
          if (!before_time<kUpper>(__ldg(coarse + next), t)) { l = at + 1; h = next; break; }
          at = next;
          step *= 2;
        }
      }
    } else if (kGallop == kGallopDown) {
      uint64_t at = j1 - 1, step = 1;
      if (before_time<kUpper>(__ldg(coarse + at), t)) {
        l = j1;
      } else {
        for (;;) {
          if (at < j0 + step) { l = j0; h = at; break; }
          const uint64_t next = at - step;
          if (before_time<kUpper>(__ldg(coarse + next), t)) { l = next + 1; h = at; break; }
          at = next;
          step *= 2;
        }
      }
    }
    while (l < h) {
      const uint64_t m = l + (h - l) / 2;
      if (before_time<kUpper>(__ldg(coarse + m), t)) l = m + 1; else h = m;
    }
    if (l < j1) fb = l * kCoarse;            // that position is not before t
    if (l > j0) fa = (l - 1) * kCoarse + 1;  // the entry before it is
  }
  while (fa < fb) {
    const uint64_t m = fa + (fb - fa) / 2;
    if (before_time<kUpper>(__ldg(times + m), t)) fa = m + 1; else fb = m;
  }
  return fa;
}

// unit53 is walk.unit53: a float64 in [0, 1) from 53 bits, exact.
__device__ __forceinline__ double unit53(uint32_t x0, uint32_t x1) {
  return (double)(((uint64_t)x0 << 21) | (x1 >> 11)) * 0x1p-53;
}

// weighted_pick is walk's weightedPick: the first position of [lo, hi)
// whose prefix sum exceeds base + u * (window weight), else hi-1.
__device__ __forceinline__ uint64_t weighted_pick(const double* __restrict__ cumw, uint64_t a, uint64_t lo, uint64_t hi,
                                                  uint32_t x0, uint32_t x1) {
  const double base = lo > a ? __ldg(cumw + lo - 1) : 0.0;
  const double r = __dadd_rn(base, __dmul_rn(unit53(x0, x1), __dsub_rn(__ldg(cumw + hi - 1), base)));
  uint64_t l = lo, h = hi;
  while (l < h) {
    const uint64_t m = l + (h - l) / 2;
    if (__ldg(cumw + m) <= r) l = m + 1; else h = m;
  }
  return min(l, hi - 1);
}

// TemporalCtx is what a step reads besides the walk's state (registers).
struct TemporalCtx {
  const int64_t* times;
  const int64_t* coarse;
  const uint32_t* bytime;
  const float* weights;
  const double* cumw;
  const double* exp_sums;  // the exponential bias's cell sums (walk/temporalexp.go)
  const uint32_t* next;    // E or null: each position's next window bound (temporal_next_build)
  uint64_t exp_cell;       // their cells' width G
  const WalkParams* P;
  double scale;
  bool backward;
};

// temporal_bias is walk's temporalBias: position k's unnormalised
// probability in window [lo, hi) of the vertex whose edges start at a.
template <int kBias, bool kWeighted>
__device__ __forceinline__ double temporal_bias(const TemporalCtx& C, uint64_t a, uint64_t k, uint64_t lo, uint64_t hi) {
  double b = 1.0;
  if (kBias == kTimeLinear) {
    const uint64_t rank = C.backward ? hi - 1 - k : k - lo;
    b = (double)(hi - lo - rank);
  } else if (kBias == kTimeExponential) {
    const int64_t ref = __ldg(C.times + (C.backward ? hi - 1 : lo));
    double d = __dsub_rn((double)__ldg(C.times + k), (double)ref);
    if (d < 0) d = -d;
    b = det_exp(__ddiv_rn(-d, C.scale));
  }
  if (kWeighted) b = __dmul_rn(b, (double)__ldg(C.weights + a + __ldg(C.bytime + k)));
  return b;
}

// temporal_scan is the exact fallback (walk's zprs with one lane): a
// reservoir over the window in time order, element i on word i%4 of draw
// kFallbackDraw + i/4. It returns lo-1 when every bias is zero (the walk
// ends there, as on the CPU).
template <int kBias, bool kWeighted>
__device__ uint64_t temporal_scan(const TemporalCtx& C, uint64_t a, uint64_t lo, uint64_t hi, uint64_t seed,
                                  uint64_t walk, uint32_t step) {
  double run = 0;
  uint64_t pick = ~0ull;
  uint4 w = make_uint4(0, 0, 0, 0);
  for (uint64_t i = 0; i < hi - lo; i++) {
    if ((i & 3) == 0) w = draw(seed, walk, step, kFallbackDraw + (uint32_t)(i >> 2));
    const double b = temporal_bias<kBias, kWeighted>(C, a, lo + i, lo, hi);
    if (!(b > 0)) continue;
    run = __dadd_rn(run, b);
    if (__dmul_rn(__dmul_rn((double)word(w, (uint32_t)(i & 3)), 0x1p-32), run) < b) pick = i;
  }
  return pick == ~0ull ? ~0ull : lo + pick;
}

// time_key is walk.timeKey: t + 2^63 as an unsigned integer, order-preserving.
__device__ __forceinline__ uint64_t time_key(int64_t t) { return (uint64_t)t ^ 0x8000000000000000ull; }
__device__ __forceinline__ int64_t key_time(uint64_t u) { return (int64_t)(u ^ 0x8000000000000000ull); }

// exp_pick_forward is walk.expPickForward: in one cell's part [lo, hi) of
// a window, r = base + u * (S[lo] - base) and the last position with
// S[k] > r (the forward sums do not increase), galloping from lo; ~0 when
// the part weighs nothing.
__device__ __forceinline__ uint64_t exp_pick_forward(const double* __restrict__ S, uint64_t lo, uint64_t hi, double base,
                                                     double u) {
  const double m = __dsub_rn(__ldg(S + lo), base);
  if (!(m > 0)) return ~0ull;
  const double r = __dadd_rn(base, __dmul_rn(u, m));
  uint64_t at = lo, step = 1, l = lo + 1, h = hi;
  for (;;) {
    const uint64_t next = at + step;
    if (next >= hi) { l = at + 1; break; }
    if (__ldg(S + next) <= r) { l = at + 1; h = next; break; }
    at = next;
    step *= 2;
  }
  while (l < h) {
    const uint64_t m2 = l + (h - l) / 2;
    if (__ldg(S + m2) <= r) h = m2; else l = m2 + 1;
  }
  return l - 1;
}

// exp_pick_backward is walk.expPickBackward: r = base + u * (S[hi-1] -
// base) and the first position with S[k] > r (the backward sums do not
// decrease), galloping down from hi-1.
__device__ __forceinline__ uint64_t exp_pick_backward(const double* __restrict__ S, uint64_t lo, uint64_t hi, double base,
                                                      double u) {
  const double m = __dsub_rn(__ldg(S + hi - 1), base);
  if (!(m > 0)) return ~0ull;
  const double r = __dadd_rn(base, __dmul_rn(u, m));
  uint64_t at = hi - 1, step = 1, l = lo, h = hi - 1;
  for (;;) {
    if (at < lo + step) { h = at; break; }
    const uint64_t next = at - step;
    if (__ldg(S + next) <= r) { l = next + 1; h = at; break; }
    at = next;
    step *= 2;
  }
  while (l < h) {
    const uint64_t m2 = l + (h - l) / 2;
    if (__ldg(S + m2) > r) h = m2; else l = m2 + 1;
  }
  return l;
}

// exp_pick_cell is walk.expPickCell: the part whose cumulative mass first
// exceeds unit53(x2, x3) * total among those with mass, else the last
// with mass; -1 when none has any.
__device__ __forceinline__ int exp_pick_cell(const double* cum, int n, double total, uint32_t x2, uint32_t x3) {
  if (!(total > 0)) return -1;
  if (n == 1) return 0;
  const double r = __dmul_rn(unit53(x2, x3), total);
  int last = -1;
  double prev = 0;
  for (int i = 0; i < n; i++) {
    if (cum[i] > prev) {
      last = i;
      if (cum[i] > r) return i;
    }
    prev = cum[i];
  }
  return last;
}

// kMaxExpCells is walk.maxExpCells: the most cells of a window that weigh
// anything (the eighth past the near end's is more than 745 scales away).
constexpr int kMaxExpCells = 8;

// exp_step_cells is exp_step's window over several time cells (rare:
// cells are 256 scales wide): up to kMaxExpCells parts from the near end,
// each weighed by its sums times its det_exp factor to the near end, in
// per-thread arrays (local memory), a part drawn by (x2, x3) and a position
// in it by u. Not inlined, so that its registers and stack do not weigh on
// the common step.
__device__ __noinline__ uint64_t exp_step_cells(const TemporalCtx& C, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi,
                                                double u, uint32_t x2, uint32_t x3) {
  const int64_t* __restrict__ times = C.times;
  const double* __restrict__ S = C.exp_sums;
  const uint64_t G = C.exp_cell;
  double cum[kMaxExpCells], base[kMaxExpCells];
  uint64_t ps[kMaxExpCells], pe[kMaxExpCells];
  double total = 0;
  int n = 0;
  if (!C.backward) {
    const uint64_t nearu = time_key(__ldg(times + lo));
    const uint64_t lastc = time_key(__ldg(times + hi - 1)) / G;
    for (uint64_t p = lo; p < hi && n < kMaxExpCells; n++) {
      const uint64_t c = time_key(__ldg(times + p)) / G;
      uint64_t e;
      double bs = 0;
      if (lastc == c) {
        e = hi;
        if (hi < b && time_key(__ldg(times + hi)) / G == c) bs = __ldg(S + hi);
      } else {
        e = search_time<false, kGallopUp>(times, C.coarse, p, hi, key_time((c + 1) * G));
      }
      const double f = n == 0 ? det_exp(__ddiv_rn((double)(nearu - c * G), C.scale))
                              : det_exp(__ddiv_rn(-(double)(c * G - nearu), C.scale));
      if (f == 0) break;
      total = __dadd_rn(total, __dmul_rn(__dsub_rn(__ldg(S + p), bs), f));
      ps[n] = p;
      pe[n] = e;
      base[n] = bs;
      cum[n] = total;
      p = e;
    }
    const int i = exp_pick_cell(cum, n, total, x2, x3);
    return i < 0 ? ~0ull : exp_pick_forward(S, ps[i], pe[i], base[i], u);
  }
  const uint64_t nearu = time_key(__ldg(times + hi - 1));
  const uint64_t firstc = time_key(__ldg(times + lo)) / G;
  for (uint64_t p = hi; p > lo && n < kMaxExpCells; n++) {
    const uint64_t c = time_key(__ldg(times + p - 1)) / G;
    uint64_t st;
    double bs = 0;
    if (firstc == c) {
      st = lo;
      if (lo > a && time_key(__ldg(times + lo - 1)) / G == c) bs = __ldg(S + lo - 1);
    } else {
      st = search_time<true, kGallopDown>(times, C.coarse, lo, p, key_time(c * G - 1));
    }
    const double f = n == 0 ? det_exp(__ddiv_rn((double)(G - 1 - (nearu - c * G)), C.scale))
                            : det_exp(__ddiv_rn(-(double)(nearu - (c * G + G - 1)), C.scale));
    if (f == 0) break;
    total = __dadd_rn(total, __dmul_rn(__dsub_rn(__ldg(S + p - 1), bs), f));
    ps[n] = st;
    pe[n] = p;
    base[n] = bs;
    cum[n] = total;
    p = st;
  }
  const int i = exp_pick_cell(cum, n, total, x2, x3);
  return i < 0 ? ~0ull : exp_pick_backward(S, ps[i], pe[i], base[i], u);
}

// exp_step is walk's expStep: the exponential draw from the cell sums
// (temporal_exp_build). When the window lies in the near end's cell, as it
// almost always does, the step is the window's far-end time (for its
// cell), the near end's sum and a gallop in the sums, without an exp;
// otherwise exp_step_cells. ~0 when the window's sums are zero (the
// caller's exact scan decides).
__device__ __forceinline__ uint64_t exp_step(const TemporalCtx& C, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi,
                                             uint64_t seed, uint64_t walk, uint32_t step) {
  const int64_t* __restrict__ times = C.times;
  const double* __restrict__ S = C.exp_sums;
  const uint64_t G = C.exp_cell;
  const uint4 w = draw(seed, walk, step, 0);
  const double u = unit53(w.x, w.y);
  if (!C.backward) {
    const uint64_t c0 = time_key(__ldg(times + lo)) / G;
    if (time_key(__ldg(times + hi - 1)) / G == c0) {
      const double bs = hi < b && time_key(__ldg(times + hi)) / G == c0 ? __ldg(S + hi) : 0.0;
      return exp_pick_forward(S, lo, hi, bs, u);
    }
  } else {
    const uint64_t c0 = time_key(__ldg(times + hi - 1)) / G;
    if (time_key(__ldg(times + lo)) / G == c0) {
      const double bs = lo > a && time_key(__ldg(times + lo - 1)) / G == c0 ? __ldg(S + lo - 1) : 0.0;
      return exp_pick_backward(S, lo, hi, bs, u);
    }
  }
  return exp_step_cells(C, a, b, lo, hi, u, w.z, w.w);
}

// next_bound is the window's near end in the time order [a, b) under
// bound t: forward the first position at or after t, backward the first
// after it (walk's lowerTime, upperTime). temporal_next_build stores it
// for every position's time and target, and a step after the first reads
// it there (nx) rather than search.
__device__ __forceinline__ uint64_t next_bound(const int64_t* __restrict__ times, const int64_t* __restrict__ coarse,
                                               uint64_t a, uint64_t b, int64_t t, bool backward) {
  return backward ? search_time<true, kGallopNone>(times, coarse, a, b, t)
                  : search_time<false, kGallopNone>(times, coarse, a, b, t);
}

// temporal_step is walk's temporalStep: the window of the vertex whose time
// order is [a, b) under bound t (none unless bounded: the first step
// without a start time), and the position its draw picks; ~0 when the
// window is empty (or has no weight), which ends the walk. nx is the
// window's near end (next_bound) when the caller knows it from the
// position it took last, else ~0 (the first step, no next table).
template <int kBias, bool kWeighted>
__device__ __forceinline__ uint64_t temporal_step(const TemporalCtx& C, uint64_t a, uint64_t b, int64_t t,
                                                  bool bounded, uint64_t nx, uint64_t seed, uint64_t walk,
                                                  uint32_t step) {
  const WalkParams& P = *C.P;
  const uint64_t flags = P.time_flags;
  uint64_t lo = a, hi = b;
  if (bounded && !C.backward) {
    lo = nx != ~0ull ? nx : next_bound(C.times, C.coarse, a, b, t, false);
    if (flags & kTimeHasMaxGap) hi = search_time<true, kGallopUp>(C.times, C.coarse, lo, b, sat_add(t, P.max_gap));
  } else if (bounded) {
    hi = nx != ~0ull ? nx : next_bound(C.times, C.coarse, a, b, t, true);
    if (flags & kTimeHasMaxGap) lo = search_time<false, kGallopDown>(C.times, C.coarse, a, hi, sat_add(t, -P.max_gap));
  }
  if (lo == hi) return ~0ull;
  const uint64_t n = hi - lo;
  if (kBias == kTimeUniform || (kBias == kTimeLinear && !kWeighted)) {
    const uint4 w = draw(seed, walk, step, 0);
    if (kBias == kTimeLinear) {
      // walk.linearPos: the smaller of a uniform pair of distinct values.
      const uint64_t i = index(w.x, (uint32_t)(n + 1));
      uint64_t j = index(w.y, (uint32_t)n);
      if (j >= i) j++;
      const uint64_t p = min(i, j);
      return C.backward ? hi - 1 - p : lo + p;
    }
    if (kWeighted) return weighted_pick(C.cumw, a, lo, hi, w.x, w.y);
    return lo + index(w.x, (uint32_t)n);
  }
  if (kBias == kTimeExponential) {
    const uint64_t k = exp_step(C, a, b, lo, hi, seed, walk, step);
    if (k != ~0ull) return k;
  } else {
    // Linear, weighted: proposal by weight, accepted by rank.
    for (uint32_t att = 0; att < kMaxRejections; att++) {
      const uint4 w = draw(seed, walk, step, att);
      const uint64_t c = weighted_pick(C.cumw, a, lo, hi, w.x, w.y);
      const uint64_t rank = C.backward ? hi - 1 - c : c - lo;
      if ((uint64_t)w.z * n < (n - rank) << 32) return c;
    }
  }
  return temporal_scan<kBias, kWeighted>(C, a, lo, hi, seed, walk, step);
}

}  // namespace ws
