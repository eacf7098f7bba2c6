// samplers.cuh: neighbour samplers, the device twins of walk/cpu/stepper.go.
//
// O(1) samplers (uniform, alias, Node2Vec rejection) run on one thread: a
// step is a constant number of loads whatever the degree, so a lane is a
// whole sampler. The reservoir samplers (ZPRS, DPRS) cost O(degree) and run
// on a warp (k = 32) or on the whole block (k = kBlockThreads), FlowWalker
// sections 4.1-4.2. Every array named here lives in global memory unless the
// comment says shared; per-lane state is registers.
#pragma once
#include "params.cuh"
#include "rng.cuh"

namespace ws {

constexpr int kBlockThreads = 256;  // reservoir kernel: threads per block (one block sampler)
constexpr int kWarps = kBlockThreads / 32;
constexpr unsigned kFull = 0xFFFFFFFFu;

// has_edge: binary search for x in the sorted adjacency targets[lo, hi).
__device__ __forceinline__ bool has_edge(const uint32_t* __restrict__ targets, uint64_t lo, uint64_t hi, uint32_t x) {
  const uint64_t end = hi;
  while (lo < hi) {
    uint64_t m = lo + ((hi - lo) >> 1);
    if (__ldg(targets + m) < x) lo = m + 1; else hi = m;
  }
  return lo < end && __ldg(targets + lo) == x;
}

// pick_static: one O(1) draw from the static bias of the adjacency at off
// with degree deg: uniform on word x, or the packed alias column x with coin
// y. Same arithmetic as walk.stepper.static, so walks match bit for bit.
__device__ __forceinline__ uint32_t pick_static(const uint32_t* __restrict__ targets, const AliasEntry* __restrict__ alias,
                                                uint64_t off, uint32_t deg, uint32_t x, uint32_t y) {
  const uint32_t col = index(x, deg);
  if (alias == nullptr) return __ldg(targets + off + col);
  const uint4 a = __ldg(reinterpret_cast<const uint4*>(alias + off + col));
  return unit24(y) < __uint_as_float(a.x) ? a.y : a.z;
}

// unit32 maps a word to [0, 1) (round toward zero keeps it below 1) for the
// reservoir comparisons u * running_sum < bias.
__device__ __forceinline__ float unit32(uint32_t x) { return __uint2float_rz(x) * 0x1p-32f; }

// BiasCtx is everything a dynamic bias needs at one step (registers).
struct BiasCtx {
  const float* __restrict__ weights;   // null when unweighted
  const uint8_t* __restrict__ labels;  // MetaPath only
  const uint32_t* __restrict__ targets;   // the current vertex's
  const uint32_t* __restrict__ ptargets;  // the previous vertex's (Node2Vec)
  uint32_t want;                       // MetaPath label of this step
  bool metapath;
  bool n2v;                            // Node2Vec with a previous vertex
  uint32_t prev;
  uint64_t poff, pend;                 // previous vertex's adjacency
  float f[3];                          // Node2Vec 1/p, 1, 1/q
};

__device__ __forceinline__ float bias_of(const BiasCtx& c, uint64_t e) {
  if (c.metapath && __ldg(c.labels + e) != c.want) return 0.f;
  float b = c.weights ? __ldg(c.weights + e) : 1.f;
  if (c.n2v) {
    const uint32_t x = __ldg(c.targets + e);
    b *= x == c.prev ? c.f[0] : has_edge(c.ptargets, c.poff, c.pend, x) ? c.f[1] : c.f[2];
  }
  return b;
}

// The float scans below stay hand-written rather than CUB's WarpScan and
// BlockScan: float addition is not associative, the order of additions is
// part of what the reservoir samplers compute (and of their chi-square
// tests' reference), and CUB does not promise an order across versions.
// The integer scans of scan.cuh use CUB.
__device__ __forceinline__ float warp_inclusive_scan(float v, unsigned lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    float t = __shfl_up_sync(kFull, v, o);
    if (lane >= (unsigned)o) v += t;
  }
  return v;
}

