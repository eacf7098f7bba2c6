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
// The step reads its vertex's 8-byte record (VertexRecord, below) in place of
// the base's offsets: a vertex without a delta is a vertex whose record
// always takes the base side and has an empty filter, so every lane of a
// warp takes the same first attempt; only an attempt the record cannot
// decide (a side word in the band the record does not resolve, or a target
// in the tombstone filter) reads the head, and redoes that attempt exactly.
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
  const uint64_t* records;   // n_records+1 VertexRecords, for the walk's weighting
  uint64_t n_records;        // max(64*n_words, base_vertices): the vertices recorded
  const uint32_t* dead_edges;  // bit e set when base edge e is dead (overlay_dead_edges; kEdges kernels only)
  const uint32_t* dead_items;  // bit pos+i set when appended edge i of the head at pos is dead (likewise)
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

// VertexRecord (a uint64_t a vertex, built on the device after each copy of
// a delta by overlay_records_build, for one weighting; gpu/overlay.go's
// vertexRecords is its host twin): 32 MiB at scale 22, what the base's
// offsets take, so the L2 holds it as it holds them.
//
//   bits  0-35  the vertex's first base edge (its offset); the next record's
//               is its end, so the degree is the difference
//   bits 36-44  side s in [0, 256]: an attempt whose side word z has
//               z >> 24 < s takes the base side (z*2^-32*total < wb holds
//               for every z below s*2^24); 256 for a vertex without a delta
//   bit  45     the vertex has a delta (its head is found through the marks)
//   bits 46-63  the filter: bit rec_filter_bit(t) set for each tombstone's
//               target t (every bit for a vertex without a live edge, and s
//               0, so its step reads the head and ends there)
constexpr int kRecSideShift = 36;
constexpr int kRecDeltaShift = 45;
constexpr int kRecFilterShift = 46;
constexpr uint32_t kRecFilterBits = 18;
constexpr uint32_t kRecSideAll = 256;
constexpr uint64_t kRecOffsetMask = (1ull << kRecSideShift) - 1;

// rec_filter_bit is the record filter's bit of target t (walk's
// multiplicative hash, its top 32 bits scaled to kRecFilterBits).
__device__ __forceinline__ uint32_t rec_filter_bit(uint32_t t) {
  return (uint32_t)(((((uint64_t)t * 0x9e3779b97f4a7c15ull) >> 32) * kRecFilterBits) >> 32);
}

// base_side is the attempt's choice of the base side on side word z, as
// overlay_step makes it.
__device__ __forceinline__ bool base_side(uint32_t z, double total, double wb) {
  return __dmul_rn(__dmul_rn((double)z, 0x1p-32), total) < wb;
}

// side_weights are the two sides' weights an attempt at a vertex with a
// live delta h and deg base edges chooses between (the CPU engine's
// overlay step, walk/overlay.go): weighted, the base's weight sum against
// the appended edges' count times their largest weight (rejection sampled
// below it); unweighted, the counts. The step and the vertex records use
// the same arithmetic, so a record's side threshold is the step's.
__device__ __forceinline__ void side_weights(const DeltaHead& h, uint32_t deg, bool weighted, double& wb, double& wd) {
  if (weighted) {
    wb = h.base_weight;
    wd = __dmul_rn((double)h.n, (double)h.max_weight);
  } else {
    wb = (double)deg;
    wd = (double)h.n;
  }
}

// record_side is the largest s in [0, 256] with base_side true for every z
// below s*2^24 (base_side is monotone in z: the products round monotonely).
__device__ __forceinline__ uint32_t record_side(double total, double wb) {
  uint32_t lo = 0, hi = kRecSideAll;
  while (lo < hi) {
    const uint32_t m = (lo + hi + 1) >> 1;
    if (base_side((uint32_t)(((uint64_t)m << 24) - 1), total, wb)) lo = m; else hi = m - 1;
  }
  return lo;
}

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

