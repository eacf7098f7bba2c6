// sample_frontier.cuh: frontier sampling (the multi-dimensional random walk
// of Ribeiro and Towsley) on the device, the twin of graphsample.Sample's
// FrontierWalk (graphsample/sampleinstance.go: sampler.frontier), step for step:
// the samples are the CPU's.
//
//   sample_frontier  one warp an instance (a warp takes instances warp,
//                    warp + nwarps, ...). The frontier's slots are cut into
//                    32 ranges of ceil(F/32) consecutive slots, lane l owning
//                    range l and holding its degree sum in a register. Step
//                    t draws the Philox block {instance, 0, t, 0}: words 0
//                    and 1 make a 64-bit r and x = mulhi64(r, total); a warp
//                    scan of the range sums finds the range that holds x, a
//                    scan of that range's degrees (32 slots a load) the slot:
//                    the first slot whose inclusive degree prefix exceeds x,
//                    the slot walk's Fenwick descent finds. Word 2 picks the
//                    edge (uniform by multiply-high, or weighted through cum,
//                    searched 32 probes a round); the slot's vertex becomes
//                    the edge's target and its range sum moves by the degree
//                    change. The walk stops early when every slot has
//                    degree 0.
//
// Memory: the graph and cum (graphsample.WeightCDF) global, read only; each warp's
// F slots {vertex, degree} in its own slice of `slots` (global, reused for
// its next instance). The edges of 32 steps wait in registers (lane s % 32
// holds step s) and are written as one coalesced row: instance t's edges at
// [t*steps, t*steps + count[t]) of out_edge (edge index), out_src, out_dst.
#pragma once
#include <stdint.h>
#include "rng.cuh"
#include "sample.cuh"

namespace ws {

// warp_inclusive_u64 is the inclusive sum of x over lanes 0..lane.
__device__ __forceinline__ uint64_t warp_inclusive_u64(uint64_t x, uint32_t lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint64_t y = __shfl_up_sync(kFullMask, x, d);
    if (lane >= (uint32_t)d) x += y;
  }
  return x;
}

// cdf_search_warp is cdf_search by the whole warp, 32 probes a round: the
// first i with target < cum[i] is the same index however it is searched.
__device__ __forceinline__ uint32_t cdf_search_warp(const double* cum, uint32_t n, uint32_t x, uint32_t lane) {
  const double target = __dmul_rn(__ddiv_rn((double)x, 4294967296.0), cum[n - 1]);
  uint32_t lo = 0, hi = n;  // the answer (n when none) is in [lo, hi]
  while (hi - lo > 32) {
    const uint32_t step = (hi - lo + 31) / 32;
    const uint32_t p = lo + (lane + 1) * step - 1;
    const unsigned m = __ballot_sync(kFullMask, p < hi && target < cum[p]);
    if (m == 0) {
      lo += min(32u, (hi - lo) / step) * step;  // past the last probe below hi
    } else {
      const uint32_t f = __ffs(m) - 1;
      hi = lo + (f + 1) * step - 1;
      lo += f * step;
    }
  }
  const unsigned m = __ballot_sync(kFullMask, lo + lane < hi && target < cum[lo + lane]);
  const uint32_t i = m ? lo + __ffs(m) - 1 : hi;
  return i < n ? i : n - 1;
}

}  // namespace ws

extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_frontier(
    const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets, const double* __restrict__ cum,
    uint64_t seed0, const uint32_t* __restrict__ starts, uint32_t fsize, uint32_t ips, uint32_t first, uint32_t ninst,
    uint32_t steps, uint2* __restrict__ slot_scratch, uint64_t* __restrict__ out_edge, uint32_t* __restrict__ out_src,
    uint32_t* __restrict__ out_dst, uint32_t* __restrict__ count, const ws::SampleSeg* __restrict__ segs, uint32_t nsegs) {
  using namespace ws;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
  const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
  const uint32_t chunk = (fsize + 31) / 32;  // slots a lane's range holds
  uint2* slots = slot_scratch + warp * fsize;
  for (uint64_t t = warp; t < ninst; t += nwarps) {
    const uint32_t inst = first + (uint32_t)t;
    const uint32_t* seeds = starts + (uint64_t)(inst / ips) * fsize;
    uint64_t seed = seed0;
    uint32_t kin = inst;  // the instance's Philox id (sample_segment_key)
    sample_segment_key(segs, nsegs, seed, kin);
    for (uint32_t j = lane; j < fsize; j += 32) {
      const uint32_t v = seeds[j];
      slots[j] = make_uint2(v, (uint32_t)(offsets[v + 1] - offsets[v]));
    }
    __syncwarp();
    const uint32_t mylo = min(lane * chunk, fsize), myhi = min(mylo + chunk, fsize);
    uint64_t rsum = 0;
    for (uint32_t j = mylo; j < myhi; j++) rsum += slots[j].y;
    uint64_t* oe = out_edge + t * (uint64_t)steps;
    uint32_t* os = out_src + t * (uint64_t)steps;
    uint32_t* od = out_dst + t * (uint64_t)steps;
    uint64_t bufE = 0;
    uint32_t bufV = 0, bufU = 0, s = 0;
    for (; s < steps; s++) {
      const uint64_t incl = warp_inclusive_u64(rsum, lane);
      const uint64_t total = __shfl_sync(kFullMask, incl, 31);
      if (total == 0) break;
      const uint4 w = philox4x32_10(make_uint4(kin, 0, s, 0), (uint32_t)seed, (uint32_t)(seed >> 32));
      uint64_t x = __umul64hi((uint64_t)w.x << 32 | w.y, total);
      const uint32_t L = __ffs(__ballot_sync(kFullMask, incl > x)) - 1;
      x -= __shfl_sync(kFullMask, incl - rsum, L);
      const uint32_t rlo = L * chunk, rhi = min(rlo + chunk, fsize);
      uint32_t slot = rlo, v = 0, d = 0;
      for (uint32_t b = rlo; b < rhi; b += 32) {
        uint2 rec = make_uint2(0, 0);
        if (b + lane < rhi) rec = slots[b + lane];
        const uint64_t si = warp_inclusive_u64(rec.y, lane);
        const uint64_t sum = __shfl_sync(kFullMask, si, 31);
        if (x < sum) {
          const uint32_t f = __ffs(__ballot_sync(kFullMask, si > x)) - 1;
          slot = b + f;
          v = __shfl_sync(kFullMask, rec.x, f);
          d = __shfl_sync(kFullMask, rec.y, f);
          break;
        }
        x -= sum;
      }
      const uint64_t a = offsets[v];
      const uint32_t c = cum ? cdf_search_warp(cum + a, d, w.z, lane) : index(w.z, d);
      const uint64_t e = a + c;
      const uint32_t u = targets[e];
      const uint64_t ua = offsets[u];
      const uint32_t du = (uint32_t)(offsets[u + 1] - ua);
      if (lane == (s & 31)) {
        bufE = e;
        bufV = v;
        bufU = u;
      }
      if ((s & 31) == 31) {
        const uint32_t at = s - 31 + lane;
        oe[at] = bufE;
        os[at] = bufV;
        od[at] = bufU;
      }
      if (lane == L) rsum = rsum - d + du;
      if (lane == 0) slots[slot] = make_uint2(u, du);
      __syncwarp();
    }
    if (lane < (s & 31)) {
      const uint32_t at = (s & ~31u) + lane;
      oe[at] = bufE;
      os[at] = bufV;
      od[at] = bufU;
    }
    if (lane == 0) count[t] = s;
    __syncwarp();
  }
}