// Reservoir sampling by jumps. A size-one weighted reservoir (Chao) that
// holds an element at running weight W keeps it past a later running weight
// S with probability W/S, so instead of one uniform per element the next
// replacement is where the running weight first reaches T = W/u, u uniform
// in (0, 1] (Efraimidis-Spirakis "exponential jumps"): P(T > S_{i-1}) =
// W/S_{i-1} and P(T <= S_i | T > S_{i-1}) = w_i/S_i, exactly Chao's step.
// A lane therefore draws a few numbers per step (about ln(S_end/S_start))
// instead of one per element, and pass 2 of ZPRS becomes a running sum.
__device__ __forceinline__ float unit_open(uint32_t x) { return __uint2float_rn((x >> 8) + 1) * (1.0f / 16777216.0f); }

// LaneWords hands a lane its m-th uniform of the step: word m%4 of draw
// kReservoirDraw + lane + k*(m/4) of (seed, walk, step). Deterministic for
// the step; lanes never share a draw. (The counter is the whole RNG state:
// Philox needs nothing in shared or global memory.)
struct LaneWords {
  uint64_t seed, walk;
  uint32_t step, lane, k, m;
  uint4 w;
  __device__ __forceinline__ float next() {
    if ((m & 3) == 0) w = draw(seed, walk, step, kReservoirDraw + lane + k * (m >> 2));
    return unit_open(word(w, m++ & 3));
  }
};

// BlockScratch is the block sampler's shared memory.
struct BlockScratch {
  float warp_sums[kWarps];
  int best;
  uint32_t pick;
  float cum;
};

// block_inclusive_scan over kBlockThreads values; total gets the block sum.
// All threads must call it; it leaves scratch free for reuse.
__device__ __forceinline__ float block_inclusive_scan(float v, BlockScratch& sh, float& total) {
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float incl = warp_inclusive_scan(v, lane);
  if (lane == 31) sh.warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    float t = lane < kWarps ? sh.warp_sums[lane] : 0.f;
    t = warp_inclusive_scan(t, lane);
    if (lane < kWarps) sh.warp_sums[lane] = t;
  }
  __syncthreads();
  const float before = warp > 0 ? sh.warp_sums[warp - 1] : 0.f;
  total = sh.warp_sums[kWarps - 1];
  __syncthreads();
  return incl + before;
}

// block_highest returns the pick of the highest thread whose pick is set.
__device__ __forceinline__ uint32_t block_highest(uint32_t pick, BlockScratch& sh) {
  if (threadIdx.x == 0) sh.best = -1;
  __syncthreads();
  if (pick != kNoTask) atomicMax(&sh.best, (int)threadIdx.x);
  __syncthreads();
  if ((int)threadIdx.x == sh.best) sh.pick = pick;
  __syncthreads();
  const uint32_t out = sh.best < 0 ? kNoTask : sh.pick;
  __syncthreads();
  return out;
}

// Vectorised bias. The reservoir samplers read the adjacency in aligned
// 16-byte chunks (four columns: one float4 of weights, one word of labels,
// one uint4 of targets), so a lane issues one load per four edges. Chunk c
// covers global edges 4c..4c+3; columns outside [lo, hi) get bias 0. The
// engine pads every edge array to a multiple of 64 bytes, so the last chunk
// stays inside its allocation.
__device__ __forceinline__ float node2vec_factor(const BiasCtx& c, uint32_t x) {
  return x == c.prev ? c.f[0] : has_edge(c.ptargets, c.poff, c.pend, x) ? c.f[1] : c.f[2];
}

