// placement.cuh: where a vertex's edges live. Without a placement plan
// (params.place null) every edge array is on the device and vertex v's
// edges are [offsets[v], offsets[v+1]) of it. Under a plan (gpu/placement.go)
// the edges are relocated: v's start and degree are place's record v, and
// relocated edges [0, split) are in device memory while
// [split, ...) are in pinned, mapped host memory that kernels read in place
// over PCIe. The host pointers are biased by -split on the host, so one
// relocated index addresses either side and only the base pointer is chosen
// per step. A relocated start keeps the original start modulo 4, so the
// reservoir samplers' aligned 16-byte chunks hold the same columns as in the
// all-device layout: the walks do not depend on where the data lives.
#pragma once
#include "params.cuh"

namespace ws {

// vertex_edges returns the start of v's edges (relocated when place is set)
// and its degree in deg. Under a plan place holds a 16-byte record per
// vertex, {relocated start, degree, 0}: one aligned load, where reading the
// start beside offsets[v] and offsets[v + 1] cost a second random sector a
// step (the placed kernels ran at 0.78x of the plain ones with every edge
// on the device).
__device__ __forceinline__ uint64_t vertex_edges(const uint64_t* __restrict__ offsets, const uint64_t* __restrict__ place,
                                                 uint32_t v, uint32_t& deg) {
  if (place != nullptr) {
    const uint4 r = __ldg(reinterpret_cast<const uint4*>(place) + v);
    deg = r.z;
    return ((uint64_t)r.y << 32) | r.x;
  }
  const uint64_t a = offsets[v];
  deg = (uint32_t)(offsets[v + 1] - a);
  return a;
}

// side picks the device array or its host twin for relocated index off.
template <typename T>
__device__ __forceinline__ const T* side(const T* dev, const T* host, uint64_t split, uint64_t off) {
  return off >= split ? host : dev;
}

// EdgeArrays are the edge arrays that hold one vertex's edges.
struct EdgeArrays {
  const uint32_t* targets;
  const float* weights;  // null when the walk is unweighted
  const uint8_t* labels;
  const AliasEntry* alias;
};

__device__ __forceinline__ EdgeArrays edges_at(const WalkParams& P, uint64_t off) {
  const bool host = off >= P.split;
  EdgeArrays a;
  a.targets = host ? P.h_targets : P.targets;
  a.weights = P.weighted ? (host ? P.h_weights : P.weights) : nullptr;
  a.labels = host ? P.h_labels : P.labels;
  a.alias = host ? P.h_alias : P.alias;
  return a;
}

// segment_start is the relocated start of label segment s of vertex v
// (seg_offsets index the original layout; a vertex's segments fill its
// original edge range in order).
__device__ __forceinline__ uint64_t segment_start(const WalkParams& P, uint32_t v, uint64_t seg_off) {
  return P.place != nullptr ? P.place[2 * (uint64_t)v] + (seg_off - P.offsets[v]) : seg_off;
}

}  // namespace ws