// marked_head is delta_head for a vertex whose record says it has a
// delta: both halves of its word's sector loaded at once, no test between.
__device__ __forceinline__ const DeltaHead* marked_head(const DeltaParams& D, uint32_t v) {
  const uint4* p = reinterpret_cast<const uint4*>(D.words + (v >> 6));
  const uint4 m = __ldg(p), r = __ldg(p + 1);
  const uint64_t base = (uint64_t)m.y << 32 | m.x, patch = (uint64_t)m.w << 32 | m.z;
  const uint32_t b = v & 63;
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

// pick_static_edge is pick_static that also says which base edge it took
// (the column, or for the alias the column's alias), for the dead-edge
// bitmap.
__device__ __forceinline__ uint32_t pick_static_edge(const uint32_t* __restrict__ targets, const AliasEntry* __restrict__ alias,
                                                     uint64_t off, uint32_t deg, uint32_t x, uint32_t y, uint64_t& e) {
  const uint32_t col = index(x, deg);
  if (alias == nullptr) {
    e = off + col;
    return __ldg(targets + off + col);
  }
  const uint4 a = __ldg(reinterpret_cast<const uint4*>(alias + off + col));
  if (unit24(y) < __uint_as_float(a.x)) {
    e = off + col;
    return a.y;
  }
  e = off + a.w;
  return a.z;
}

// overlay_step takes one step from cur on base + delta; false ends the walk
// (dead end, PPR stop). tg and al are the base's targets and alias table
// (al null for an unweighted walk), weights the base's weights (read only
// by the scan of a weighted walk). The first attempt is the record's (one
// path for every lane); the head is read only when it leaves the attempt
// undecided, and the attempts then run from the first again, exactly.
// With kEdges (the engine's default) a target in the record's filter is
// looked up in the dead-edge bitmap (exact for base edges) before the
// head, and the attempts after the head look a target their head's filter
// holds up in the dead-edge and dead-item bitmaps (one load) in place of
// the binary search of the tombstones (a dependent load a halving: on a
// hub with thousands of tombstones, a dozen, which hold the whole warp).
template <bool kPPR, bool kEdges>
__device__ __forceinline__ bool overlay_step(const DeltaParams& D, const uint32_t* __restrict__ tg,
                                             const AliasEntry* __restrict__ al, const float* __restrict__ weights,
                                             bool weighted, uint64_t stop, uint64_t seed, uint64_t walk, uint32_t step,
                                             uint32_t cur, uint32_t& next) {
  if (cur >= D.n_records) return false;
  const uint64_t r = __ldg(D.records + cur);
  const uint64_t a = r & kRecOffsetMask, b = __ldg(D.records + cur + 1) & kRecOffsetMask;
  const uint32_t deg = (uint32_t)(b - a);
  const bool has = ((r >> kRecDeltaShift) & 1) != 0;
  uint32_t first = 0;
  uint4 w = draw(seed, walk, step, 0);
  if (kPPR) {
    // Both stop on draw 0's x; without a delta the base's step picks on
    // its y and z (z = 0 below takes the base side), with one the
    // attempts run from draw 1.
    if ((uint64_t)w.x < stop) return false;
    if (has) {
      first = 1;
      w = draw(seed, walk, step, 1);
    } else {
      w = make_uint4(w.y, w.z, 0, 0);
    }
  }
  if (deg != 0 && (w.z >> 24) < ((uint32_t)(r >> kRecSideShift) & 511)) {
    uint64_t e;
    const uint32_t t = kEdges ? pick_static_edge(tg, al, a, deg, w.x, w.y, e) : pick_static(tg, al, a, deg, w.x, w.y);
    if (((r >> kRecFilterShift) >> rec_filter_bit(t) & 1) == 0 ||
        (kEdges && (__ldg(D.dead_edges + (e >> 5)) >> (e & 31) & 1) == 0)) {
      next = t;
      return true;
    }
  }
  if (!has) return false;  // a vertex without a delta and edges
  // The head's fields in locals, as overlay_node2vec_step reads them too:
  // one helper filling a struct of them for both cost this kernel (40
  // registers) 17-22% of its rate on a 10% delta at scale 22
  // (docs/benchmarks/live-graph.md, "Node2Vec on a delta on the GPU").
  const DeltaHead h = *marked_head(D, cur);
  if ((h.nd_live & kLiveBit) == 0) return false;
  const uint32_t nd = h.nd_live & ~kLiveBit;
  const uint2* __restrict__ de = D.items + h.pos;
  const uint2* __restrict__ dead = de + h.n;
  double wb, wd;
  side_weights(h, deg, weighted, wb, wd);
  const double total = __dadd_rn(wb, wd);
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    const uint4 w = draw(seed, walk, step, first + att);
    if (base_side(w.z, total, wb)) {
      if (deg == 0) continue;
      bool gone;
      uint32_t t;
      if (kEdges) {
        uint64_t e;
        t = pick_static_edge(tg, al, a, deg, w.x, w.y, e);
        gone = (h.dead_bits & dead_bit(t)) != 0 && (__ldg(D.dead_edges + (e >> 5)) >> (e & 31) & 1) != 0;
      } else {
        t = pick_static(tg, al, a, deg, w.x, w.y);
        gone = base_dead(dead, nd, h.dead_bits, t);
      }
      if (!gone) {
        next = t;
        return true;
      }
      continue;
    }
    if (h.n == 0) continue;
    const uint32_t i = index(w.w, h.n);
    const uint2 e = __ldg(de + i);
    if (weighted && __fmul_rn(unit24(w.y), h.max_weight) >= __uint_as_float(e.y)) continue;
    bool gone;
    if (kEdges) {
      const uint64_t k = (uint64_t)h.pos + i;
      gone = (h.dead_bits & dead_bit(e.x)) != 0 && (__ldg(D.dead_items + (k >> 5)) >> (k & 31) & 1) != 0;
    } else {
      gone = delta_dead(dead, nd, h.dead_bits, i, e.x);
    }
    if (!gone) {
      next = e.x;
      return true;
    }
  }
  bool found;
  next = overlay_scan(tg, weights, de, dead, h.dead_bits, h.n, nd, a, b, weighted, seed, walk, step, first + kFallbackDraw, &found);
  return found;
}

