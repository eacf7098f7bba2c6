// sample_columns.cuh: neighbour sampling's bookkeeping on the device, so
// that a hop's frontier and the sample's per-instance layout never pass
// through the host (gpu/sample_cuda.go launches them, in this order a hop):
//
//   sample_neighbor_hop (sample.cuh)  picks and counts, one warp a task
//   scan_u32_*                        pos = exclusive prefix sum of counts
//   sample_neighbor_resolve           a thread a pick slot: the hop's edges
//                                     (edge, src, dst) packed in task order
//                                     at pos, the next hop's tasks (instance,
//                                     slot) beside them (the next hop's
//                                     vertices are dst), each instance's
//                                     edge count of the hop
// and once all hops ran:
//   scan_u32_*                        offsets of each instance's rows
//   sample_neighbor_layout            a thread an edge of hop h: its row in
//                                     instance order (instance, then hop,
//                                     then task order), hop by hop
//
// The host copies back the columns (src, dst, hop, edge indices when asked)
// and the instances' offsets, in large contiguous copies; it never looks at
// an edge. (On the host, one goroutine building the frontier held a whole
// call to 4 M edges/s; every core building it and the per-instance slices
// to 58-77 M, 1% of the selection kernel.)
//
// Memory: every array in global memory. The scan keeps one uint64 sum a
// tile in global memory (tileSums), scanned by one block.
#pragma once
#include <stdint.h>

#include <cub/block/block_scan.cuh>

namespace ws {

constexpr int kScanThreads = 256;
constexpr int kScanPerThread = 8;
constexpr int kScanTile = kScanThreads * kScanPerThread;  // values a block

using ColumnScan = cub::BlockScan<uint64_t, kScanThreads>;

// scan_load is thread threadIdx.x's kScanPerThread consecutive values of
// tile (zero beyond n) and their sum.
__device__ __forceinline__ uint64_t scan_load(const uint32_t* __restrict__ in, uint64_t n, uint64_t tile,
                                              uint32_t (&v)[kScanPerThread]) {
  const uint64_t base = tile * kScanTile + (uint64_t)threadIdx.x * kScanPerThread;
  uint64_t sum = 0;
#pragma unroll
  for (int j = 0; j < kScanPerThread; j++) {
    v[j] = base + j < n ? in[base + j] : 0;
    sum += v[j];
  }
  return sum;
}

}  // namespace ws

// scan_u32_tiles: block b sums tile b of in (kScanTile values) into
// tileSums[b]. One block a tile.
extern "C" __global__ void __launch_bounds__(ws::kScanThreads) scan_u32_tiles(const uint32_t* __restrict__ in, uint64_t n,
                                                                               uint64_t* __restrict__ tileSums) {
  using namespace ws;
  __shared__ ColumnScan::TempStorage scratch;
  uint32_t v[kScanPerThread];
  const uint64_t s = scan_load(in, n, blockIdx.x, v);
  uint64_t ex, total;
  ColumnScan(scratch).ExclusiveSum(s, ex, total);
  if (threadIdx.x == 0) tileSums[blockIdx.x] = total;
}

// scan_u64_sums: one block turns tileSums[0..ntiles) into their exclusive
// prefix sums, in place, kScanThreads at a time, and writes the grand total
// to *total.
extern "C" __global__ void __launch_bounds__(ws::kScanThreads) scan_u64_sums(uint64_t* __restrict__ tileSums, uint64_t ntiles,
                                                                              uint64_t* __restrict__ total) {
  using namespace ws;
  __shared__ ColumnScan::TempStorage scratch;
  uint64_t carry = 0;
  for (uint64_t base = 0; base < ntiles; base += kScanThreads) {
    const uint64_t i = base + threadIdx.x;
    const uint64_t v = i < ntiles ? tileSums[i] : 0;
    uint64_t ex, sum;
    ColumnScan(scratch).ExclusiveSum(v, ex, sum);
    __syncthreads();
    if (i < ntiles) tileSums[i] = carry + ex;
    carry += sum;
  }
  if (threadIdx.x == 0) *total = carry;
}

// scan_u32_apply: block b writes the exclusive prefix sums of tile b of in,
// from tileSums[b] on, to out (uint64); out[n] is the total.
extern "C" __global__ void __launch_bounds__(ws::kScanThreads) scan_u32_apply(const uint32_t* __restrict__ in, uint64_t n,
                                                                               const uint64_t* __restrict__ tileSums,
                                                                               uint64_t* __restrict__ out) {
  using namespace ws;
  __shared__ ColumnScan::TempStorage scratch;
  uint32_t v[kScanPerThread];
  const uint64_t s = scan_load(in, n, blockIdx.x, v);
  uint64_t ex;
  ColumnScan(scratch).ExclusiveSum(s, ex);
  uint64_t at = tileSums[blockIdx.x] + ex;
  const uint64_t base = (uint64_t)blockIdx.x * kScanTile + (uint64_t)threadIdx.x * kScanPerThread;
#pragma unroll
  for (int j = 0; j < kScanPerThread; j++) {
    if (base + j < n) out[base + j] = at;
    at += v[j];
    if (base + j + 1 == n) out[n] = at;
  }
}

