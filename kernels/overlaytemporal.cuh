// overlaytemporal.cuh: temporal walks on a live graph's snapshot (issues 37
// and 38), the device twin of walk/cpu/overlaytemporal.go's
// walkOverlayTemporal, draw for draw:
//
//   a vertex without a delta  the base's temporal step (temporal.cuh's
//                             temporal_step, its next records after a base
//                             step into another such vertex)
//   a vertex with one         its timed list: the vertex's live edges in
//                             (time, target) order (walk.AppendTimed),
//                             gathered on the host per snapshot
//                             (gpu/overlaytemporal.go) and laid out as the
//                             base's time order is, with next records of
//                             their own (timed_next_build), so the step is
//                             temporal_step on the lists' arrays: the
//                             window's search, the weighted pick on the
//                             lists' prefix sums, the exponential draw on
//                             their cell sums (built by the base's kernels);
//                             only a window of zero weight and the exact
//                             fallback differ, as on the CPU (temporal.cuh's
//                             timed_list_scan, a cumulative scan from the
//                             window's near end, not the base's reservoir)
//   an added vertex with no   a dead end
//   list of its own
//
// Every double operation that decides a draw is written with the _rn
// intrinsics (never an FMA), as temporal.cuh's are.
#pragma once
#include <stdint.h>

#include "params.cuh"
#include "rng.cuh"
#include "temporal.cuh"

namespace ws {

// TimedLists is a snapshot's timed lists on the device (kernel arguments,
// gpu/overlaytemporal_cuda.go passes them in this order). List j holds
// positions [off[j], off[j+1]) of the arrays; index[v] is 1 + j for a vertex
// v with a delta, 0 without one.
struct TimedLists {
  const uint32_t* index;  // n_index
  uint64_t n_index;       // the snapshot's vertices
  uint64_t base_vertices;
  const uint64_t* off;
  const int64_t* times;
  const int64_t* coarse;  // every kCoarse-th time, as the base's
  const uint32_t* targets;
  const float* weights;   // null unless weighted
  const double* cumw;     // weighted, uniform and linear: prefix sums by list
  const double* exp_sums; // exponential: cell sums by list
  const uint4* next;      // null, or each list position's next record (timed_next_build)
};

// list_ctx is C with the timed lists' arrays in place of the base's: a step
// on a list searches, draws and sums on them as on the base's time order.
__device__ __forceinline__ TemporalCtx list_ctx(const TemporalCtx& C, const TimedLists& L) {
  TemporalCtx X = C;
  X.times = L.times;
  X.coarse = L.coarse;
  X.cumw = L.cumw;
  X.exp_sums = L.exp_sums;
  return X;
}

}  // namespace ws