// ------------------------------------------------- Node2Vec on a snapshot
// The CPU engine's overlayNode2VecStep (walk/cpu/overlaynode2vec.go) draw
// for draw: a proposal from base + delta (side on x, the base edge on y and
// z or the appended edge on y, its weight kept on z), accepted on w under
// the threshold of its class against the previous vertex in the snapshot;
// a vertex without a delta proposes and accepts as the base's Node2Vec
// step (x, y; z). After kMaxRejections attempts overlay_scan_n2v decides.

// EdgeSet is the snapshot's appended edges as a hash set (built on the
// device by overlay_edge_set_build for Node2Vec jobs): key u<<32|v, value
// the largest index i among u's appended copies of v, open addressing with
// linear probing over mask+1 slots (at most half full). A copy below a
// tombstone's upto is dead, so u->v has a live appended copy when its
// largest is live. The CPU engine scans u's appended edges instead; a hub
// gains hundreds of thousands of them on a 10% delta at scale 22, and a
// scan of them on every Node2Vec acceptance test walked a 10% delta at 3%
// of the base's rate.
struct EdgeSet {
  unsigned long long* keys;  // kEmptyKey: a free slot
  uint32_t* vals;
  uint64_t mask;
};
constexpr unsigned long long kEmptyKey = ~0ull;
// kEdgeSetScan: a vertex with at most this many appended edges is scanned
// (a sector or two) rather than looked up.
constexpr uint32_t kEdgeSetScan = 8;

__device__ __forceinline__ uint64_t edge_set_slot(unsigned long long key, uint64_t mask) {
  return (key * 0x9e3779b97f4a7c15ull >> 17) & mask;
}

// edge_set_max returns 1 + the largest index of u's appended copies of v,
// or 0 when u appended none.
__device__ __forceinline__ uint64_t edge_set_max(const EdgeSet& S, uint32_t u, uint32_t v) {
  const unsigned long long key = (unsigned long long)u << 32 | v;
  for (uint64_t h = edge_set_slot(key, S.mask);; h = (h + 1) & S.mask) {
    const unsigned long long k = __ldg(S.keys + h);
    if (k == key) return (uint64_t)__ldg(S.vals + h) + 1;
    if (k == kEmptyKey) return 0;
  }
}

