// overlay.cuh: walks on a live graph's snapshot (issue 37): the base CSR the
// engine holds plus the snapshot's delta, in two levels on the device: a
// resident level copied whole now and then, and a patch of the vertices
// written since, copied per snapshot (gpu/overlay.go lays them out,
// gpu/overlay_cuda.go uploads them). The step is
// the device twin of walk/cpu/overlay.go's overlayStep, overlayAttempts and
// overlayScan, draw for draw (walk/draws.go states the rule):
//
//   a vertex without a delta    the base's step (draw 0; PPR's stop on its x)
//   a vertex with one           dead end when it has no live edge; PPR's stop
//                               on draw 0's x, attempts from draw 1 (DeepWalk
//                               from draw 0); attempt a: z picks the side by
//                               the weights wb (base weight sum, or degree)
//                               and wd (appended count x largest weight, or
//                               count); a base edge on x (column) and y (alias
//                               coin), as the base's step; an appended edge
//                               on w, kept by weight on y; a dead or rejected
//                               edge draws again; after kMaxRejections the
//                               exact scan of the live edges (draw
//                               first + kFallbackDraw) decides.
//
// Every double and float operation that decides a step is written with the
// _rn intrinsics, so nvcc cannot contract it into an FMA: the comparisons
// must round as the CPU's do, or walks part ways.
#pragma once
#include "params.cuh"
#include "rng.cuh"
#include "samplers.cuh"

