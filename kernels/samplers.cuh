// samplers.cuh: neighbour samplers, the device twins of walk/sampler.go.
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
  const uint32_t* __restrict__ targets;
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
    b *= x == c.prev ? c.f[0] : has_edge(c.targets, c.poff, c.pend, x) ? c.f[1] : c.f[2];
  }
  return b;
}

__device__ __forceinline__ float warp_inclusive_scan(float v, unsigned lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    float t = __shfl_up_sync(kFull, v, o);
    if (lane >= (unsigned)o) v += t;
  }
  return v;
}

// RNG of the reservoir samplers: lane j (of k) draws, for its r-th element,
// word r%4 of draw kReservoirDraw + j + k*(r/4) of (seed, walk, step):
// deterministic for the step, a fresh Philox call every fourth element.
struct LaneWords {
  uint64_t seed, walk;
  uint32_t step, lane, k;
  uint4 w;
  __device__ __forceinline__ uint32_t at(uint32_t r) {
    if ((r & 3) == 0) w = draw(seed, walk, step, kReservoirDraw + lane + k * (r >> 2));
    return word(w, r & 3);
  }
};

// zprs_warp: zig-zag parallel reservoir sampling by one warp over the d
// edges at off (FlowWalker Algorithm 4). Lane j owns columns j, j+32, ...;
// pass 1 sums its biases, an exclusive scan gives the weight before it in
// the zig-zag order, pass 2 keeps column i with probability b/running, and
// the highest lane that kept one wins. Returns the column or kNoTask.
__device__ uint32_t zprs_warp(const BiasCtx& c, uint64_t off, uint32_t d, LaneWords rng, unsigned lane) {
  float s = 0.f;
  for (uint32_t i = lane; i < d; i += 32) s += bias_of(c, off + i);
  const float incl = warp_inclusive_scan(s, lane);
  if (__shfl_sync(kFull, incl, 31) <= 0.f) return kNoTask;
  float run = incl - s;
  uint32_t pick = kNoTask, r = 0;
  for (uint32_t i = lane; i < d; i += 32, r++) {
    const uint32_t x = rng.at(r);
    const float b = bias_of(c, off + i);
    if (b > 0.f) {
      run += b;
      if (unit32(x) * run < b) pick = i;
    }
  }
  const unsigned m = __ballot_sync(kFull, pick != kNoTask);
  if (m == 0) return kNoTask;
  return __shfl_sync(kFull, pick, 31 - __clz(m));
}

// dprs_warp: direct parallel reservoir sampling (FlowWalker Algorithm 3):
// 32 consecutive columns per round, an inclusive scan per round, the highest
// kept column of a round replaces the selection.
__device__ uint32_t dprs_warp(const BiasCtx& c, uint64_t off, uint32_t d, LaneWords rng, unsigned lane) {
  float before = 0.f;
  uint32_t pick = kNoTask, r = 0;
  for (uint32_t base = 0; base < d; base += 32, r++) {
    const uint32_t i = base + lane;
    const float b = i < d ? bias_of(c, off + i) : 0.f;
    const float incl = warp_inclusive_scan(b, lane);
    const uint32_t x = rng.at(r);
    const unsigned m = __ballot_sync(kFull, b > 0.f && unit32(x) * (before + incl) < b);
    if (m) pick = base + 31 - __clz(m);
    before += __shfl_sync(kFull, incl, 31);
  }
  return pick;
}

// BlockScratch is the block sampler's shared memory.
struct BlockScratch {
  float warp_sums[kWarps];
  int best;
  uint32_t pick;
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

// zprs_block: ZPRS with k = kBlockThreads, for high-degree vertices.
__device__ uint32_t zprs_block(const BiasCtx& c, uint64_t off, uint32_t d, LaneWords rng, BlockScratch& sh) {
  float s = 0.f;
  for (uint32_t i = threadIdx.x; i < d; i += kBlockThreads) s += bias_of(c, off + i);
  float total;
  const float incl = block_inclusive_scan(s, sh, total);
  if (total <= 0.f) return kNoTask;
  float run = incl - s;
  uint32_t pick = kNoTask, r = 0;
  for (uint32_t i = threadIdx.x; i < d; i += kBlockThreads, r++) {
    const uint32_t x = rng.at(r);
    const float b = bias_of(c, off + i);
    if (b > 0.f) {
      run += b;
      if (unit32(x) * run < b) pick = i;
    }
  }
  return block_highest(pick, sh);
}

// dprs_block: DPRS with k = kBlockThreads consecutive columns per round.
__device__ uint32_t dprs_block(const BiasCtx& c, uint64_t off, uint32_t d, LaneWords rng, BlockScratch& sh) {
  float before = 0.f;
  uint32_t pick = kNoTask, r = 0;
  for (uint32_t base = 0; base < d; base += kBlockThreads, r++) {
    const uint32_t i = base + threadIdx.x;
    const float b = i < d ? bias_of(c, off + i) : 0.f;
    float total;
    const float incl = block_inclusive_scan(b, sh, total);
    const uint32_t x = rng.at(r);
    const uint32_t got = block_highest(b > 0.f && unit32(x) * (before + incl) < b ? i : kNoTask, sh);
    if (got != kNoTask) pick = got;
    before += total;
  }
  return pick;
}

// node2vec_scan: the exact sequential fallback after kMaxRejections
// rejected proposals: a one-lane reservoir over all d edges with bias
// w(e) f(e), element i on word i%4 of draw kFallbackDraw + i/4 (as the CPU).
__device__ uint32_t node2vec_scan(const BiasCtx& c, uint64_t off, uint32_t d, uint64_t seed, uint64_t walk, uint32_t step) {
  double run = 0;
  uint32_t pick = 0;
  uint4 w = make_uint4(0, 0, 0, 0);
  for (uint32_t i = 0; i < d; i++) {
    if ((i & 3) == 0) w = draw(seed, walk, step, kFallbackDraw + (i >> 2));
    const double b = bias_of(c, off + i);
    if (b <= 0) continue;
    run += b;
    if ((double)word(w, i & 3) * 0x1p-32 * run < b) pick = i;
  }
  return __ldg(c.targets + off + pick);
}

}  // namespace ws