// overlay_has_edge reports whether the snapshot holds a live edge u->v
// (overlayHasEdge): a base edge (binary search of u's sorted targets) no
// tombstone of u kills, or an appended edge of u no tombstone kills (a
// short delta scanned, a longer one looked up in the edge set).
__device__ __noinline__ bool overlay_has_edge(const DeltaParams& D, const EdgeSet& S, const uint32_t* __restrict__ tg, uint32_t u, uint32_t v) {
  const uint64_t a = __ldg(D.records + u) & kRecOffsetMask, b = __ldg(D.records + u + 1) & kRecOffsetMask;
  const DeltaHead* hp = delta_head(D, u);
  const bool base = a < b && has_edge(tg, a, b, v);
  if (hp == nullptr) return base;
  const DeltaHead h = *hp;
  const uint2* __restrict__ de = D.items + h.pos;
  const uint2* __restrict__ dead = de + h.n;
  const uint32_t nd = h.nd_live & ~kLiveBit;
  if (base && !base_dead(dead, nd, h.dead_bits, v)) return true;
  if (h.n > kEdgeSetScan) {
    const uint64_t m = edge_set_max(S, u, v);
    return m != 0 && !delta_dead(dead, nd, h.dead_bits, (uint32_t)(m - 1), v);
  }
  for (uint32_t i = 0; i < h.n; i++) {
    if (__ldg(&de[i].x) == v && !delta_dead(dead, nd, h.dead_bits, i, v)) return true;
  }
  return false;
}

// n2v_accepts: word z accepts proposal x after prev under accept (the
// thresholds of f/fmax by class: returning, neighbour of prev, outward);
// z under both the neighbour and outward thresholds accepts, and at or
// over both rejects, without the search (walk/cpu's n2vAccepts).
__device__ __forceinline__ bool n2v_accepts(const DeltaParams& D, const EdgeSet& S, const uint32_t* __restrict__ tg,
                                            const uint64_t* accept, uint32_t prev, uint32_t x, uint64_t z) {
  if (x == prev) return z < accept[0];
  if (z < min(accept[1], accept[2])) return true;
  if (z >= max(accept[1], accept[2])) return false;
  return z < accept[overlay_has_edge(D, S, tg, prev, x) ? 1 : 2];
}

// n2v_factor is the bias of x after prev: f[class].
__device__ __forceinline__ double n2v_factor(const DeltaParams& D, const EdgeSet& S, const uint32_t* __restrict__ tg,
                                             const double* f, uint32_t prev, uint32_t x) {
  return x == prev ? f[0] : overlay_has_edge(D, S, tg, prev, x) ? f[1] : f[2];
}

