// taskpool.cuh: FlowWalker's task pools. The global pool is the batch's
// task array (params.tasks) behind one atomic cursor (params.cursor, global
// memory); every kernel takes walks from it a warp at a time. The reservoir
// kernels keep a local pool of kLocalPoolSlots walks per block in shared
// memory, refilled from the global pool, so that the warp sampler and the
// block sampler can each take the walks whose current degree suits them.
#pragma once
#include <stdint.h>

namespace ws {

constexpr int kLocalPoolSlots = 64;  // FlowWalker's |P_L| default (gpu.localPoolSlots)

// Slot is one walk of the block's local task pool (shared memory).
struct Slot {
  uint64_t off, poff, walk, seed;
  uint32_t task, cur, prev, step, deg, pdeg;
};

// take_global_task hands the lanes set in want (a subset of mask, the lanes
// taking part) one task index each from the global pool, in lane order,
// with a single atomicAdd by the lowest such lane: one atomic per warp and
// refill instead of one per walk. Every lane of mask must call it; the
// result is meaningful for the lanes in want. An index >= the pool's size
// means the pool is dry.
__device__ __forceinline__ uint32_t take_global_task(uint32_t* cursor, unsigned mask, unsigned want, unsigned lane) {
  const unsigned leader = __ffs(want) - 1;
  uint32_t base = 0;
  if (lane == leader) base = atomicAdd(cursor, (uint32_t)__popc(want));
  base = __shfl_sync(mask, base, leader);
  return base + __popc(want & ((1u << lane) - 1));
}

}  // namespace ws