template <bool kN2V>
__device__ __forceinline__ float4 bias4(const BiasCtx& c, uint64_t chunk, uint64_t lo, uint64_t hi) {
  const uint64_t e0 = chunk << 2;
  float m[4];
#pragma unroll
  for (int q = 0; q < 4; q++) m[q] = (e0 + q >= lo && e0 + q < hi) ? 1.f : 0.f;
  if (c.metapath) {
    const uint32_t l4 = __ldg(reinterpret_cast<const uint32_t*>(c.labels) + chunk);
#pragma unroll
    for (int q = 0; q < 4; q++)
      if (((l4 >> (8 * q)) & 0xFFu) != c.want) m[q] = 0.f;
    if (m[0] + m[1] + m[2] + m[3] == 0.f) return make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float4 b = make_float4(m[0], m[1], m[2], m[3]);
  if (c.weights) {
    const float4 w = __ldg(reinterpret_cast<const float4*>(c.weights) + chunk);
    b.x *= w.x;
    b.y *= w.y;
    b.z *= w.z;
    b.w *= w.w;
  }
  if (kN2V && c.n2v) {
    const uint4 t = __ldg(reinterpret_cast<const uint4*>(c.targets) + chunk);
    if (b.x > 0.f) b.x *= node2vec_factor(c, t.x);
    if (b.y > 0.f) b.y *= node2vec_factor(c, t.y);
    if (b.z > 0.f) b.z *= node2vec_factor(c, t.z);
    if (b.w > 0.f) b.w *= node2vec_factor(c, t.w);
  }
  return b;
}

__device__ __forceinline__ float at4(const float4& b, int q) { return q == 0 ? b.x : q == 1 ? b.y : q == 2 ? b.z : b.w; }

// Group operations of a sampler: a warp (kBlock false, k = 32 lanes) or the
// whole block (k = kBlockThreads). lane is the thread's index in the group.
template <bool kBlock>
struct Group {
  static constexpr uint32_t k = kBlock ? kBlockThreads : 32;
  // exclusive_scan returns the sum of v over lower lanes; total the sum.
  static __device__ __forceinline__ float exclusive_scan(float v, unsigned lane, BlockScratch& sh, float& total) {
    float incl;
    if (kBlock) {
      incl = block_inclusive_scan(v, sh, total);
    } else {
      incl = warp_inclusive_scan(v, lane);
      total = __shfl_sync(kFull, incl, 31);
    }
    return incl - v;
  }
  // highest returns the pick of the highest lane whose pick is set.
  static __device__ __forceinline__ uint32_t highest(uint32_t pick, BlockScratch& sh) {
    if (kBlock) return block_highest(pick, sh);
    const unsigned m = __ballot_sync(kFull, pick != kNoTask);
    return m == 0 ? kNoTask : __shfl_sync(kFull, pick, 31 - __clz(m));
  }
  // first finds the lowest lane with has set and broadcasts its pos and
  // cum; false when no lane has one.
  static __device__ __forceinline__ bool first(bool has, unsigned lane, int& pos, float& cum, BlockScratch& sh) {
    if (!kBlock) {
      const unsigned m = __ballot_sync(kFull, has);
      if (m == 0) return false;
      const int l = __ffs(m) - 1;
      pos = __shfl_sync(kFull, pos, l);
      cum = __shfl_sync(kFull, cum, l);
      return true;
    }
    if (lane == 0) sh.best = kBlockThreads;
    __syncthreads();
    if (has) atomicMin(&sh.best, (int)lane);
    __syncthreads();
    const int l = sh.best;
    if ((int)lane == l) {
      sh.pick = (uint32_t)pos;
      sh.cum = cum;
    }
    __syncthreads();
    const bool found = l < kBlockThreads;
    if (found) {
      pos = (int)sh.pick;
      cum = sh.cum;
    }
    __syncthreads();
    return found;
  }
};

// zprs: zig-zag parallel reservoir sampling (FlowWalker Algorithm 4) by a
// group over the d edges at off. Lane j owns chunks j, j+k, j+2k, ... of
// the adjacency; pass 1 sums its biases, an exclusive scan gives the weight
// before it in the zig-zag order (lane by lane), pass 2 runs the lane's own
// reservoir (by jumps) from that weight, and the highest lane that kept a
// column wins. Returns the column or kNoTask when every bias is zero.
template <bool kBlock, bool kN2V>
__device__ uint32_t zprs(const BiasCtx& c, uint64_t off, uint32_t d, LaneWords rng, unsigned lane, BlockScratch& sh) {
  using G = Group<kBlock>;
  const uint64_t hi = off + d, c0 = off >> 2, nch = ((hi - 1) >> 2) - c0 + 1;
  float s = 0.f;
#pragma unroll 2
  for (uint64_t r = lane; r < nch; r += G::k) {
    const float4 b = bias4<kN2V>(c, c0 + r, off, hi);
    s += (b.x + b.y) + (b.z + b.w);
  }
  float total;
  float run = G::exclusive_scan(s, lane, sh, total);
  if (total <= 0.f) return kNoTask;
  uint32_t pick = kNoTask;
  // With jumps a lane knows before pass 2 whether its reservoir will
  // replace anything: only if the threshold is within its own weight. Most
  // lanes (all but about ln k + 1 of k, in expectation) skip pass 2, and a
  // lane that scans stops after its last replacement; the decisions are
  // those of the full scan.
  const float end = run + s;
  float target = run > 0.f ? run / rng.next() : 0.f;
  bool scan = s > 0.f && target <= end;
  for (uint64_t r = lane; scan && r < nch; r += G::k) {
    const float4 b = bias4<kN2V>(c, c0 + r, off, hi);
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const float x = at4(b, q);
      if (scan && x > 0.f) {
        run += x;
        if (run >= target) {
          pick = (uint32_t)(((c0 + r) << 2) + q - off);
          target = run / rng.next();
          scan = target <= end;
        }
      }
    }
  }
  return G::highest(pick, sh);
}