// overlay_scan_n2v is overlayScanBiased with Node2Vec's bias: one draw
// (kFallbackDraw), the live edges' weight x bias summed in the CPU's order
// (base edges, then appended ones), then walked down; the last live edge
// of positive weight when rounding leaves u above the sum. hp null: a
// vertex without a delta (every base edge live).
__device__ __noinline__ uint32_t overlay_scan_n2v(const DeltaParams& D, const EdgeSet& S, const uint32_t* __restrict__ tg,
                                                  const float* __restrict__ weights, bool weighted, const DeltaHead* hp,
                                                  uint64_t a, uint64_t b, uint32_t prev, const double* f, uint64_t seed,
                                                  uint64_t walk, uint32_t step, bool* found) {
  uint32_t n = 0, nd = 0;
  uint64_t dbits = 0;
  const uint2* de = nullptr;
  const uint2* dead = nullptr;
  if (hp != nullptr) {
    const DeltaHead h = *hp;
    n = h.n;
    nd = h.nd_live & ~kLiveBit;
    dbits = h.dead_bits;
    de = D.items + h.pos;
    dead = de + n;
  }
  double sum = 0;
  for (uint64_t e = a; e < b; e++) {
    const uint32_t t = __ldg(tg + e);
    if (base_dead(dead, nd, dbits, t)) continue;
    sum = __dadd_rn(sum, __dmul_rn(weighted ? (double)__ldg(weights + e) : 1.0, n2v_factor(D, S, tg, f, prev, t)));
  }
  for (uint32_t i = 0; i < n; i++) {
    const uint2 x = __ldg(de + i);
    if (delta_dead(dead, nd, dbits, i, x.x)) continue;
    sum = __dadd_rn(sum, __dmul_rn(weighted ? (double)__uint_as_float(x.y) : 1.0, n2v_factor(D, S, tg, f, prev, x.x)));
  }
  const uint4 w = draw(seed, walk, step, kFallbackDraw);
  double u = __dmul_rn(__dmul_rn(__dadd_rn((double)w.x, __dmul_rn((double)w.y, 0x1p-32)), 0x1p-32), sum);
  uint32_t last = 0;
  *found = false;
  for (uint64_t e = a; e < b; e++) {
    const uint32_t t = __ldg(tg + e);
    if (base_dead(dead, nd, dbits, t)) continue;
    const double wt = __dmul_rn(weighted ? (double)__ldg(weights + e) : 1.0, n2v_factor(D, S, tg, f, prev, t));
    u = __dsub_rn(u, wt);
    if (u < 0) {
      *found = true;
      return t;
    }
    if (wt > 0) {
      last = t;
      *found = true;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    const uint2 x = __ldg(de + i);
    if (delta_dead(dead, nd, dbits, i, x.x)) continue;
    const double wt = __dmul_rn(weighted ? (double)__uint_as_float(x.y) : 1.0, n2v_factor(D, S, tg, f, prev, x.x));
    u = __dsub_rn(u, wt);
    if (u < 0) {
      *found = true;
      return x.x;
    }
    if (wt > 0) {
      last = x.x;
      *found = true;
    }
  }
  return last;
}

// overlay_node2vec_step takes walk's step from cur after prev (kNoVertex
// on the first step: DeepWalk's overlay step); false ends the walk.
__device__ __forceinline__ bool overlay_node2vec_step(const DeltaParams& D, const EdgeSet& S, const uint32_t* __restrict__ tg,
                                                      const AliasEntry* __restrict__ al, const float* __restrict__ weights,
                                                      bool weighted, const uint64_t* accept, const double* f, uint64_t seed,
                                                      uint64_t walk, uint32_t step, uint32_t prev, uint32_t cur, uint32_t& next) {
  if (prev == kNoVertex) return overlay_step<false, false>(D, tg, al, weights, weighted, 0, seed, walk, step, cur, next);
  if (cur >= D.n_records) return false;
  const uint64_t r = __ldg(D.records + cur);
  const uint64_t a = r & kRecOffsetMask, b = __ldg(D.records + cur + 1) & kRecOffsetMask;
  const uint32_t deg = (uint32_t)(b - a);
  bool found;
  if (((r >> kRecDeltaShift) & 1) == 0) {
    if (deg == 0) return false;
    for (uint32_t att = 0; att < kMaxRejections; att++) {
      const uint4 w = draw(seed, walk, step, att);
      const uint32_t x = pick_static(tg, al, a, deg, w.x, w.y);
      if (n2v_accepts(D, S, tg, accept, prev, x, w.z)) {
        next = x;
        return true;
      }
    }
    next = overlay_scan_n2v(D, S, tg, weights, weighted, nullptr, a, b, prev, f, seed, walk, step, &found);
    return found;
  }
  const DeltaHead* hp = marked_head(D, cur);
  const DeltaHead h = *hp;
  if ((h.nd_live & kLiveBit) == 0) return false;
  const uint32_t nd = h.nd_live & ~kLiveBit;
  const uint2* __restrict__ de = D.items + h.pos;
  const uint2* __restrict__ dead = de + h.n;
  double wb, wd;
  side_weights(h, deg, weighted, wb, wd);
  const double total = __dadd_rn(wb, wd);
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    const uint4 w = draw(seed, walk, step, att);
    uint32_t x;
    if (base_side(w.x, total, wb)) {
      if (deg == 0) continue;
      x = pick_static(tg, al, a, deg, w.y, w.z);
      if (base_dead(dead, nd, h.dead_bits, x)) continue;
    } else {
      if (h.n == 0) continue;
      const uint32_t i = index(w.y, h.n);
      const uint2 e = __ldg(de + i);
      if ((weighted && __fmul_rn(unit24(w.z), h.max_weight) >= __uint_as_float(e.y)) || delta_dead(dead, nd, h.dead_bits, i, e.x)) continue;
      x = e.x;
    }
    if (n2v_accepts(D, S, tg, accept, prev, x, w.w)) {
      next = x;
      return true;
    }
  }
  next = overlay_scan_n2v(D, S, tg, weights, weighted, hp, a, b, prev, f, seed, walk, step, &found);
  return found;
}

