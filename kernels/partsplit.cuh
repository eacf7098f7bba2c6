// partsplit.cuh: the device side of the partition split (walk/hybrid's
// PartSplit, gpu/partsplit_cuda.go; issue 35, C-SAW §V, Garaph). The graph's
// vertices are cut into contiguous partitions; the device holds the alias
// entries of its own (base >= 0), the CPU engine walks the others. A batch
// is walkers handed over by the CPU side; each is stepped while its vertex
// is the device's, its vertices written to its segment, and handed back.
//
//   part_walk   one thread a walker (grid-stride). Partition bounds and
//               entry bases in shared memory (at most kMaxPartSplitParts);
//               offsets, entries, walkers and the job's device rows in
//               global memory; the walker's state in registers.
#pragma once
#include "rng.cuh"

namespace ws {

constexpr uint32_t kMaxPartSplitParts = 1024;  // gpu.maxPartSplitParts
constexpr uint32_t kPartEnded = 0x80000000u;   // set in a walker's step once its walk ended
constexpr uint64_t kPartAlias = 1;             // mode: alias draw (weighted), else the entry's keep (uniform)
constexpr uint64_t kPartPPR = 2;               // mode: word x is PPR's stop, y and z the draw
// kPartHost is the base of a partition the CPU walks (gpu.partHostBase):
// a device partition's base, its first entry less its first global edge,
// is negative whenever its edges come after others' on the device.
constexpr long long kPartHost = -9223372036854775807LL - 1;

// PartEntry is one edge of a device partition: the alias column's keep
// probability, its own target (keep) and its alias's target (alt): the
// CPU engine's packed aliasEntry.
struct PartEntry {
  float prob;
  uint32_t keep;
  uint32_t alt;
};

}  // namespace ws

// part_walk steps walkers[i] (slot, vertex, step, prev: walk.Walker) while
// its vertex lies in a device partition, writing the vertex each step
// reaches to rows[slot*stride + step] (the job's rows on the device; the
// host merges them with the CPU's at the end, so no vertex crosses PCIe
// per hand-over). base[p] is the entry index of partition p's first edge
// less its global first edge (kPartHost: the CPU's), so entries[base + e]
// is global edge e's entry. Draws are walk/draws.go's: (seed, first+slot,
// step, 0), as the CPU engine's. The walker comes back at a CPU vertex, or
// ended (kPartEnded in its step).
extern "C" __global__ void __launch_bounds__(256)
part_walk(const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ bounds, const long long* __restrict__ base,
          const ws::PartEntry* __restrict__ entries, uint4* __restrict__ walkers, uint32_t* __restrict__ rows,
          uint64_t m, uint64_t nparts, uint64_t stride, uint64_t length, uint64_t first, uint64_t seed, uint64_t mode,
          uint64_t stop_t) {
  using namespace ws;
  __shared__ uint32_t sb[kMaxPartSplitParts + 1];
  __shared__ long long sbase[kMaxPartSplitParts];
  const uint32_t np = (uint32_t)nparts;
  for (uint32_t k = threadIdx.x; k <= np; k += blockDim.x) {
    sb[k] = bounds[k];
    if (k < np) sbase[k] = base[k];
  }
  __syncthreads();
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < m; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint4 w = walkers[i];
    const uint64_t walk = first + w.x;
    uint32_t* row = rows + (uint64_t)w.x * stride;
    uint32_t v = w.y, step = w.z, prev = w.w;
    bool ended = false;
    for (;;) {
      if (step >= length) {
        ended = true;
        break;
      }
      uint32_t lo = 0, hi = np;
      while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) >> 1;
        if (sb[mid] <= v) lo = mid; else hi = mid;
      }
      const long long b = sbase[lo];
      if (b == kPartHost) break;  // the CPU's vertex: hand the walker back
      const uint64_t a = offsets[v], e = offsets[v + 1];
      if (a == e) {
        ended = true;
        break;
      }
      const uint4 r = draw(seed, walk, step, 0);
      uint32_t col = r.x, coin = r.y;
      if (mode & kPartPPR) {
        if ((uint64_t)r.x < stop_t) {
          ended = true;
          break;
        }
        col = r.y;
        coin = r.z;
      }
      const PartEntry ent = entries[b + (long long)(a + index(col, (uint32_t)(e - a)))];
      const uint32_t nx = (mode & kPartAlias) && !(unit24(coin) < ent.prob) ? ent.alt : ent.keep;
      ++step;
      row[step] = nx;
      prev = v;
      v = nx;
    }
    walkers[i] = make_uint4(w.x, v, step | (ended ? kPartEnded : 0u), prev);
  }
}
