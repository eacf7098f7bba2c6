// scan.cuh: the block-wide integer scan (CUB's BlockScan) and the pack
// constants shared by the pack kernels (pack.cu) and the visit counter
// (visits.cuh).
#pragma once
#include <stdint.h>

#include <cub/block/block_scan.cuh>

namespace ws {

constexpr int kPackThreads = 256;
constexpr int kPackPerThread = 4;
constexpr int kPackTile = kPackThreads * kPackPerThread;  // walks a block

// PackScan is CUB's block-wide scan over kPackThreads values (shared
// scratch: a PackScanStorage). Integer sums are exact, so CUB's order of
// additions does not change a result.
using PackScan = cub::BlockScan<uint32_t, kPackThreads>;
using PackScanStorage = PackScan::TempStorage;

// block_exclusive_scan_u32 returns the exclusive prefix sum of v across the
// block and sets total to the block's sum. It ends with a barrier, so the
// caller may scan again with the same scratch at once.
__device__ __forceinline__ uint32_t block_exclusive_scan_u32(uint32_t v, PackScanStorage& scratch, uint32_t& total) {
  uint32_t ex;
  PackScan(scratch).ExclusiveSum(v, ex, total);
  __syncthreads();
  return ex;
}

}  // namespace ws