// ------------------------------------------------- MetaPath on a snapshot
// The CPU engine's overlayMetaPathStep (walk/cpu/overlaymetapath.go) draw
// for draw, on the label tables (segment (v, L) of the step's label L): a
// vertex without a delta steps as the base's MetaPath step (the segment
// pick on x, y); one with a delta takes the side on z (the segment's
// weight, or length, against the appended edges' count times their
// largest weight, or count), the segment's edge on x and y, taken unless a
// tombstone kills it, or appended edge index(w, n), kept when labelled L,
// under the weight draw on y (weighted) and not dead. After kMaxRejections
// attempts overlay_scan_label decides.

// MetaPathArgs are the tables MetaPath's overlay step reads beside the
// walk's parameters: the appended edges' labels (by item, as D.items) and,
// for a weighted walk, each segment's weight sum (the CPU's
// labelWeightSums, built by label_weight_sums).
struct MetaPathArgs {
  const uint8_t* dlabels;
  const double* seg_sums;
};

// overlay_scan_label is overlayScanBiased with MetaPath's bias (1 on an
// edge labelled want, 0 on the others): over the vertex's whole base
// adjacency [a, b) (base labels lab) and its appended edges. It and
// overlay_scan_n2v share their shape and differ in the edge's weight. One
// template over the weight for both (lambdas for the base and appended
// edges' weights) passed the overlay tests but cost Node2Vec on a delta a
// quarter of its rate (517 -> 390-398 M steps/s at scale 22, by reference
// or by value), so each keeps its own loops.
__device__ __noinline__ uint32_t overlay_scan_label(const DeltaParams& D, const uint32_t* __restrict__ tg,
                                                    const float* __restrict__ weights, const uint8_t* __restrict__ lab,
                                                    const uint8_t* __restrict__ dlab, bool weighted, const DeltaHead& h,
                                                    uint64_t a, uint64_t b, uint32_t want, uint64_t seed, uint64_t walk,
                                                    uint32_t step, bool* found) {
  const uint32_t nd = h.nd_live & ~kLiveBit;
  const uint2* __restrict__ de = D.items + h.pos;
  const uint2* __restrict__ dead = de + h.n;
  double sum = 0;
  for (uint64_t e = a; e < b; e++) {
    if (base_dead(dead, nd, h.dead_bits, __ldg(tg + e))) continue;
    if (__ldg(lab + e) == want) sum = __dadd_rn(sum, weighted ? (double)__ldg(weights + e) : 1.0);
  }
  for (uint32_t i = 0; i < h.n; i++) {
    const uint2 x = __ldg(de + i);
    if (delta_dead(dead, nd, h.dead_bits, i, x.x)) continue;
    if (__ldg(dlab + h.pos + i) == want) sum = __dadd_rn(sum, weighted ? (double)__uint_as_float(x.y) : 1.0);
  }
  const uint4 w = draw(seed, walk, step, kFallbackDraw);
  double u = __dmul_rn(__dmul_rn(__dadd_rn((double)w.x, __dmul_rn((double)w.y, 0x1p-32)), 0x1p-32), sum);
  uint32_t last = 0;
  *found = false;
  for (uint64_t e = a; e < b; e++) {
    const uint32_t t = __ldg(tg + e);
    if (base_dead(dead, nd, h.dead_bits, t)) continue;
    const double wt = __ldg(lab + e) == want ? (weighted ? (double)__ldg(weights + e) : 1.0) : 0.0;
    u = __dsub_rn(u, wt);
    if (u < 0) {
      *found = true;
      return t;
    }
    if (wt > 0) {
      last = t;
      *found = true;
    }
  }
  for (uint32_t i = 0; i < h.n; i++) {
    const uint2 x = __ldg(de + i);
    if (delta_dead(dead, nd, h.dead_bits, i, x.x)) continue;
    const double wt = __ldg(dlab + h.pos + i) == want ? (weighted ? (double)__uint_as_float(x.y) : 1.0) : 0.0;
    u = __dsub_rn(u, wt);
    if (u < 0) {
      *found = true;
      return x.x;
    }
    if (wt > 0) {
      last = x.x;
      *found = true;
    }
  }
  return last;
}

