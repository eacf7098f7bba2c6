// temporal.cuh: temporal walks (issue 38), the device twin of
// walk/timeparams.go, whose header comment is the specification: the same
// window, the same Philox draws, the same float64 arithmetic rounded the
// same way (the _rn intrinsics: never an FMA), so a walk here equals the
// CPU engine's vertex for vertex and time for time.
//
//   temporal_cumw_build  one thread per vertex: the inclusive prefix sums of
//                        its weights in time order (float64, in order, as
//                        walk.CPU.windowWeights adds them)
//   walk_temporal_*      persistent blocks, one walk per thread (as
//                        walk_thread): a step binary-searches the window in
//                        the vertex's contiguous, sorted times, draws a
//                        position k of it, and takes edge off + bytime[k]
//
// Memory: times (int64), bytime (uint32) and cumw (float64), E each, are
// global and read through the read-only path, with a coarse index of every
// 32nd time (search_time); a walk's state (vertex, time
// bound, step) is in registers; the exponential bias's band table (bounds
// and cumulative masses, up to kMaxExpBands + 1 of each) is a per-thread
// array in local memory, of which a step touches the few bands its window
// has; the band offsets and envelopes every step shares come with the
// launch parameters.
#pragma once
#include <stdint.h>

#include "params.cuh"
#include "rng.cuh"

namespace ws {

constexpr int kMaxExpBands = 48;  // walk.MaxExpBands (the params' table size)
// expBandCount's largest K for a window below 2^32 edges: the size of the
// per-thread band arrays.
constexpr int kMaxExpBandsSpec = 32;  // walk.maxExpBands: expBandCount's cap
constexpr int kMaxBandsUsed = (33 * 7 + 9) / 10 + 2 < kMaxExpBandsSpec ? (33 * 7 + 9) / 10 + 2 : kMaxExpBandsSpec;
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

// exp_band_step is walk's expBands + expBandStep: the window cut into bands
// of time distance scale from its near end, a band drawn by mass times
// envelope, an edge of it uniformly (by weight), accepted by its bias over
// the envelope. Returns ~0 after kMaxRejections rejections. Band b is
// positions [bnd[b], bnd[b+1]) forward, [bnd[b+1], bnd[b]) backward, as
// offsets from lo (local memory, see the file comment).
template <bool kWeighted>
__device__ __forceinline__ uint64_t exp_band_step(const TemporalCtx& C, uint64_t a, uint64_t lo, uint64_t hi,
                                                  uint64_t seed, uint64_t walk, uint32_t step) {
  const int64_t* __restrict__ times = C.times;
  const WalkParams& P = *C.P;
  const bool back = C.backward;
  uint32_t bnd[kMaxBandsUsed + 2];
  double cum[kMaxBandsUsed + 1];
  const uint64_t n = hi - lo;
  const int K = min(((64 - __clzll((long long)n)) * 7 + 9) / 10 + 2, kMaxExpBandsSpec);  // walk.expBandCount
  const int64_t ref = __ldg(times + (back ? hi - 1 : lo));
  uint64_t nearp = back ? hi : lo;
  bnd[0] = (uint32_t)(nearp - lo);
  double total = 0;
  int nb = K + 1;
  for (int b = 0; b <= K; b++) {
    const int64_t off = P.exp_offsets[b];
    const int64_t c = back ? sat_add(ref, -off) : sat_add(ref, off);
    double env = P.exp_env[b];
    const int64_t d = (int64_t)((uint64_t)c - (uint64_t)ref);
    if (d != off && d != -off) env = det_exp(__ddiv_rn(-fabs(__dsub_rn((double)c, (double)ref)), C.scale));
    uint64_t far;
    if (b == K) far = back ? lo : hi;
    else if (back) far = search_time<true, kGallopDown>(times, C.coarse, lo, nearp, sat_add(ref, -P.exp_offsets[b + 1]));
    else far = search_time<false, kGallopUp>(times, C.coarse, nearp, hi, sat_add(ref, P.exp_offsets[b + 1]));
    const uint64_t s = back ? far : nearp, e = back ? nearp : far;
    double m = (double)(e - s);
    if (kWeighted && e > s) {
      m = __ldg(C.cumw + e - 1);
      if (s > a) m = __dsub_rn(m, __ldg(C.cumw + s - 1));
    }
    total = __dadd_rn(total, __dmul_rn(m, env));
    cum[b] = total;
    bnd[b + 1] = (uint32_t)(far - lo);
    nearp = far;
    if (far == (back ? lo : hi)) {
      nb = b + 1;
      break;
    }
  }
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    const uint4 w = draw(seed, walk, step, att);
    const double r = __dmul_rn((double)w.x * 0x1p-32, total);
    int b = 0;
    uint64_t s, e;
    for (;;) {
      s = lo + (back ? bnd[b + 1] : bnd[b]);
      e = lo + (back ? bnd[b] : bnd[b + 1]);
      if (b >= nb - 1 || (cum[b] > r && e > s)) break;
      b++;
    }
    if (e == s) continue;  // rounding put r past every non-empty band
    const uint64_t k = kWeighted ? weighted_pick(C.cumw, a, s, e, w.y, w.w) : s + index(w.y, (uint32_t)(e - s));
    const int64_t cut = back ? sat_add(ref, -P.exp_offsets[b]) : sat_add(ref, P.exp_offsets[b]);
    const double acc = det_exp(__ddiv_rn(-fabs(__dsub_rn((double)__ldg(times + k), (double)cut)), C.scale));
    if ((double)w.z < __dmul_rn(acc, 0x1p32)) return k;
  }
  return ~0ull;
}

// temporal_step is walk's temporalStep: the window of the vertex whose time
// order is [a, b) under bound t (none unless bounded: the first step
// without a start time), and the position its draw picks; ~0 when the
// window is empty (or has no weight), which ends the walk.
template <int kBias, bool kWeighted>
__device__ __forceinline__ uint64_t temporal_step(const TemporalCtx& C, uint64_t a, uint64_t b, int64_t t,
                                                  bool bounded, uint64_t seed, uint64_t walk, uint32_t step) {
  const WalkParams& P = *C.P;
  const uint64_t flags = P.time_flags;
  uint64_t lo = a, hi = b;
  if (bounded && !C.backward) {
    lo = search_time<false, kGallopNone>(C.times, C.coarse, a, b, t);
    if (flags & kTimeHasMaxGap) hi = search_time<true, kGallopUp>(C.times, C.coarse, lo, b, sat_add(t, P.max_gap));
  } else if (bounded) {
    hi = search_time<true, kGallopNone>(C.times, C.coarse, a, b, t);
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
    const uint64_t k = exp_band_step<kWeighted>(C, a, lo, hi, seed, walk, step);
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