namespace ws {

// DeltaHead is one vertex's delta (global memory, 32 bytes: one sector),
// gpu/overlay.go's deltaHead: its appended edges are items[pos, pos+n) of
// DeltaParams and its tombstones, as Tombstone, the next nd_live & ~kLiveBit items.
// dead_bits has bit dead_bit(t) set for every tombstone's target t: most
// checks of a target without one end there, without the dependent load
// and search of the tombstones.
struct DeltaHead {
  double base_weight;  // the base edges' weight sum, dead ones included
  uint64_t dead_bits;
  uint32_t pos, n;
  uint32_t nd_live;    // tombstones, and bit 31 set when the vertex has a live edge
  float max_weight;    // the largest appended weight
};

// DeltaEdge is an appended edge (walk.DeltaEdge), Tombstone a deleted target
// (walk.Tombstone: base edges to target dead, and appended ones below upto).
struct DeltaEdge {
  uint32_t target;
  float weight;
};
struct Tombstone {
  uint32_t target, upto;
};

// DeltaWord is 64 vertices' marks in the resident level and in the patch
// (bit v%64 set when v has a delta there; the patch's hides the resident
// one) and how many each level marks in the words before: the marks and
// ranks of a vertex are in one 32-byte sector.
struct DeltaWord {
  uint64_t base, patch;
  uint32_t base_rank, patch_rank;
  uint64_t pad;
};

// DeltaParams is a snapshot's delta on the device: kernel arguments (the
// parameter bank, no registers held), gpu/overlay_cuda.go passes them in
// this order. Heads hold pos into items either way: a patch's vertices'
// items are appended to the resident level's.
struct DeltaParams {
  const DeltaWord* words;    // ceil(n_vertices/64)
  const DeltaHead* heads;    // the resident level's, one per vertex marked there, in vertex order
  const DeltaHead* pheads;   // the patch's, one per vertex marked there, in vertex order
  const uint2* items;        // DeltaEdge and Tombstone records
  uint64_t base_vertices;    // the base's vertices: offsets has base_vertices+1 entries
  uint64_t n_words;
};

static_assert(sizeof(DeltaHead) == 32, "DeltaHead layout changed: update gpu/overlay.go");
static_assert(sizeof(DeltaWord) == 32, "DeltaWord layout changed: update gpu/overlay.go");

constexpr uint32_t kLiveBit = 0x80000000u;

// dead_bit is walk.DeadBit: the filter bit of target t (its top six bits
// after a multiplicative hash).
__device__ __forceinline__ uint64_t dead_bit(uint32_t t) { return 1ull << (((uint64_t)t * 0x9e3779b97f4a7c15ull) >> 58); }

// delta_head returns v's head, in the patch when v is marked there, else
// in the resident level; null when v has no delta. The marks are one
// 16-byte load, the ranks (read only for a vertex with a delta) the other
// half of the same sector.
__device__ __forceinline__ const DeltaHead* delta_head(const DeltaParams& D, uint32_t v) {
  const uint64_t w = v >> 6;
  if (w >= D.n_words) return nullptr;
  const uint4 m = __ldg(reinterpret_cast<const uint4*>(D.words + w));
  const uint64_t base = (uint64_t)m.y << 32 | m.x, patch = (uint64_t)m.w << 32 | m.z;
  const uint32_t b = v & 63;
  if ((((base | patch) >> b) & 1) == 0) return nullptr;
  const uint2 r = __ldg(reinterpret_cast<const uint2*>(D.words + w) + 2);
  const uint64_t below = (1ull << b) - 1;
  if ((patch >> b) & 1) return D.pheads + r.y + __popcll(patch & below);
  return D.heads + r.x + __popcll(base & below);
}

// find_tombstone: binary search of a vertex's tombstones (sorted by target)
// for t; returns its upto plus one, or 0 when t has none.
__device__ __forceinline__ uint64_t find_tombstone(const uint2* __restrict__ dead, uint32_t nd, uint32_t t) {
  uint32_t lo = 0, hi = nd;
  while (lo < hi) {
    const uint32_t m = (lo + hi) >> 1;
    if (__ldg(&dead[m].x) < t) lo = m + 1; else hi = m;
  }
  if (lo < nd && __ldg(&dead[lo].x) == t) return (uint64_t)__ldg(&dead[lo].y) + 1;
  return 0;
}

// base_dead and delta_dead are walk.DeltaHead's BaseDead and DeltaDead.
__device__ __forceinline__ bool base_dead(const uint2* dead, uint32_t nd, uint64_t dbits, uint32_t t) {
  return (dbits & dead_bit(t)) != 0 && find_tombstone(dead, nd, t) != 0;
}

__device__ __forceinline__ bool delta_dead(const uint2* dead, uint32_t nd, uint64_t dbits, uint32_t i, uint32_t t) {
  if ((dbits & dead_bit(t)) == 0) return false;
  const uint64_t u = find_tombstone(dead, nd, t);
  return u != 0 && (uint64_t)i < u - 1;
}

// overlay_scan is overlayScan: the exact fallback after kMaxRejections
// attempts. One draw; the live edges' weights summed in the CPU's order
// (base edges, then appended ones), then walked down. Out of line: it is
// rare, and inlined its registers would cost every step occupancy.
__device__ __noinline__ uint32_t overlay_scan(const uint32_t* __restrict__ targets, const float* __restrict__ weights,
                                              const uint2* __restrict__ de, const uint2* __restrict__ dead, uint64_t dbits,
                                              uint32_t n, uint32_t nd, uint64_t a, uint64_t b, bool weighted,
                                              uint64_t seed, uint64_t walk, uint32_t step, uint32_t d, bool* found) {
  double sum = 0;
  for (uint64_t e = a; e < b; e++) {
    if (!base_dead(dead, nd, dbits, __ldg(targets + e))) sum = __dadd_rn(sum, weighted ? (double)__ldg(weights + e) : 1.0);
  }
  for (uint32_t i = 0; i < n; i++) {
    const uint2 x = __ldg(de + i);
    if (!delta_dead(dead, nd, dbits, i, x.x)) sum = __dadd_rn(sum, weighted ? (double)__uint_as_float(x.y) : 1.0);
  }
  const uint4 w = draw(seed, walk, step, d);
  // (x0 + x1 / 2^32) / 2^32 * sum, left to right as Go evaluates it; the
  // product x1 / 2^32 is exact, so an FMA would not change it either.
  double u = __dmul_rn(__dmul_rn(__dadd_rn((double)w.x, __dmul_rn((double)w.y, 0x1p-32)), 0x1p-32), sum);
  uint32_t last = 0;
  *found = false;
  for (uint64_t e = a; e < b; e++) {
    const uint32_t t = __ldg(targets + e);
    if (base_dead(dead, nd, dbits, t)) continue;
    u = __dsub_rn(u, weighted ? (double)__ldg(weights + e) : 1.0);
    if (u < 0) {
      *found = true;
      return t;
    }
    last = t;
    *found = true;
  }
  for (uint32_t i = 0; i < n; i++) {
    const uint2 x = __ldg(de + i);
    const uint32_t t = x.x;
    if (delta_dead(dead, nd, dbits, i, t)) continue;
    u = __dsub_rn(u, weighted ? (double)__uint_as_float(x.y) : 1.0);
    if (u < 0) {
      *found = true;
      return t;
    }
    last = t;
    *found = true;
  }
  // Rounding may leave u a hair above the sum: the last live edge.
  return last;
}

// overlay_step takes one step from cur on base + delta; false ends the walk
// (dead end, PPR stop). tg and al are the base's targets and alias table
// (al null for an unweighted walk), weights the base's weights (read only
// by the scan of a weighted walk).
template <bool kPPR>
__device__ __forceinline__ bool overlay_step(const DeltaParams& D, const uint64_t* __restrict__ offsets,
                                             const uint32_t* __restrict__ tg, const AliasEntry* __restrict__ al,
                                             const float* __restrict__ weights, bool weighted, uint64_t stop,
                                             uint64_t seed, uint64_t walk, uint32_t step, uint32_t cur, uint32_t& next) {
  uint64_t a = 0, b = 0;
  if (cur < D.base_vertices) {
    a = offsets[cur];
    b = offsets[cur + 1];
  }
  const uint32_t deg = (uint32_t)(b - a);
  const DeltaHead* hp = delta_head(D, cur);
  if (hp == nullptr) {
    // The base's step, as walk_thread takes it.
    if (deg == 0) return false;
    const uint4 w = draw(seed, walk, step, 0);
    if (kPPR) {
      if ((uint64_t)w.x < stop) return false;
      next = pick_static(tg, al, a, deg, w.y, w.z);
    } else {
      next = pick_static(tg, al, a, deg, w.x, w.y);
    }
    return true;
  }
  const DeltaHead h = *hp;
  if ((h.nd_live & kLiveBit) == 0) return false;
  const uint32_t nd = h.nd_live & ~kLiveBit;
  uint32_t first = 0;
  if (kPPR) {
    if ((uint64_t)draw(seed, walk, step, 0).x < stop) return false;
    first = 1;
  }
  const uint2* __restrict__ de = D.items + h.pos;
  const uint2* __restrict__ dead = de + h.n;
  double wb, wd;
  if (weighted) {
    wb = h.base_weight;
    wd = __dmul_rn((double)h.n, (double)h.max_weight);
  } else {
    wb = (double)deg;
    wd = (double)h.n;
  }
  const double total = __dadd_rn(wb, wd);
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    const uint4 w = draw(seed, walk, step, first + att);
    if (__dmul_rn(__dmul_rn((double)w.z, 0x1p-32), total) < wb) {
      if (deg == 0) continue;
      const uint32_t t = pick_static(tg, al, a, deg, w.x, w.y);
      if (!base_dead(dead, nd, h.dead_bits, t)) {
        next = t;
        return true;
      }
      continue;
    }
    if (h.n == 0) continue;
    const uint32_t i = index(w.w, h.n);
    const uint2 e = __ldg(de + i);
    if (weighted && __fmul_rn(unit24(w.y), h.max_weight) >= __uint_as_float(e.y)) continue;
    if (!delta_dead(dead, nd, h.dead_bits, i, e.x)) {
      next = e.x;
      return true;
    }
  }
  bool found;
  next = overlay_scan(tg, weights, de, dead, h.dead_bits, h.n, nd, a, b, weighted, seed, walk, step, first + kFallbackDraw, &found);
  return found;
}

}  // namespace ws