// overlay_metapath_step takes walk's step from cur toward label want; false
// ends the walk. P is the walk's parameters (label tables, base arrays).
__device__ __forceinline__ bool overlay_metapath_step(const DeltaParams& D, const MetaPathArgs& M, const WalkParams& P,
                                                      bool weighted, uint32_t want, uint64_t seed, uint64_t walk,
                                                      uint32_t step, uint32_t cur, uint32_t& next) {
  if (cur >= D.n_records) return false;
  const uint64_t r = __ldg(D.records + cur);
  const uint32_t nl = (uint32_t)P.num_labels;
  uint64_t sa = 0, sb = 0;
  if (cur < D.base_vertices) {
    const uint64_t s = (uint64_t)cur * nl + want;
    sa = __ldg(P.seg_offsets + s);
    sb = __ldg(P.seg_offsets + s + 1);
  }
  if (((r >> kRecDeltaShift) & 1) == 0) {
    // Only base vertices lack a delta (every added one has one).
    if (sa == sb) return false;
    const uint4 w = draw(seed, walk, step, 0);
    next = pick_static(P.seg_targets, P.seg_alias, sa, (uint32_t)(sb - sa), w.x, w.y);
    return true;
  }
  const DeltaHead h = *marked_head(D, cur);
  if ((h.nd_live & kLiveBit) == 0) return false;
  const uint32_t nd = h.nd_live & ~kLiveBit;
  const uint2* __restrict__ de = D.items + h.pos;
  const uint2* __restrict__ dead = de + h.n;
  const uint8_t* __restrict__ dlab = M.dlabels + h.pos;
  if (sa == sb) {
    bool any = false;
    for (uint32_t i = 0; i < h.n && !any; i++) any = __ldg(dlab + i) == want;
    if (!any) return false;  // no edge labelled want, live or dead
  }
  double wb = (double)(sb - sa), wd = (double)h.n;
  if (weighted) {
    if (sa < sb) wb = __ldg(M.seg_sums + (uint64_t)cur * nl + want);
    wd = __dmul_rn(wd, (double)h.max_weight);
  }
  const double total = __dadd_rn(wb, wd);
  for (uint32_t att = 0; att < kMaxRejections; att++) {
    const uint4 w = draw(seed, walk, step, att);
    if (base_side(w.z, total, wb)) {
      const uint32_t t = pick_static(P.seg_targets, P.seg_alias, sa, (uint32_t)(sb - sa), w.x, w.y);
      if (!base_dead(dead, nd, h.dead_bits, t)) {
        next = t;
        return true;
      }
      continue;
    }
    if (h.n == 0) continue;
    const uint32_t i = index(w.w, h.n);
    const uint2 e = __ldg(de + i);
    if (__ldg(dlab + i) != want || (weighted && __fmul_rn(unit24(w.y), h.max_weight) >= __uint_as_float(e.y)) ||
        delta_dead(dead, nd, h.dead_bits, i, e.x)) {
      continue;
    }
    next = e.x;
    return true;
  }
  const uint64_t a = r & kRecOffsetMask, b = __ldg(D.records + cur + 1) & kRecOffsetMask;
  bool found;
  next = overlay_scan_label(D, P.targets, P.weights, P.labels, M.dlabels, weighted, h, a, b, want, seed, walk, step, &found);
  return found;
}

// label_weight_sums_build writes sums[v*nl+l], the weight sum of vertex v's
// edges labelled l, added in the CSR's order as the CPU engine's
// labelWeightSums adds them (a thread a vertex, grid-stride).
__device__ __forceinline__ void label_weight_sums_build(const uint64_t* __restrict__ offsets, const float* __restrict__ weights,
                                                        const uint8_t* __restrict__ labels, uint64_t nv, uint32_t nl,
                                                        double* __restrict__ sums) {
  for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += (uint64_t)gridDim.x * blockDim.x) {
    double* row = sums + v * nl;
    for (uint32_t l = 0; l < nl; l++) row[l] = 0;
    for (uint64_t e = offsets[v]; e < offsets[v + 1]; e++) {
      const uint8_t l = labels[e];
      row[l] = __dadd_rn(row[l], (double)weights[e]);
    }
  }
}

