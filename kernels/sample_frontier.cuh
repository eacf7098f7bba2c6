// sample_frontier.cuh: frontier sampling (the multi-dimensional random walk
// of Ribeiro and Towsley) on the device, the twin of walk.Sample's
// FrontierWalk (walk/sampleinstance.go: sampler.frontier), step for step:
// the samples are the CPU's.
//
//   sample_frontier  one thread an instance. The instance's frontier (its
//                    frontier_size seeds) and a Fenwick tree over the
//                    slots' degrees (int64, built in linear time: the same
//                    sums as walk's, which builds it by adds) live in the
//                    thread's slice of two global scratch arrays. Step t
//                    draws the Philox block {instance, 0, t, 0}: words 0 and
//                    1 make a 64-bit r, the slot is the one whose degree
//                    range holds mulhi64(r, total) (the tree's descent, as
//                    walk's fenwick.find), word 2 picks the edge (uniform by
//                    multiply-high, or weighted through cum); the edge is
//                    written and the slot's vertex replaced by its target.
//                    The walk stops early when every slot has degree 0.
//
// Memory: the graph and cum (walk.WeightCDF) in global memory, read only;
// the scratch (slots: frontier_size words, tree: frontier_size + 1 int64 per
// instance) global, the thread's own. Outputs (global): instance t's edges
// at [t*steps, t*steps + count[t]) of out_edge (edge index), out_src and
// out_dst.
#pragma once
#include <stdint.h>
#include "rng.cuh"
#include "sample.cuh"

extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_frontier(
    const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets, const double* __restrict__ cum,
    uint64_t seed, const uint32_t* __restrict__ starts, uint32_t fsize, uint32_t ips, uint32_t first, uint32_t ninst,
    uint32_t steps, uint32_t* __restrict__ slot_scratch, int64_t* __restrict__ tree_scratch,
    uint64_t* __restrict__ out_edge, uint32_t* __restrict__ out_src, uint32_t* __restrict__ out_dst,
    uint32_t* __restrict__ count) {
  using namespace ws;
  const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (t >= ninst) return;
  const uint32_t inst = first + (uint32_t)t;
  const uint32_t* seeds = starts + (uint64_t)(inst / ips) * fsize;
  uint32_t* slots = slot_scratch + t * fsize;
  int64_t* tree = tree_scratch + t * (uint64_t)(fsize + 1);
  // tree[i] (1-based) sums the degrees of slots (i - lowbit(i), i].
  int64_t total = 0;
  tree[0] = 0;
  for (uint32_t j = 0; j < fsize; j++) {
    const uint32_t v = seeds[j];
    slots[j] = v;
    const int64_t d = (int64_t)(offsets[v + 1] - offsets[v]);
    tree[j + 1] = d;
    total += d;
  }
  for (uint32_t i = 1; i <= fsize; i++) {
    const uint32_t p = i + (i & (0u - i));
    if (p <= fsize) tree[p] += tree[i];
  }
  uint32_t top = 1;
  while (top * 2 < fsize + 1) top *= 2;
  uint64_t* oe = out_edge + t * (uint64_t)steps;
  uint32_t* os = out_src + t * (uint64_t)steps;
  uint32_t* od = out_dst + t * (uint64_t)steps;
  uint32_t s = 0;
  for (; s < steps && total > 0; s++) {
    const uint4 w = philox4x32_10(make_uint4(inst, 0, s, 0), (uint32_t)seed, (uint32_t)(seed >> 32));
    const uint64_t r = (uint64_t)w.x << 32 | w.y;
    int64_t x = (int64_t)__umul64hi(r, (uint64_t)total);
    uint32_t pos = 0;
    for (uint32_t step = top; step > 0; step >>= 1) {
      const uint32_t n = pos + step;
      if (n <= fsize && tree[n] <= x) {
        pos = n;
        x -= tree[n];
      }
    }
    const uint32_t v = slots[pos];
    const uint64_t a = offsets[v];
    const uint32_t d = (uint32_t)(offsets[v + 1] - a);
    const uint32_t c = cum ? cdf_search(cum + a, d, w.z) : index(w.z, d);
    const uint64_t e = a + c;
    const uint32_t u = targets[e];
    oe[s] = e;
    os[s] = v;
    od[s] = u;
    const int64_t delta = (int64_t)(offsets[u + 1] - offsets[u]) - (int64_t)d;
    for (uint32_t i = pos + 1; i <= fsize; i += i & (0u - i)) tree[i] += delta;
    total += delta;
    slots[pos] = u;
  }
  count[t] = s;
}
