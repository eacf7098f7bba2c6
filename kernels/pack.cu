// pack.cu: packs a batch's result rows (stride vertices each, mostly
// unused when walks stop early: PPR, dead ends) into one dense array in
// walk order, so the copy back moves only the vertices walked. Three
// launches on the batch's stream: pack_partials sums each tile's lengths,
// pack_scan_partials scans the tile sums (one block), pack_rows scans each
// tile again from its partial and copies the rows, a warp a walk. Its own
// translation unit and module (gpu/pack.fatbin), apart from the walk
// kernels: it shares nothing with them but the scan.
#include <stdint.h>

#include "scan.cuh"

// pack_partials: partials[b] = sum of lengths in tile b.
extern "C" __global__ void __launch_bounds__(ws::kPackThreads) pack_partials(const uint32_t* __restrict__ lengths, uint64_t n,
                                                                             uint32_t* __restrict__ partials) {
  __shared__ ws::PackScanStorage scan_scratch;
  const uint64_t base = (uint64_t)blockIdx.x * ws::kPackTile + threadIdx.x * ws::kPackPerThread;
  uint32_t s = 0;
#pragma unroll
  for (int q = 0; q < ws::kPackPerThread; q++)
    if (base + q < n) s += lengths[base + q];
  uint32_t total;
  ws::block_exclusive_scan_u32(s, scan_scratch, total);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// pack_scan_partials: exclusive scan of the nb tile sums in place (one
// block); partials[nb] gets the batch's total vertex count.
extern "C" __global__ void __launch_bounds__(ws::kPackThreads) pack_scan_partials(uint32_t* __restrict__ partials, uint64_t nb) {
  __shared__ ws::PackScanStorage scan_scratch;
  uint32_t carry = 0;
  for (uint64_t b0 = 0; b0 < nb; b0 += ws::kPackThreads) {
    const uint64_t b = b0 + threadIdx.x;
    const uint32_t v = b < nb ? partials[b] : 0;
    uint32_t total;
    const uint32_t ex = ws::block_exclusive_scan_u32(v, scan_scratch, total);
    if (b < nb) partials[b] = carry + ex;
    carry += total;
  }
  if (threadIdx.x == 0) partials[nb] = carry;
}

// pack_rows: walk i's first lengths[i] vertices go to dense at the sum of
// the lengths before it.
extern "C" __global__ void __launch_bounds__(ws::kPackThreads) pack_rows(const uint32_t* __restrict__ result, const uint32_t* __restrict__ lengths,
                                                                         const uint32_t* __restrict__ partials, uint64_t n, uint64_t stride,
                                                                         uint32_t* __restrict__ dense) {
  __shared__ ws::PackScanStorage scan_scratch;
  __shared__ uint32_t at[ws::kPackTile];
  const uint64_t tile = (uint64_t)blockIdx.x * ws::kPackTile;
  const uint64_t base = tile + threadIdx.x * ws::kPackPerThread;
  uint32_t len[ws::kPackPerThread], s = 0;
#pragma unroll
  for (int q = 0; q < ws::kPackPerThread; q++) {
    len[q] = base + q < n ? lengths[base + q] : 0;
    s += len[q];
  }
  uint32_t total;
  uint32_t o = partials[blockIdx.x] + ws::block_exclusive_scan_u32(s, scan_scratch, total);
#pragma unroll
  for (int q = 0; q < ws::kPackPerThread; q++) {
    at[threadIdx.x * ws::kPackPerThread + q] = o;
    o += len[q];
  }
  __syncthreads();
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint64_t end = min((uint64_t)ws::kPackTile, n - tile);
  for (uint64_t k = warp; k < end; k += ws::kPackThreads / 32) {
    const uint32_t l = lengths[tile + k];
    const uint32_t* src = result + (tile + k) * stride;
    uint32_t* dst = dense + at[k];
    for (uint32_t j = lane; j < l; j += 32) dst[j] = src[j];
  }
}