// dprs: direct parallel reservoir sampling (FlowWalker Algorithm 3) by a
// group: k consecutive chunks a round, an inclusive scan a round; the
// reservoir (by jumps, one threshold and one random stream for the group)
// moves its selection to the first column whose running weight reaches the
// threshold, possibly several times in a round.
template <bool kBlock, bool kN2V>
__device__ uint32_t dprs(const BiasCtx& c, uint64_t off, uint32_t d, LaneWords rng, unsigned lane, BlockScratch& sh) {
  using G = Group<kBlock>;
  const uint64_t hi = off + d, c0 = off >> 2, nch = ((hi - 1) >> 2) - c0 + 1;
  float before = 0.f, target = 0.f;
  uint32_t pick = kNoTask;
  for (uint64_t r0 = 0; r0 < nch; r0 += G::k) {
    const uint64_t r = r0 + lane;
    const float4 b = r < nch ? bias4<kN2V>(c, c0 + r, off, hi) : make_float4(0.f, 0.f, 0.f, 0.f);
    float total;
    const float mine = (b.x + b.y) + (b.z + b.w);
    const float base = before + G::exclusive_scan(mine, lane, sh, total);
    int last = -1;  // position (lane*4 + q) of the last selection this round
    for (;;) {
      int pos = -1;
      float cum = base, at = 0.f;
#pragma unroll
      for (int q = 0; q < 4; q++) {
        const float x = at4(b, q);
        cum += x;
        if (pos < 0 && x > 0.f && (int)(lane * 4 + q) > last && cum >= target) {
          pos = (int)(lane * 4 + q);
          at = cum;
        }
      }
      if (!G::first(pos >= 0, lane, pos, at, sh)) break;
      last = pos;
      pick = (uint32_t)(((c0 + r0 + (uint64_t)(pos >> 2)) << 2) + (pos & 3) - off);
      target = at / rng.next();
    }
    before += total;
  }
  return pick;
}

// node2vec_scan: the exact sequential fallback after kMaxRejections
// rejected proposals: a one-lane reservoir over all d edges with bias
// w(e) f(e) in float64, element i on word i%4 of draw kFallbackDraw + i/4,
// the CPU's arithmetic to the letter, so even these steps match it.
__device__ uint32_t node2vec_scan(const float* __restrict__ weights, const uint32_t* __restrict__ targets,
                                  const uint32_t* __restrict__ ptargets, uint64_t off,
                                  uint32_t d, uint32_t prev, uint64_t poff, uint64_t pend, const double f[3],
                                  uint64_t seed, uint64_t walk, uint32_t step) {
  double run = 0;
  uint32_t pick = 0;
  uint4 w = make_uint4(0, 0, 0, 0);
  for (uint32_t i = 0; i < d; i++) {
    if ((i & 3) == 0) w = draw(seed, walk, step, kFallbackDraw + (i >> 2));
    const uint32_t x = __ldg(targets + off + i);
    const double base = weights ? (double)__ldg(weights + off + i) : 1.0;
    // _rn intrinsics: no FMA contraction, the CPU's roundings exactly.
    const double b = __dmul_rn(base, x == prev ? f[0] : has_edge(ptargets, poff, pend, x) ? f[1] : f[2]);
    if (b <= 0) continue;
    run = __dadd_rn(run, b);
    if (__dmul_rn(__dmul_rn((double)word(w, i & 3), 0x1p-32), run) < b) pick = i;
  }
  return __ldg(targets + off + pick);
}

}  // namespace ws
