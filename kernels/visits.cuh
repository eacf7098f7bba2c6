// visits.cuh: Pixie-style visit counting on the device, the twin of
// walk/visits/visits.go (its file comment defines which walks are counted).
//
//   visits_count    one block per (query, seed): blocks of 512 walks (two
//                   adjacent walks a thread, visits.VisitBlockWalks) are walked
//                   once for their lengths, an exclusive block scan gives each
//                   walk's place in the seed's step budget, and the walks are
//                   walked again counting the steps that fit into the query's
//                   hash table (global memory, atomics)
//   visits_compact  one block per table: moves the used slots to the table's
//                   front, in slot order, and when the query has a limit
//                   keeps only its best candidates (a radix select of the
//                   limit-th largest visit key), so only they are copied back
//
// Only the O(1) first-order walks run here (DeepWalk and PPR on the uniform
// or alias sampler, the arithmetic of walk_thread_body); the engine leaves
// the rest, and early stopping, to the host.
#pragma once
#include "params.cuh"
#include "rng.cuh"
#include "samplers.cuh"
#include "scan.cuh"
#include "placement.cuh"

namespace ws {

constexpr int kVisitThreads = kPackThreads;            // 256 threads a block (the scan's width)
constexpr int kVisitBlockWalks = 2 * kVisitThreads;    // visits.VisitBlockWalks: two adjacent walks a thread
constexpr uint32_t kVisitCounterTag = 0x56495354u;     // "VIST", visits.VisitBlockSeed

// VisitTask is one seed of one query (device memory, 40 bytes). Queries of
// several requests share a launch, each task keyed by its own request.
struct VisitTask {
  uint32_t start;       // dense seed vertex
  uint32_t query;       // the query's index in its request (Philox counter word 0)
  uint32_t seed_index;  // the seed's index in its query (counter word 1)
  uint32_t table;       // the query's table in this launch
  uint64_t budget;      // steps; ~0 without a budget (walks per seed)
  uint64_t cap;         // walks
  uint64_t rng;         // the request's seed (the Philox key)
};

// visit_add counts one visit of v in a table of 2^bits slots; a slot packs
// vertex+1 (high word, 0: empty) and the count (low word). A stale read is
// harmless: a key never changes once set, and the CAS decides races.
__device__ __forceinline__ void visit_add(unsigned long long* table, uint32_t bits, uint32_t v) {
  const unsigned long long key = (unsigned long long)(v + 1) << 32;
  const uint32_t mask = (1u << bits) - 1;
  for (uint32_t h = (v * 0x9E3779B1u) >> (32 - bits);; h = (h + 1) & mask) {
    const unsigned long long s = table[h];
    if ((s & 0xFFFFFFFF00000000ull) == key) {
      atomicAdd(table + h, 1ull);
      return;
    }
    if (s == 0) {
      const unsigned long long old = atomicCAS(table + h, 0ull, key | 1ull);
      if (old == 0) return;
      if ((old & 0xFFFFFFFF00000000ull) == key) {
        atomicAdd(table + h, 1ull);
        return;
      }
    }
  }
}

// visit_walk walks (seed, walk) from start for at most limit steps, as
// walk_thread_body does in modes static and PPR, counting each arrival in
// table when it is not null. It returns the steps taken.
template <bool kPPR>
__device__ __forceinline__ uint32_t visit_walk(const WalkParams& P, uint64_t seed, uint64_t walk, uint32_t start,
                                               uint32_t limit, unsigned long long* table, uint32_t bits) {
  uint32_t cur = start, step = 0, deg;
  uint64_t off = vertex_edges(P.offsets, P.place, cur, deg);
  while (step < limit && deg > 0) {
    const uint4 w = draw(seed, walk, step, 0);
    const bool host = off >= P.split;
    const uint32_t* tg = host ? P.h_targets : P.targets;
    const AliasEntry* al = host ? P.h_alias : P.alias;
    uint32_t next;
    if (kPPR) {
      if ((uint64_t)w.x < P.stop_threshold) break;
      next = pick_static(tg, al, off, deg, w.y, w.z);
    } else {
      next = pick_static(tg, al, off, deg, w.x, w.y);
    }
    step++;
    cur = next;
    if (table != nullptr) visit_add(table, bits, cur);
    off = vertex_edges(P.offsets, P.place, cur, deg);
  }
  return step;
}

template <bool kPPR>
__device__ __forceinline__ void visits_count_body(const WalkParams* __restrict__ params, const VisitTask* __restrict__ tasks,
                                                  unsigned long long* __restrict__ tables, uint32_t bits,
                                                  unsigned long long* __restrict__ out) {
  __shared__ PackScanStorage scan_scratch;
  const WalkParams& P = *params;
  const VisitTask t = tasks[blockIdx.x];
  unsigned long long* table = tables + ((uint64_t)t.table << bits);
  uint64_t spent = 0, walks = 0, walked = 0;
  const bool dead = P.offsets[t.start + 1] == P.offsets[t.start];  // a seed without out-edges takes no step
  const uint32_t limit = (uint32_t)P.length;
  for (uint32_t b = 0; !dead && spent < t.budget && (uint64_t)b * kVisitBlockWalks < t.cap; b++) {
    const uint4 x = philox4x32_10(make_uint4(t.query, t.seed_index, b, kVisitCounterTag), (uint32_t)t.rng, (uint32_t)(t.rng >> 32));
    const uint64_t seed = (uint64_t)x.x | ((uint64_t)x.y << 32);
    const uint32_t k0 = 2 * threadIdx.x, k1 = k0 + 1;  // walk ids in the block
    const uint64_t j0 = (uint64_t)b * kVisitBlockWalks + k0;
    const bool live0 = j0 < t.cap, live1 = j0 + 1 < t.cap;
    const uint32_t l0 = live0 ? visit_walk<kPPR>(P, seed, k0, t.start, limit, nullptr, bits) : 0;
    const uint32_t l1 = live1 ? visit_walk<kPPR>(P, seed, k1, t.start, limit, nullptr, bits) : 0;
    uint32_t total;
    const uint32_t p0 = block_exclusive_scan_u32(l0 + l1, scan_scratch, total);
    const uint32_t p1 = p0 + l0;
    const uint64_t room = t.budget - spent;  // > 0
    const bool c0 = live0 && p0 < room, c1 = live1 && p1 < room;
    if (c0) {
      const uint32_t n = (uint32_t)min((uint64_t)l0, room - p0);
      if (n > 0) visit_walk<kPPR>(P, seed, k0, t.start, n, table, bits);
    }
    if (c1) {
      const uint32_t n = (uint32_t)min((uint64_t)l1, room - p1);
      if (n > 0) visit_walk<kPPR>(P, seed, k1, t.start, n, table, bits);
    }
    walks += __syncthreads_count(c0) + __syncthreads_count(c1);
    walked += total;
    spent += min((uint64_t)total, room);
  }
  if (threadIdx.x == 0) {
    out[3 * blockIdx.x] = spent;
    out[3 * blockIdx.x + 1] = walks;
    out[3 * blockIdx.x + 2] = walked;
  }
}

}  // namespace ws

