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
//                        walk_thread), the launch's WalkParams by value
//                        (__grid_constant__: the constant bank, not
//                        registers): a step binary-searches the window in
//                        the vertex's contiguous, sorted times, draws a
//                        position k of it, and takes edge off + bytime[k];
//                        after the first step, the next record of the
//                        position taken last (next[k], 16 bytes) gives the
//                        target, its window's near end and its range of the
//                        time order in one load, so only the first step and
//                        a gap's far end search
//   temporal_next_build  one warp per vertex: next[k], the search a step
//                        bounded by position k's time makes in its target's
//                        time order (the CPU's timeRec.nx), with the target
//                        and its range
//   temporal_next_cells  one thread per record: the exponential bias's
//                        one-cell flag for the run's cell width
//
// Memory: times (int64), bytime (uint32), cumw and exp_sums (float64), E
// each, and next (uint4, E), are global and read through the read-only
// path, with a coarse index of every 32nd time (search_time); a walk's
// state (vertex, time bound, step, its vertex's range and next record's
// bound) is in registers; an exponential window over several time cells
// (rare: cells are 256 scales wide) keeps its parts' bounds and masses in
// per-thread arrays of kMaxExpCells (local memory).
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
  const uint4* next;       // E or null: each position's next record (temporal_next_build)
  uint64_t exp_cell;       // their cells' width G
  int64_t max_gap;
  double scale;
  bool backward, has_gap;
};

// TemporalScan is what temporal_scan reads of TemporalCtx, passed by
// value (a reference would keep the caller's context in local memory).
struct TemporalScan {
  const int64_t* times;
  const uint32_t* bytime;
  const float* weights;
  double scale;
  bool backward;
};