// overlay_records_build writes records[v] for v in [0, n_records], one
// thread a vertex (grid-stride): weighted picks the weights the side
// threshold is computed with (the walk's, as overlay_step's wb and wd).
__device__ __forceinline__ void overlay_records_build(const DeltaParams& D, const uint64_t* __restrict__ offsets,
                                                      bool weighted, uint64_t* __restrict__ records) {
  const uint64_t base_vertices = D.base_vertices;
  for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v <= D.n_records; v += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t a = offsets[v < base_vertices ? v : base_vertices];
    uint64_t rec = a;
    const DeltaHead* hp = v < D.n_records ? delta_head(D, (uint32_t)v) : nullptr;
    if (v == D.n_records) {
      // The end: only its offset, the last vertex's end.
    } else if (hp == nullptr) {
      rec |= (uint64_t)kRecSideAll << kRecSideShift;
    } else {
      const DeltaHead h = *hp;
      uint32_t s = 0;
      uint64_t filter = (1ull << kRecFilterBits) - 1;
      if ((h.nd_live & kLiveBit) != 0) {
        const uint32_t deg = v < base_vertices ? (uint32_t)(offsets[v + 1] - a) : 0;
        double wb, wd;
        side_weights(h, deg, weighted, wb, wd);
        s = record_side(__dadd_rn(wb, wd), wb);
        filter = 0;
        const uint2* dead = D.items + h.pos + h.n;
        const uint32_t nd = h.nd_live & ~kLiveBit;
        for (uint32_t i = 0; i < nd && filter != (1ull << kRecFilterBits) - 1; i++) filter |= 1ull << rec_filter_bit(dead[i].x);
      }
      rec |= (uint64_t)s << kRecSideShift | 1ull << kRecDeltaShift | filter << kRecFilterShift;
    }
    records[v] = rec;
  }
}

// overlay_dead_edges_build sets bit e of dead (cleared before) for each
// dead base edge e: an edge of a vertex with a delta whose target has a
// tombstone (base_dead); and bit pos+i of items_dead (cleared before) for
// each dead appended edge i of the head at pos (delta_dead). A warp a
// vertex, its lanes over the edges.
__device__ __forceinline__ void overlay_dead_edges_build(const DeltaParams& D, const uint64_t* __restrict__ offsets,
                                                         const uint32_t* __restrict__ targets, uint32_t* dead,
                                                         uint32_t* items_dead) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
  for (uint64_t v = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; v < D.n_records; v += warps) {
    const DeltaHead* hp = delta_head(D, (uint32_t)v);
    if (hp == nullptr) continue;
    const DeltaHead h = *hp;
    const uint32_t nd = h.nd_live & ~kLiveBit;
    if (nd == 0) continue;
    const uint2* de = D.items + h.pos;
    const uint2* tomb = de + h.n;
    if (v < D.base_vertices) {
      const uint64_t a = offsets[v], b = offsets[v + 1];
      for (uint64_t e = a + lane; e < b; e += 32) {
        if (base_dead(tomb, nd, h.dead_bits, __ldg(targets + e))) atomicOr(dead + (e >> 5), 1u << (e & 31));
      }
    }
    for (uint32_t i = lane; i < h.n; i += 32) {
      if (delta_dead(tomb, nd, h.dead_bits, i, __ldg(&de[i].x))) {
        const uint64_t k = (uint64_t)h.pos + i;
        atomicOr(items_dead + (k >> 5), 1u << (k & 31));
      }
    }
  }
}

// overlay_edge_set_build inserts every appended edge of the snapshot into
// S (keys all kEmptyKey and values 0 before): a warp a vertex with more
// than kEdgeSetScan of them (the others are scanned), its lanes over the
// edges; the value ends as the largest index of the key's copies.
__device__ __forceinline__ void overlay_edge_set_build(const DeltaParams& D, EdgeSet S) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t)gridDim.x * blockDim.x / 32;
  for (uint64_t v = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; v < D.n_records; v += warps) {
    const DeltaHead* hp = delta_head(D, (uint32_t)v);
    if (hp == nullptr) continue;
    const DeltaHead h = *hp;
    if (h.n <= kEdgeSetScan) continue;
    const uint2* de = D.items + h.pos;
    for (uint32_t i = lane; i < h.n; i += 32) {
      const unsigned long long key = v << 32 | __ldg(&de[i].x);
      for (uint64_t s = edge_set_slot(key, S.mask);; s = (s + 1) & S.mask) {
        const unsigned long long k = atomicCAS(S.keys + s, kEmptyKey, key);
        if (k == kEmptyKey || k == key) {
          atomicMax(S.vals + s, i);
          break;
        }
      }
    }
  }
}

}  // namespace ws