extern "C" __global__ void __launch_bounds__(ws::kVisitThreads) visits_count_static(const ws::WalkParams* __restrict__ p,
    const ws::VisitTask* __restrict__ tasks, unsigned long long* __restrict__ tables, uint32_t bits,
    unsigned long long* __restrict__ out) {
  ws::visits_count_body<false>(p, tasks, tables, bits, out);
}

extern "C" __global__ void __launch_bounds__(ws::kVisitThreads) visits_count_ppr(const ws::WalkParams* __restrict__ p,
    const ws::VisitTask* __restrict__ tasks, unsigned long long* __restrict__ tables, uint32_t bits,
    unsigned long long* __restrict__ out) {
  ws::visits_count_body<true>(p, tasks, tables, bits, out);
}

namespace ws {

// visit_key orders a packed slot (vertex+1 << 32 | count) as the
// candidates are ordered, more visits first, then the smaller vertex id: a
// larger key is a better candidate. Keys of used slots are distinct.
__device__ __forceinline__ unsigned long long visit_key(unsigned long long s) {
  return (s << 32) | (0xFFFFFFFFull - (s >> 32));
}

// compact_slots moves the slots of table[0, n) that keep(slot) accepts to the
// table's front, in slot order, and returns how many there are. Writes
// never pass reads: a tile is read into registers before any of it is
// written, and the write position never exceeds the read position.
template <typename Keep>
__device__ __forceinline__ uint64_t compact_slots(unsigned long long* table, uint64_t n, Keep keep,
                                                  PackScanStorage& scan_scratch) {
  uint64_t kept = 0;
  for (uint64_t base = 0; base < n; base += kVisitThreads) {
    const uint64_t i = base + threadIdx.x;
    const unsigned long long s = i < n ? table[i] : 0ull;
    const bool k = i < n && keep(s);
    uint32_t total;
    const uint32_t before = block_exclusive_scan_u32(k ? 1u : 0u, scan_scratch, total);
    if (k) table[kept + before] = s;
    kept += total;
    __syncthreads();
  }
  return kept;
}

// visit_threshold is the limit-th largest key of table[0, n) (limit < n),
// by a most-significant-digit radix select, 8 bits a pass: each pass
// counts the digits of the keys that share the prefix chosen so far and
// picks the digit holding the limit-th. A pass whose chosen digit is
// taken whole ends the search early: every key at or above the prefix
// (low bits zero) is then among the limit largest.
__device__ unsigned long long visit_threshold(const unsigned long long* table, uint64_t n, uint32_t limit,
                                              PackScanStorage& scan_scratch) {
  __shared__ uint32_t hist[256];
  __shared__ unsigned long long prefix_s;
  __shared__ uint32_t remaining_s, whole_s;
  unsigned long long prefix = 0, mask = 0;
  uint32_t remaining = limit;
  for (int shift = 56; shift >= 0; shift -= 8) {
    hist[threadIdx.x] = 0;
    __syncthreads();
    for (uint64_t i = threadIdx.x; i < n; i += kVisitThreads) {
      const unsigned long long k = visit_key(table[i]);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255], 1u);
    }
    __syncthreads();
    // Thread t holds digit 255-t: the exclusive scan is the count of keys
    // with a larger digit.
    const uint32_t digit = 255 - threadIdx.x, h = hist[digit];
    uint32_t total;
    const uint32_t above = block_exclusive_scan_u32(h, scan_scratch, total);
    if (above < remaining && remaining <= above + h) {
      prefix_s = prefix | ((unsigned long long)digit << shift);
      remaining_s = remaining - above;
      whole_s = remaining - above == h;
    }
    __syncthreads();
    prefix = prefix_s;
    remaining = remaining_s;
    mask |= 255ull << shift;
    if (whole_s) break;
    __syncthreads();
  }
  return prefix;
}

}  // namespace ws

// visits_compact: block q moves table q's used slots to its front, in slot
// order, and writes their number to used[q]. When limits[q] is not zero and
// fewer than the used slots, only the limits[q] best candidates are kept
// (visit_key): the host's top k, after its exclusions, is within them when
// limits[q] is at least k plus the vertices the query excludes.
extern "C" __global__ void __launch_bounds__(ws::kVisitThreads) visits_compact(unsigned long long* __restrict__ tables,
    uint32_t bits, unsigned long long* __restrict__ used, const uint32_t* __restrict__ limits) {
  __shared__ ws::PackScanStorage scan_scratch;
  unsigned long long* table = tables + ((uint64_t)blockIdx.x << bits);
  uint64_t kept = ws::compact_slots(table, 1ull << bits, [](unsigned long long s) { return s != 0; }, scan_scratch);
  const uint32_t limit = limits != nullptr ? limits[blockIdx.x] : 0;
  if (limit > 0 && kept > limit) {
    const unsigned long long t = ws::visit_threshold(table, kept, limit, scan_scratch);
    kept = ws::compact_slots(table, kept, [t](unsigned long long s) { return ws::visit_key(s) >= t; }, scan_scratch);
  }
  if (threadIdx.x == 0) used[blockIdx.x] = kept;
}