// temporal_bias is walk's temporalBias: position k's unnormalised
// probability in window [lo, hi) of the vertex whose edges start at a.
template <int kBias, bool kWeighted>
__device__ __forceinline__ double temporal_bias(const TemporalScan& C, uint64_t a, uint64_t k, uint64_t lo,
                                                uint64_t hi) {
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
// ends there, as on the CPU). Not inlined: it is rare, and its registers
// (det_exp's among them) would otherwise weigh on every step.
template <int kBias, bool kWeighted>
__device__ __noinline__ uint64_t temporal_scan(TemporalScan C, uint64_t a, uint64_t lo, uint64_t hi, uint64_t seed,
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

// NoFactor is timed_list_scan's factor for a walk without Node2Vec.
struct NoFactor {
  static constexpr bool kApplies = false;
  __device__ __forceinline__ double operator()(uint64_t) const { return 1.0; }
};

// timed_list_scan is walk/cpu's overlayTemporalScan: window [lo, hi) of the
// list's times weighed from the near end (linear: n - p; exponential:
// det_exp of the time distance to the near end, the scan stopping at the
// first zero, as every later one is zero too; times the weight; times
// factor(k), Node2Vec's, where F applies), and the first position whose
// running sum exceeds unit53 of draw d times the total; where rounding
// leaves none, the last that added anything. Two passes over the window
// instead of the CPU's stored sums: the same additions in the same order
// give the same sums. ~0 when the window weighs nothing. Not inlined: it
// is rare.
template <int kBias, bool kWeighted, typename F = NoFactor>
__device__ __noinline__ uint64_t timed_list_scan(const int64_t* __restrict__ times, const float* __restrict__ weights,
                                                 uint64_t lo, uint64_t hi, double scale, bool backward, uint64_t seed,
                                                 uint64_t walk, uint32_t step, uint32_t d, F factor = F{}) {
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
    if (F::kApplies) b = __dmul_rn(b, factor(k));
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

// time_key is walk.timeKey: t + 2^63 as an unsigned integer, order-preserving.
__device__ __forceinline__ uint64_t time_key(int64_t t) { return (uint64_t)t ^ 0x8000000000000000ull; }
__device__ __forceinline__ int64_t key_time(uint64_t u) { return (int64_t)(u ^ 0x8000000000000000ull); }

// kExpProbes is how many cell sums a round of exp_search loads at once:
// independent loads, so a round costs about one memory latency where a
// binary search's probe costs one each.
constexpr int kExpProbes = 8;

// exp_search is walk.expPickForward (kBack false) and walk.expPickBackward
// (true) in one cell's part [lo, hi) of a window: r = base + u * (S[near] -
// base), near = lo forward (the forward sums do not increase from it),
// hi-1 backward (the backward sums do not decrease towards it), and the
// position farthest from near whose sum is still > r; ~0 when the part
// weighs nothing. The sums are monotone from the near end, so that position
// is near plus (minus) the count of the part's positions past near with
// S > r, however it is searched: here by rounds of kExpProbes independent
// loads, galloping outward from the near end (strides 1, P, P^2, ...) and
// then narrowing P+1-fold a round, so that a draw d positions from the near
// end costs about 2 log_P(d) dependent rounds instead of 2 log_2(d) probes.
// Rounds read only positions inside the part.
template <bool kBack>
__device__ __forceinline__ uint64_t exp_search(const double* __restrict__ S, uint64_t lo, uint64_t hi, double base,
                                               double u) {
  constexpr int P = kExpProbes;
  const uint64_t n = hi - lo;
  const double* __restrict__ z = S + (kBack ? hi - 1 : lo);  // the near end
  // T(j): the sum j positions from the near end, or -1 (never > r >= 0)
  // past the part.
  auto T = [&](uint64_t j) -> double { return j < n ? __ldg(kBack ? z - j : z + j) : -1.0; };
  double v[P];
#pragma unroll
  for (int i = 0; i < P; i++) v[i] = T(1 + i);  // issued with the near end's load
  const double m = __dsub_rn(__ldg(z), base);
  if (!(m > 0)) return ~0ull;
  const double r = __dadd_rn(base, __dmul_rn(u, m));
  int c = 0;
#pragma unroll
  for (int i = 0; i < P; i++) c += v[i] > r;
  uint64_t L = c, H = n;  // T(L) > r; T(H) <= r or H = n; the answer is in [L, H)
  if (c == P) {
    for (uint64_t stride = P;; stride *= P) {  // gallop: T(L) > r
#pragma unroll
      for (int i = 0; i < P; i++) v[i] = T(L + stride * (i + 1));
      c = 0;
#pragma unroll
      for (int i = 0; i < P; i++) c += v[i] > r;
      L += stride * c;
      if (c < P) {
        H = min(L + stride, n);
        break;
      }
    }
    while (H - L > 1) {  // narrow: probes at L + s, ..., L + P s cover [L, H)
      const uint64_t s = (H - L + P) / (P + 1);
#pragma unroll
      for (int i = 0; i < P; i++) {
        const uint64_t j = L + s * (i + 1);
        v[i] = j < H ? T(j) : -1.0;
      }
      c = 0;
#pragma unroll
      for (int i = 0; i < P; i++) c += v[i] > r;
      L += s * c;
      H = min(L + s, H);
    }
  }
  return kBack ? hi - 1 - L : lo + L;
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

// TemporalCells is what exp_step_cells reads of TemporalCtx, passed by
// value: a reference would make the caller keep its whole context in
// local memory for the call.
struct TemporalCells {
  const int64_t* times;
  const int64_t* coarse;
  const double* exp_sums;
  uint64_t exp_cell;
  double scale;
  bool backward;
};

// exp_step_cells is exp_step's window over several time cells (rare:
// cells are 256 scales wide): up to kMaxExpCells parts from the near end,
// each weighed by its sums times its det_exp factor to the near end, in
// per-thread arrays (local memory), a part drawn by (x2, x3) and a position
// in it by u. Not inlined, so that its registers and stack do not weigh on
// the common step.
__device__ __noinline__ uint64_t exp_step_cells(TemporalCells C, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi,
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
    return i < 0 ? ~0ull : exp_search<false>(S, ps[i], pe[i], base[i], u);
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
  return i < 0 ? ~0ull : exp_search<true>(S, ps[i], pe[i], base[i], u);
}

// exp_step is walk's expStep: the exponential draw from the cell sums
// (temporal_exp_build). When the window lies in the near end's cell, as it
// almost always does, the step is the near end's sum and a search in the
// sums (exp_search), without an exp; otherwise exp_step_cells. one says
// the next record's flag (kNextOneCell) vouches for that: the positions
// from the window's near end to the vertex's far end are all in one cell,
// so the step reads no time and divides nothing; without it the step
// compares the cells of the window's two end times. ~0 when the window's
// sums are zero (the caller's exact scan decides). d is the Philox draw (0
// but for temporal Node2Vec's proposals).
__device__ __forceinline__ uint64_t exp_step(const TemporalCtx& C, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi,
                                             bool one, uint64_t seed, uint64_t walk, uint32_t step, uint32_t d = 0) {
  const int64_t* __restrict__ times = C.times;
  const double* __restrict__ S = C.exp_sums;
  const uint64_t G = C.exp_cell;
  const uint4 w = draw(seed, walk, step, d);
  const double u = unit53(w.x, w.y);
  if (one) {
    // The part's base: forward the sum just past the window when the
    // window stops before the vertex's end (a gap), backward the sum just
    // before it; those positions are in the window's cell too.
    if (!C.backward) return exp_search<false>(S, lo, hi, hi < b ? __ldg(S + hi) : 0.0, u);
    return exp_search<true>(S, lo, hi, lo > a ? __ldg(S + lo - 1) : 0.0, u);
  }
  if (!C.backward) {
    const uint64_t c0 = time_key(__ldg(times + lo)) / G;
    if (time_key(__ldg(times + hi - 1)) / G == c0) {
      const double bs = hi < b && time_key(__ldg(times + hi)) / G == c0 ? __ldg(S + hi) : 0.0;
      return exp_search<false>(S, lo, hi, bs, u);
    }
  } else {
    const uint64_t c0 = time_key(__ldg(times + hi - 1)) / G;
    if (time_key(__ldg(times + lo)) / G == c0) {
      const double bs = lo > a && time_key(__ldg(times + lo - 1)) / G == c0 ? __ldg(S + lo - 1) : 0.0;
      return exp_search<true>(S, lo, hi, bs, u);
    }
  }
  return exp_step_cells(TemporalCells{C.times, C.coarse, C.exp_sums, C.exp_cell, C.scale, C.backward}, a, b, lo, hi, u,
                        w.z, w.w);
}

// The next record of time-order position k (temporal_next_build), for a
// walk that takes k: x its target w, y the near end of w's next window
// (next_bound under k's time; bits 0-30) and kNextOneCell (bit 31: the
// exponential bias's cells, temporal_next_cells), z and w w's time order
// [a, b). 16 bytes, one load: a step after the first reads nothing else to
// find its window, and the draw's loads depend on that one load only.
constexpr uint32_t kNextOneCell = 1u << 31, kNextPos = kNextOneCell - 1;

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

// temporal_window is walk's window: [lo, hi) of the time order [a, b)
// under bound t (all of it unless bounded), its near end from the next
// record's y when known, else searched; a gap bounds the far end.
__device__ __forceinline__ void temporal_window(const TemporalCtx& C, uint64_t a, uint64_t b, int64_t t, bool bounded,
                                                bool known, uint32_t nxw, uint64_t& lo, uint64_t& hi) {
  lo = a;
  hi = b;
  if (bounded && !C.backward) {
    lo = known ? nxw & kNextPos : next_bound(C.times, C.coarse, a, b, t, false);
    if (C.has_gap) hi = search_time<true, kGallopUp>(C.times, C.coarse, lo, b, sat_add(t, C.max_gap));
  } else if (bounded) {
    hi = known ? nxw & kNextPos : next_bound(C.times, C.coarse, a, b, t, true);
    if (C.has_gap) lo = search_time<false, kGallopDown>(C.times, C.coarse, a, hi, sat_add(t, -C.max_gap));
  }
}

// temporal_step is walk's temporalStep: the window of the vertex whose time
// order is [a, b) under bound t (none unless bounded: the first step
// without a start time), and the position its draw picks; ~0 when the
// window is empty (or has no weight), which ends the walk. known says nxw
// is the next record's y for the position taken last (the window's near
// end and the one-cell flag); otherwise (the first step, no next table)
// the near end is searched.
//
// With list, C holds a live graph's timed lists (overlaytemporal.cuh) and
// [a, b) is one of them: the step is walk/cpu's overlayTemporalDraw, which
// differs from the base's only where a weighted window weighs nothing (no
// edge) and in the exact fallback (timed_list_scan on the lists' weights
// lweights, draw kFallbackDraw after the exponential draw, kMaxRejections
// after linear's rejections).
template <int kBias, bool kWeighted>
__device__ __forceinline__ uint64_t temporal_step(const TemporalCtx& C, uint64_t a, uint64_t b, int64_t t,
                                                  bool bounded, bool known, uint32_t nxw, uint64_t seed, uint64_t walk,
                                                  uint32_t step, bool list = false, const float* lweights = nullptr) {
  uint64_t lo, hi;
  temporal_window(C, a, b, t, bounded, known, nxw, lo, hi);
  if (lo == hi) return ~0ull;
  const uint64_t n = hi - lo;
  if (kWeighted && kBias != kTimeExponential && list &&
      !(__ldg(C.cumw + hi - 1) > (lo > a ? __ldg(C.cumw + lo - 1) : 0.0)))
    return ~0ull;  // a list's window of weight 0: no edge, as on the CPU
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
    const uint64_t k = exp_step(C, a, b, lo, hi, bounded && known && (nxw & kNextOneCell), seed, walk, step);
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
  if (list)
    return timed_list_scan<kBias, kWeighted>(C.times, lweights, lo, hi, C.scale, C.backward, seed, walk, step,
                                             kBias == kTimeExponential ? kFallbackDraw : kMaxRejections);
  return temporal_scan<kBias, kWeighted>(TemporalScan{C.times, C.bytime, C.weights, C.scale, C.backward}, a, lo, hi,
                                         seed, walk, step);
}

// BaseAdj is Node2Vec's class test on the base graph: whether prev (whose
// sorted targets are [pa, pb)) has an edge to x. The temporal Node2Vec
// steps take the test as a functor, so a live graph's kernel passes the
// snapshot's (walk.cu's SnapAdj).
struct BaseAdj {
  const uint32_t* __restrict__ targets;
  uint64_t pa, pb;
  __device__ __forceinline__ bool operator()(uint32_t x) const { return has_edge(targets, pa, pb, x); }
};

// temporal_n2v_reject is walk/cpu's temporalNode2VecStep by rejection: attempt
// att proposes a position of window [lo, hi) (of the time order [a, b)) by
// the time bias with draw 2att as temporal_step draws (by weight alone for
// the weighted linear bias, then accepted by rank on draw 2att+1's x), and
// keeps it when draw 2att+1's next word is under the threshold accept[c] of
// its target's class c against prev (Node2Vec's f/fmax; has is the class
// test). ~1 after kMaxRejections rejections or on an exponential window
// whose sums are zero: the exact reservoir (temporal_n2v_step / _warp, a
// list's scan) decides. one is the next record's one-cell flag (exp_step).
// ltg, when not null, holds the positions' targets (a live graph's timed
// list, which C's arrays then describe); list also ends the walk on a
// window of weight zero (walk/cpu's overlayTemporalN2V).
template <int kBias, bool kWeighted, typename H>
__device__ __forceinline__ uint64_t temporal_n2v_reject(const TemporalCtx& C, const uint32_t* __restrict__ ltg,
                                                        const uint32_t* __restrict__ targets, uint64_t a, uint64_t b,
                                                        uint64_t lo, uint64_t hi, bool one, uint32_t prev,
                                                        const uint64_t* accept, H has, uint64_t seed, uint64_t walk,
                                                        uint32_t step) {
  const uint64_t n = hi - lo;
  if (kWeighted && kBias != kTimeExponential && ltg &&
      !(__ldg(C.cumw + hi - 1) > (lo > a ? __ldg(C.cumw + lo - 1) : 0.0)))
    return ~0ull;  // a list's window of weight 0: no edge, as on the CPU
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    uint64_t k;
    if (kBias == kTimeExponential) {
      k = exp_step(C, a, b, lo, hi, one, seed, walk, step, 2 * att);
      if (k == ~0ull) return ~1ull;
    } else {
      const uint4 w = draw(seed, walk, step, 2 * att);
      if (kWeighted) {
        k = weighted_pick(C.cumw, a, lo, hi, w.x, w.y);
      } else if (kBias == kTimeLinear) {
        const uint64_t i = index(w.x, (uint32_t)(n + 1));
        uint64_t j = index(w.y, (uint32_t)n);
        if (j >= i) j++;
        const uint64_t p = min(i, j);
        k = C.backward ? hi - 1 - p : lo + p;
      } else {
        k = lo + index(w.x, (uint32_t)n);
      }
    }
    const uint4 z = draw(seed, walk, step, 2 * att + 1);
    uint32_t x = z.x;
    if (kBias == kTimeLinear && kWeighted) {
      const uint64_t rank = C.backward ? hi - 1 - k : k - lo;
      if ((uint64_t)z.x * n >= (n - rank) << 32) continue;
      x = z.y;
    }
    // walk/cpu's n2vAccepts: the class test only for a word between the
    // neighbour's and the outward threshold.
    const uint32_t tg = ltg       ? __ldg(ltg + k)
                        : C.next ? __ldg(C.next + k).x
                                 : __ldg(targets + a + __ldg(C.bytime + k));
    const uint64_t u = x, t1 = accept[1], t2 = accept[2];
    bool ok;
    if (tg == prev) {
      ok = u < accept[0];
    } else if (u < min(t1, t2)) {
      ok = true;
    } else if (u >= max(t1, t2)) {
      ok = false;
    } else {
      ok = u < (has(tg) ? t1 : t2);
    }
    if (ok) return k;
  }
  return ~1ull;
}

// temporal_n2v_step is walk/cpu's temporalNode2VecStep's exact fallback, a
// temporal Node2Vec step after the first: over the window, each edge's time
// bias (times its weight) times Node2Vec's factor f of its target against
// prev (f[0] back to prev, f[1] to a neighbour of prev (has), f[2]
// otherwise), drawn by the 32-lane ZPRS reservoir, element i's word being
// word i%4 of draw kTemporalN2VFallbackDraw + i/4. One thread runs the
// lanes one after another (lane j owns elements j, j+32, ...: walk/cpu's
// zprs gives the same pick in that order, TestZPRSMatchesLaneMajorOrder),
// each lane's sum added to those before it in lane order, so the state is
// a few registers. ~0 when the window is empty or weighs nothing. Not
// inlined: O(window) with a class test an edge.
template <int kBias, bool kWeighted, typename H>
__device__ __noinline__ uint64_t temporal_n2v_step(TemporalScan S, const uint32_t* __restrict__ targets, uint64_t a,
                                                   uint64_t lo, uint64_t hi, uint32_t prev, H has, double f0, double f1,
                                                   double f2, uint64_t seed, uint64_t walk, uint32_t step) {
  if (lo == hi) return ~0ull;
  const uint64_t n = hi - lo;
  const uint64_t k = n < 32 ? n : 32;
  double before = 0;
  uint64_t pick = ~0ull;
  for (uint64_t j = 0; j < k; j++) {
    double run = before, lsum = 0;
    for (uint64_t i = j; i < n; i += k) {
      const uint64_t e = lo + i;
      const uint32_t x = __ldg(targets + a + __ldg(S.bytime + e));
      const double f = x == prev ? f0 : has(x) ? f1 : f2;
      const double w = __dmul_rn(temporal_bias<kBias, kWeighted>(S, a, e, lo, hi), f);
      lsum = __dadd_rn(lsum, w);
      if (w > 0) {
        run = __dadd_rn(run, w);
        const uint4 d = draw(seed, walk, step, kTemporalN2VFallbackDraw + (uint32_t)(i >> 2));
        if (__dmul_rn(__dmul_rn((double)word(d, (uint32_t)(i & 3)), 0x1p-32), run) < w) pick = e;
      }
    }
    before = __dadd_rn(before, lsum);
  }
  return pick;
}

// kN2VWarpWindow: from this window length on, a temporal Node2Vec step that
// temporal_n2v_reject left undecided is taken by the whole warp
// (temporal_n2v_warp) rather than by its walk's thread: a hub's window costs
// one thread O(window) class tests, which the warp's 32 lanes split.
constexpr uint64_t kN2VWarpWindow = 64;

// temporal_n2v_warp is temporal_n2v_step for a window of at least 32
// edges taken by a warp's lanes together, every lane of mask calling it
// with the same arguments: lane j is ZPRS lane j (elements j, j+32, ...).
// Pass 1 sums each lane's weights; each lane then adds the sums of the
// lanes before it one by one in lane order (the serial step's additions,
// so the same bits); pass 2 runs each lane's reservoir from there, and the
// highest lane that kept an element wins, as the serial order's last
// replacement does. The weights are computed twice rather than held.
template <int kBias, bool kWeighted, typename H>
__device__ __noinline__ uint64_t temporal_n2v_warp(unsigned mask, unsigned lane, TemporalScan S,
                                                   const uint32_t* __restrict__ targets, uint64_t a, uint64_t lo,
                                                   uint64_t hi, uint32_t prev, H has, double f0, double f1, double f2,
                                                   uint64_t seed, uint64_t walk, uint32_t step) {
  const uint64_t n = hi - lo;
  double lsum = 0;
  for (uint64_t i = lane; i < n; i += 32) {
    const uint64_t e = lo + i;
    const uint32_t x = __ldg(targets + a + __ldg(S.bytime + e));
    const double f = x == prev ? f0 : has(x) ? f1 : f2;
    lsum = __dadd_rn(lsum, __dmul_rn(temporal_bias<kBias, kWeighted>(S, a, e, lo, hi), f));
  }
  double run = 0;
  for (unsigned j = 0; j < 31; j++) {
    const double x = __shfl_sync(mask, lsum, j);
    if (j < lane) run = __dadd_rn(run, x);
  }
  uint64_t pick = ~0ull;
  for (uint64_t i = lane; i < n; i += 32) {
    const uint64_t e = lo + i;
    const uint32_t x = __ldg(targets + a + __ldg(S.bytime + e));
    const double f = x == prev ? f0 : has(x) ? f1 : f2;
    const double w = __dmul_rn(temporal_bias<kBias, kWeighted>(S, a, e, lo, hi), f);
    if (w > 0) {
      run = __dadd_rn(run, w);
      const uint4 d = draw(seed, walk, step, kTemporalN2VFallbackDraw + (uint32_t)(i >> 2));
      if (__dmul_rn(__dmul_rn((double)word(d, (uint32_t)(i & 3)), 0x1p-32), run) < w) pick = e;
    }
  }
  const unsigned kept = __ballot_sync(mask, pick != ~0ull);
  if (kept == 0) return ~0ull;
  return __shfl_sync(mask, pick, 31 - __clz(kept));
}

// temporal_ctx is TemporalCtx from the launch's parameters.
__device__ __forceinline__ TemporalCtx temporal_ctx(const WalkParams* __restrict__ P) {
  TemporalCtx C;
  C.times = P->times;
  C.coarse = P->coarse;
  C.bytime = P->bytime;
  C.weights = P->weights;
  C.cumw = P->cumw;
  C.exp_sums = P->exp_sums;
  C.next = P->next;
  C.exp_cell = P->exp_cell;
  C.max_gap = P->max_gap;
  C.scale = P->time_scale;
  C.backward = (P->time_flags & kTimeBackward) != 0;
  C.has_gap = (P->time_flags & kTimeHasMaxGap) != 0;
  return C;
}

// temporal_step_slow is temporal_step for the exponential kernels' steps
// that exp_step_fast does not take (the first step, a gap, a window over
// several cells or without the flag, the exact scan), from the launch's
// parameter block P (__grid_constant__, so its fields are read from the
// constant bank). Inlined: as an out-of-line call (ABI) it made the loop
// keep its whole state in local memory (ptxas, sm_90: 120 local loads and
// stores in the loop's body, 79 inlined, at the 64-register cap).
template <int kBias, bool kWeighted>
__device__ __forceinline__ uint64_t temporal_step_slow(const WalkParams* P, uint64_t a, uint64_t b, int64_t t,
                                                    bool bounded, bool known, uint32_t nxw, uint64_t seed,
                                                    uint64_t walk, uint32_t step) {
  return temporal_step<kBias, kWeighted>(temporal_ctx(P), a, b, t, bounded, known, nxw, seed, walk, step);
}

// exp_step_fast is the exponential step after the first when the next
// record vouches for one cell and there is no gap (every step of a walk
// without a gap over cells of 256 scales, but for the rare window past a
// cell boundary): the window is [nx, b) forward, [a, nx) backward, its
// part's base 0, and the draw one exp_search. ~0 for an empty window (the
// walk ends); ~1 when its sums are zero, for the slow path's exact scan.
template <bool kBack>
__device__ __forceinline__ uint64_t exp_step_fast(const double* __restrict__ S, uint64_t a, uint64_t b, uint32_t nxw,
                                                  uint64_t seed, uint64_t walk, uint32_t step) {
  const uint64_t lo = kBack ? a : nxw & kNextPos, hi = kBack ? nxw & kNextPos : b;
  if (lo == hi) return ~0ull;
  const uint4 w = draw(seed, walk, step, 0);
  const uint64_t k = exp_search<kBack>(S, lo, hi, 0.0, unit53(w.x, w.y));
  return k == ~0ull ? ~1ull : k;
}

}  // namespace ws