// sample_neighbor_resolve turns a hop's picks (adjacency indices of each
// task's vertex, sample_neighbor_hop's out, k slots a task) into the hop's
// edges, a thread a slot, packed in task order from pos[t] (the exclusive
// prefix sum of count): edge index, src (the task's vertex), dst, and the
// next hop's task at the same place (instance; slot, the pick's position
// in its instance's next frontier: the instance's first task of this hop
// is t - slot[t], its picks start at pos[t - slot[t]]). instCount[i -
// first] and instTotal[i - first] (the first zeroed before each hop, the
// second before the first) gain the instance's edges of the hop. edge may
// be null (edge indices not asked for).
extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_neighbor_resolve(
    const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets, const uint32_t* __restrict__ inst,
    const uint32_t* __restrict__ slot, const uint32_t* __restrict__ vertex, const uint32_t* __restrict__ picks,
    const uint32_t* __restrict__ count, const uint64_t* __restrict__ pos, uint32_t k, uint32_t ntasks, uint32_t first,
    uint64_t* __restrict__ edge, uint32_t* __restrict__ src, uint32_t* __restrict__ dst, uint32_t* __restrict__ ninst,
    uint32_t* __restrict__ nslot, uint32_t* __restrict__ instCount, uint32_t* __restrict__ instTotal) {
  const uint64_t n = (uint64_t)ntasks * k;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint64_t t = i / k;
    const uint32_t c = (uint32_t)(i - t * k);
    const uint32_t cnt = count[t];
    if (c >= cnt) continue;
    const uint32_t v = vertex[t], in = inst[t];
    const uint64_t e = offsets[v] + picks[i];
    const uint64_t at = pos[t] + c;
    if (edge) edge[at] = e;
    src[at] = v;
    dst[at] = targets[e];
    ninst[at] = in;
    nslot[at] = (uint32_t)(at - pos[t - slot[t]]);
    if (c == 0) {
      atomicAdd(&instCount[in - first], cnt);
      atomicAdd(&instTotal[in - first], cnt);
    }
  }
}

// sample_neighbor_layout places hop h's edges (in task order, so each
// instance's are contiguous from hopStart[i]) at their rows in instance
// order: instance i's rows of hop h start at cursor[i] (its offset plus its
// edges of the earlier hops; the host adds hop h's counts after). edgeOut
// may be null (edge indices not asked for).
extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_neighbor_layout(
    const uint64_t* __restrict__ edge, const uint32_t* __restrict__ src, const uint32_t* __restrict__ dst,
    const uint32_t* __restrict__ inst, uint64_t nedges, uint32_t first, uint32_t hop, const uint64_t* __restrict__ hopStart,
    const uint64_t* __restrict__ cursor, uint64_t* __restrict__ edgeOut, uint32_t* __restrict__ srcOut,
    uint32_t* __restrict__ dstOut, int32_t* __restrict__ hopOut) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t a = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; a < nedges; a += stride) {
    const uint32_t i = inst[a] - first;
    const uint64_t row = cursor[i] + (a - hopStart[i]);
    srcOut[row] = src[a];
    dstOut[row] = dst[a];
    hopOut[row] = (int32_t)hop;
    if (edgeOut) edgeOut[row] = edge[a];
  }
}

// sample_add_counts adds counts[i] to cursor[i] (n values): hop h's edges
// placed, the cursor moves past them.
extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_add_counts(uint64_t* __restrict__ cursor,
                                                                                   const uint32_t* __restrict__ counts,
                                                                                   uint64_t n) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += stride) cursor[i] += counts[i];
}

// sample_row_counts writes each instance's edge count, the last of its hop
// ends (ends: hops values an instance, the edges through each hop), for the
// scan that places the instances' rows.
extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_row_counts(const uint32_t* __restrict__ ends,
                                                                                   uint32_t hops, uint64_t n,
                                                                                   uint32_t* __restrict__ counts) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; t < n; t += stride) counts[t] = ends[t * hops + hops - 1];
}

// sample_rows_to_columns packs per-instance rows (rowStride slots an
// instance, its edges first, hop by hop: ends[t * hops + h] is the number
// of its edges through hop h; the layer kernel's output) into columns in
// instance order from off[t], a thread a slot, so that only the sampled
// edges come back (a [25, 250] layer sample fills about half its slots).
// edgeOut may be null (edge indices not asked for).
extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_rows_to_columns(
    const uint64_t* __restrict__ edge, const uint32_t* __restrict__ src, const uint32_t* __restrict__ dst,
    const uint32_t* __restrict__ ends, uint32_t hops, uint64_t rowStride, uint64_t n, const uint64_t* __restrict__ off,
    uint64_t* __restrict__ edgeOut, uint32_t* __restrict__ srcOut, uint32_t* __restrict__ dstOut, int32_t* __restrict__ hopOut) {
  const uint64_t total = n * rowStride;
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += stride) {
    const uint64_t t = i / rowStride;
    const uint32_t j = (uint32_t)(i - t * rowStride);
    const uint32_t* e = ends + t * hops;
    if (j >= e[hops - 1]) continue;
    uint32_t h = 0;
    while (e[h] <= j) h++;
    const uint64_t row = off[t] + j;
    srcOut[row] = src[i];
    dstOut[row] = dst[i];
    hopOut[row] = (int32_t)h;
    if (edgeOut) edgeOut[row] = edge[i];
  }
}
