// sample_fire.cuh: forest-fire and snowball sampling on the device, the
// twin of graphsample.Sample's ForestFire and Snowball (graphsample/sampleinstance.go:
// sampler.fire; graphsample/select.go: rejectionWhere, selectFunc), word for word:
// the samples are the CPU's.
//
//   sample_fire  one warp an instance (a warp takes list[warp], list[warp +
//                nwarps], ...), every hop in one launch. Frontier vertex j
//                of hop h (in frontier order; the frontier of hop h > 0 is
//                the targets hop h-1 emitted, in emission order):
//                1. forest fire draws its burn count x from the word at
//                   {instance, j, h, 0xFFFFFFFF} (burn_count); x = 0 burns
//                   nothing;
//                2. a candidate is an out-edge whose target is not in the
//                   sample, the first edge to it (adjacency is sorted, so
//                   a vertex's candidates have distinct targets);
//                3. forest fire with n > 4x: draws with rejection of taken
//                   edges and non-candidates (32 a round, one per lane,
//                   accepted in draw order by the warp), 16x + 64 at most;
//                   otherwise, or when they run out, x < candidates takes x
//                   rounds of a warp argmin over the candidates' reservoir
//                   keys (recomputed each round), and x >= candidates (and
//                   snowball) takes every candidate, 32 a ballot;
//                4. the picks, ascending, are emitted until the sample
//                   holds max_vertices vertices (seed included).
//
// Memory: the graph and cum (graphsample.WeightCDF) in global memory, read only.
// Each warp owns one slice of `scratch` (global; `per_warp` bytes): the
// instance's edges as they are emitted (ecap of them: edge index, source,
// target; the targets are also the next frontier), its visited set as an
// open-addressing table of 2^hlog vertices (empty = 0xFFFFFFFF; filled by
// atomicCAS, read through L2 with __ldcg, emptied slot by slot when the
// instance is done, so the host clears it once a launch), and 2 * kcap
// picks (and their sort buffer). An instance that outgrows ecap or kcap
// stops with status kFireGrow and the host runs it again with larger
// slices. A finished instance reserves its edges in the pool (global,
// pool_cap edges, one atomic cursor) and copies them there; status
// kFirePoolFull when the pool is full (count holds its edges, for the
// host's next pool). Per list entry i: status[i], off[i] (its first edge
// in the pool), count[i], hop_end[i*depth + h] (its edges after hop h).
#pragma once
#include <stdint.h>
#include "rng.cuh"
#include "sample.cuh"

namespace ws {

constexpr uint32_t kBurnCandidate = 0xFFFFFFFFu;  // walk.burnCandidate
constexpr uint32_t kFireEmpty = 0xFFFFFFFFu;       // an empty slot of the visited set
constexpr uint32_t kMaxBurn = 1u << 24;           // walk.MaxSampleVertices
constexpr uint32_t kFireDone = 0, kFireGrow = 1, kFirePoolFull = 2;

// burn_count is walk.burnCount: floor(log(u) / log(p)), u = (w + 1) / 2^32,
// with log(p) computed by the host (math.Log) so only log(u) is the
// device's (within an ulp of Go's).
__device__ __forceinline__ uint32_t burn_count(uint32_t w, double logp) {
  const double u = __ddiv_rn(__dadd_rn((double)w, 1.0), 4294967296.0);
  const double x = floor(__ddiv_rn(log(u), logp));
  return x > (double)kMaxBurn ? kMaxBurn : (uint32_t)x;
}

// VisitSet is an instance's visited vertices (linear probing).
struct VisitSet {
  uint32_t* slot;
  uint32_t hlog;
  __device__ __forceinline__ uint32_t home(uint32_t v) const { return (v * 2654435761u) >> (32 - hlog); }
  __device__ __forceinline__ uint32_t mask() const { return (1u << hlog) - 1; }
  __device__ __forceinline__ bool contains(uint32_t v) const {
    for (uint32_t i = home(v);; i = (i + 1) & mask()) {
      const uint32_t s = __ldcg(slot + i);
      if (s == v) return true;
      if (s == kFireEmpty) return false;
    }
  }
  // insert adds v (lanes insert distinct vertices at once).
  __device__ __forceinline__ void insert(uint32_t v) const {
    for (uint32_t i = home(v);; i = (i + 1) & mask()) {
      const uint32_t s = atomicCAS(slot + i, kFireEmpty, v);
      if (s == kFireEmpty || s == v) return;
    }
  }
  // find is the slot holding v (v present).
  __device__ __forceinline__ uint32_t find(uint32_t v) const {
    uint32_t i = home(v);
    while (__ldcg(slot + i) != v) i = (i + 1) & mask();
    return i;
  }
};

// fire_candidate says whether edge c of the vertex at targets[base..] is a
// candidate: its target u not yet sampled, and the first edge to u.
__device__ __forceinline__ bool fire_candidate(const uint32_t* targets, uint64_t base, uint32_t c, const VisitSet& vs,
                                               uint32_t* u) {
  *u = targets[base + c];
  return (c == 0 || targets[base + c - 1] != *u) && !vs.contains(*u);
}

}  // namespace ws

extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_fire(
    const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets, const float* __restrict__ weights,
    const double* __restrict__ cum, uint64_t seed0, uint32_t snowball, double logp, uint32_t depth, uint32_t maxv,
    const uint32_t* __restrict__ starts, uint32_t ips, uint32_t first, const uint32_t* __restrict__ list, uint32_t nlist,
    uint8_t* __restrict__ scratch, uint64_t per_warp, uint32_t hlog, uint32_t ecap, uint32_t kcap,
    uint64_t* __restrict__ pool_edge, uint32_t* __restrict__ pool_src, uint32_t* __restrict__ pool_dst, uint64_t pool_cap,
    unsigned long long* __restrict__ cursor, uint32_t* __restrict__ status, uint64_t* __restrict__ off,
    uint32_t* __restrict__ count, uint32_t* __restrict__ hop_end, const ws::SampleSeg* __restrict__ segs, uint32_t nsegs) {
  using namespace ws;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
  const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
  uint8_t* mine = scratch + warp * per_warp;
  uint64_t* bedge = reinterpret_cast<uint64_t*>(mine);
  uint32_t* bsrc = reinterpret_cast<uint32_t*>(bedge + ecap);
  uint32_t* bdst = bsrc + ecap;
  VisitSet vs{bdst + ecap, hlog};
  uint32_t* pk = vs.slot + (1u << hlog);
  uint32_t* tmp = pk + kcap;
  const bool weighted = cum != nullptr;
  const uint32_t below = (1u << lane) - 1;
  for (uint64_t i = warp; i < nlist; i += nwarps) {
    const uint32_t inst = first + list[i];
    const uint32_t seedv = starts[inst / ips];
    uint64_t seed = seed0;
    uint32_t kin = inst;  // the instance's Philox id (sample_segment_key)
    sample_segment_key(segs, nsegs, seed, kin);
    if (lane == 0) vs.insert(seedv);
    __syncwarp();
    uint32_t cnt = 0, nvis = 1, st = kFireDone, hs = 0, he = 0, h = 0;
    for (; h < depth; h++) {
      const uint32_t fsize = h == 0 ? 1 : he - hs;
      if (fsize == 0 || (maxv && nvis >= maxv)) break;
      const uint32_t hstart = cnt;
      for (uint32_t j = 0; j < fsize && st == kFireDone; j++) {
        if (maxv && nvis >= maxv) break;
        const uint32_t v = h == 0 ? seedv : bdst[hs + j];
        const uint64_t base = offsets[v];
        const uint32_t n = (uint32_t)(offsets[v + 1] - base);
        uint32_t x = n;
        if (!snowball) {
          x = burn_count(sample_word(seed, kin, j, h, kBurnCandidate), logp);
          if (x == 0) continue;
        }
        if (n == 0) continue;
        int np = -1;  // picks in pk, ascending; -1: every candidate
        if (!snowball && n > 4 * x) {
          if (x > kcap) { st = kFireGrow; break; }
          const uint32_t maxd = 16 * x + 64;
          uint32_t got = 0;
          for (uint32_t b = 0; b < maxd && got < x; b += 32) {
            uint32_t c = 0, u;
            bool ok = false;
            if (b + lane < maxd) {
              const uint32_t w = sample_word(seed, kin, j, h, b + lane);
              c = weighted ? cdf_search(cum + base, n, w) : index(w, n);
              ok = fire_candidate(targets, base, c, vs, &u);
            }
            const unsigned okm = __ballot_sync(kFullMask, ok);
            for (uint32_t l = 0; l < 32 && got < x && b + l < maxd; l++) {
              const uint32_t cl = __shfl_sync(kFullMask, c, l);
              if (!((okm >> l) & 1)) continue;
              bool dup = false;
              for (uint32_t q = lane; q < got; q += 32) dup |= pk[q] == cl;
              if (!__any_sync(kFullMask, dup)) {
                if (lane == 0) pk[got] = cl;
                got++;
                __syncwarp();
              }
            }
          }
          if (got == x) {
            rank_sort(pk, got, tmp, lane);
            np = (int)got;
          }
        }
        if (np < 0 && !snowball) {
          uint32_t ncand = 0;
          for (uint32_t c0 = 0; c0 < n; c0 += 32) {
            uint32_t u;
            const bool ok = c0 + lane < n && fire_candidate(targets, base, c0 + lane, vs, &u);
            ncand += __popc(__ballot_sync(kFullMask, ok));
          }
          if (x < ncand) {
            if (x > kcap) { st = kFireGrow; break; }
            // x rounds: the smallest (key, index) above the last one taken.
            double lastK = -1.0;
            uint64_t lastU = 0;  // unweighted: word << 32 | index, plus one
            int64_t lastI = -1;
            for (uint32_t r = 0; r < x; r++) {
              double bk = INFINITY;
              uint64_t bu = ~0ull;
              int64_t bi = -1;
              for (uint32_t c = lane; c < n; c += 32) {
                uint32_t u;
                if (!fire_candidate(targets, base, c, vs, &u)) continue;
                const uint32_t w = sample_word(seed, kin, j, h, c);
                if (!weighted) {
                  const uint64_t key = (uint64_t)w << 32 | c;
                  if (key + 1 > lastU && key < bu) { bu = key; bi = c; }
                } else {
                  const double key = select_key(w, (double)weights[base + c]);
                  const bool above = key > lastK || (key == lastK && (int64_t)c > lastI);
                  if (above && (key < bk || (key == bk && (int64_t)c < bi))) { bk = key; bi = c; }
                }
              }
              for (int s = 16; s > 0; s >>= 1) {
                const double ok = __shfl_xor_sync(kFullMask, bk, s);
                const uint64_t ou = __shfl_xor_sync(kFullMask, bu, s);
                const int64_t oi = __shfl_xor_sync(kFullMask, bi, s);
                if (!weighted) {
                  if (ou < bu) { bu = ou; bi = oi; }
                } else if (oi >= 0 && (bi < 0 || ok < bk || (ok == bk && oi < bi))) {
                  bk = ok; bi = oi;
                }
              }
              if (bi < 0) break;
              if (lane == 0) pk[r] = (uint32_t)bi;
              lastK = bk; lastU = bu + 1; lastI = bi;
            }
            __syncwarp();
            rank_sort(pk, x, tmp, lane);
            np = (int)x;
          }
        }
        const uint32_t room = maxv ? maxv - nvis : 0xFFFFFFFFu;
        if (np >= 0) {
          const uint32_t take = min((uint32_t)np, room);
          if (cnt + take > ecap) { st = kFireGrow; break; }
          for (uint32_t q = lane; q < take; q += 32) {
            const uint32_t c = pk[q];
            const uint32_t u = targets[base + c];
            bedge[cnt + q] = base + c;
            bsrc[cnt + q] = v;
            bdst[cnt + q] = u;
            vs.insert(u);
          }
          cnt += take;
          nvis += take;
          __syncwarp();
        } else {  // every candidate, in adjacency order
          for (uint32_t c0 = 0; c0 < n; c0 += 32) {
            const uint32_t left = maxv ? maxv - nvis : 0xFFFFFFFFu;
            if (left == 0) break;
            const uint32_t c = c0 + lane;
            uint32_t u = 0;
            const bool ok = c < n && fire_candidate(targets, base, c, vs, &u);
            const unsigned m = __ballot_sync(kFullMask, ok);
            const uint32_t take = min((uint32_t)__popc(m), left);
            if (cnt + take > ecap) { st = kFireGrow; break; }
            const uint32_t rank = __popc(m & below);
            if (ok && rank < take) {
              bedge[cnt + rank] = base + c;
              bsrc[cnt + rank] = v;
              bdst[cnt + rank] = u;
              vs.insert(u);
            }
            cnt += take;
            nvis += take;
            __syncwarp();
          }
        }
      }
      if (st != kFireDone) break;
      if (lane == 0) hop_end[i * depth + h] = cnt;
      hs = hstart;
      he = cnt;
    }
    for (uint32_t r = h + lane; r < depth; r += 32) hop_end[i * depth + r] = cnt;
    uint64_t pos = 0;
    if (st == kFireDone && cnt > 0) {
      if (lane == 0) pos = atomicAdd(cursor, (unsigned long long)cnt);
      pos = __shfl_sync(kFullMask, pos, 0);
      if (pos + cnt > pool_cap) {
        st = kFirePoolFull;
      } else {
        for (uint32_t q = lane; q < cnt; q += 32) {
          pool_edge[pos + q] = bedge[q];
          pool_src[pos + q] = bsrc[q];
          pool_dst[pos + q] = bdst[q];
        }
      }
    }
    if (lane == 0) {
      status[i] = st;
      off[i] = pos;
      count[i] = cnt;
    }
    // Empty the visited set: find every slot first (emptying while others
    // still probe would cut their chains), then empty them.
    __syncwarp();
    for (uint32_t q = lane; q < cnt; q += 32) bsrc[q] = vs.find(bdst[q]);
    const uint32_t sseed = vs.find(seedv);
    __syncwarp();
    for (uint32_t q = lane; q < cnt; q += 32) __stcg(vs.slot + bsrc[q], kFireEmpty);
    if (lane == 0) __stcg(vs.slot + sseed, kFireEmpty);
    __syncwarp();
  }
}
