// sample.cuh: C-SAW neighbour sampling on the device, the twin of
// graphsample.Sample's NeighborSampling without replacement (graphsample/select.go,
// selector.selectK): one warp per (instance, frontier slot) task selects k
// of the n out-edges of the task's vertex, with the very words the CPU
// uses, so the samples are the CPU's.
//
//   sample_neighbor_hop  one warp a task (kSampleThreads / 32 tasks a
//                        block): k >= n takes every edge; n > 4k draws with
//                        rejection of taken edges (32 draws a round, one per
//                        lane, accepted in draw order by the warp); else, or
//                        after 16k + 64 draws without k edges, reservoir
//                        keys: k rounds of a warp argmin over the keys
//                        above the last one taken (drawn once and kept in
//                        registers up to 128 edges, else drawn each round).
//
// Memory: the graph (offsets, targets, weights) and cum (the per-vertex
// cumulative weights, graphsample.WeightCDF, float64) in global memory, read
// only; task arrays in global memory; each task's picks go straight to its
// k slots of out (global), which the rejection rounds also read back to
// test for repeats (the warp's own writes, ordered by __syncwarp).
#pragma once
#include <stdint.h>
#include <type_traits>
#include "rng.cuh"

namespace ws {

constexpr int kSampleThreads = 256;
constexpr int kCachedKeys = 4;  // reservoir keys a lane keeps in registers (n <= 128)
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// sample_word is SampleKey.Word: counter {instance, slot, hop, c / 4}, word
// c mod 4, key = seed.
__device__ __forceinline__ uint32_t sample_word(uint64_t seed, uint32_t inst, uint32_t slot, uint32_t hop, uint32_t c) {
  const uint4 w = philox4x32_10(make_uint4(inst, slot, hop, c >> 2), (uint32_t)seed, (uint32_t)(seed >> 32));
  return word(w, c & 3);
}

// SampleSeg is graphsample.Segment: a merged call's instances from first
// on (the call's numbering) are one request's, under Philox key seed with
// instance ids base, base + 1, ... (global memory, read only; a table a
// call, sorted by first).
struct SampleSeg {
  uint64_t seed;
  uint32_t first, base;
};

// sample_segment_key turns a call's (seed, inst) into the instance's own
// key and id: unchanged without segments (nsegs 0: one request's call),
// else those of the last segment starting at or before inst (a binary
// search over the few segments of a micro-batch).
__device__ __forceinline__ void sample_segment_key(const SampleSeg* segs, uint32_t nsegs, uint64_t& seed, uint32_t& inst) {
  if (nsegs == 0) return;
  uint32_t lo = 0, hi = nsegs;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (segs[mid].first <= inst) lo = mid; else hi = mid;
  }
  seed = segs[lo].seed;
  inst = segs[lo].base + (inst - segs[lo].first);
}

// cdf_search is walk.cdfSearch: the first i with target < cum[i], target =
// x / 2^32 * cum[n-1], clamped to n-1.
__device__ __forceinline__ uint32_t cdf_search(const double* cum, uint32_t n, uint32_t x) {
  const double target = __dmul_rn(__ddiv_rn((double)x, 4294967296.0), cum[n - 1]);
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (target < cum[mid]) hi = mid; else lo = mid + 1;
  }
  return lo < n ? lo : n - 1;
}

// select_key is graphsample.SelectKey for a positive weight.
__device__ __forceinline__ double select_key(uint32_t x, double w) {
  const double u = __ddiv_rn(__dadd_rn((double)x, 1.0), 4294967296.0);
  return __ddiv_rn(-log(u), w);
}

// sort_picks sorts a task's picks ascending (lane 0; k is a fan-out).
__device__ __forceinline__ void sort_picks(uint32_t* p, uint32_t cnt) {
  for (uint32_t i = 1; i < cnt; i++) {
    const uint32_t v = p[i];
    uint32_t j = i;
    for (; j > 0 && p[j - 1] > v; j--) p[j] = p[j - 1];
    p[j] = v;
  }
}

// reservoir takes the k smallest (key, index) of a vertex's n edges in k
// rounds of a warp argmin over the keys above the last one taken, as
// walk's selectK does with reservoir keys: unweighted the key is the
// draw's word above the index, weighted select_key(word, weight). With n
// at most 32 * kCachedKeys (most tasks: k < n <= 4k with fan-outs up to
// 32) each lane keeps its edges' keys in registers, drawn once; beyond,
// every round draws them again. Each weight kind is its own instance so a
// kernel holds one kind of cache. Returns the picks written; with the keys
// in registers they are written in ascending order at the end (each lane
// marks the edges it won, a ballot a register places them), else in the
// order taken by lane 0, and sorted says which.
template <bool kWeighted>
__device__ __forceinline__ uint32_t reservoir(uint64_t seed, uint32_t in, uint32_t sl, uint32_t hop, uint32_t k, uint32_t n,
                                              const float* __restrict__ w, uint32_t* picks, uint32_t lane, bool& sorted) {
  using Key = typename std::conditional<kWeighted, double, uint32_t>::type;
  const bool cached = n <= 32 * kCachedKeys;
  Key cache[kCachedKeys];
  if (cached) {
#pragma unroll
    for (int j = 0; j < kCachedKeys; j++) {
      const uint32_t c = lane + 32 * j;
      if (c < n) {
        const uint32_t x = sample_word(seed, in, sl, hop, c);
        if constexpr (kWeighted) cache[j] = select_key(x, (double)w[c]);
        else cache[j] = x;
      }
    }
  }
  uint32_t cnt = 0, won = 0;  // won: bit j, the lane's edge lane + 32j was taken
  double lastK = -1.0;
  uint64_t lastU = 0;  // unweighted: word << 32 | index, plus one
  int64_t lastI = -1;
  for (uint32_t r = 0; r < k; r++) {
    double bk = INFINITY;
    uint64_t bu = ~0ull;
    int64_t bi = -1;
    auto consider = [&](uint32_t c, Key kx) {
      if constexpr (!kWeighted) {
        const uint64_t key = (uint64_t)kx << 32 | c;
        if (key + 1 > lastU && key < bu) { bu = key; bi = c; }
      } else {
        const double key = kx;
        const bool above = key > lastK || (key == lastK && (int64_t)c > lastI);
        if (above && (key < bk || (key == bk && (int64_t)c < bi))) { bk = key; bi = c; }
      }
    };
    if (cached) {
#pragma unroll
      for (int j = 0; j < kCachedKeys; j++) {
        const uint32_t c = lane + 32 * j;
        if (c < n) consider(c, cache[j]);
      }
    } else {
      for (uint32_t c = lane; c < n; c += 32) {
        const uint32_t x = sample_word(seed, in, sl, hop, c);
        if constexpr (kWeighted) consider(c, select_key(x, (double)w[c]));
        else consider(c, x);
      }
    }
    for (int s = 16; s > 0; s >>= 1) {
      const double ok = __shfl_xor_sync(kFullMask, bk, s);
      const uint64_t ou = __shfl_xor_sync(kFullMask, bu, s);
      const int64_t oi = __shfl_xor_sync(kFullMask, bi, s);
      if constexpr (!kWeighted) {
        if (ou < bu) { bu = ou; bi = oi; }
      } else if (oi >= 0 && (bi < 0 || ok < bk || (ok == bk && oi < bi))) {
        bk = ok; bi = oi;
      }
    }
    if (bi < 0) break;
    if (cached) {
      if (((uint32_t)bi & 31) == lane) won |= 1u << ((uint32_t)bi >> 5);
    } else if (lane == 0) {
      picks[cnt] = (uint32_t)bi;
    }
    cnt++;
    lastK = bk; lastU = bu + 1; lastI = bi;
  }
  sorted = cached;
  if (cached) {
    uint32_t at = 0;
#pragma unroll
    for (int j = 0; j < kCachedKeys; j++) {
      const uint32_t b = __ballot_sync(kFullMask, (won >> j) & 1);
      if ((won >> j) & 1) picks[at + __popc(b & ((1u << lane) - 1))] = lane + 32 * j;
      at += __popc(b);
    }
  }
  return cnt;
}

}  // namespace ws

// tasks: inst[t], slot[t], vertex[t]; out: k adjacency indices a task (its
// picks ascending), count[t] how many.
extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_neighbor_hop(
    const uint64_t* __restrict__ offsets, const float* __restrict__ weights, const double* __restrict__ cum,
    uint64_t seed0, uint32_t hop, uint32_t k, const uint32_t* __restrict__ inst, const uint32_t* __restrict__ slot,
    const uint32_t* __restrict__ vertex, uint32_t ntasks, uint32_t* __restrict__ out, uint32_t* __restrict__ count,
    const ws::SampleSeg* __restrict__ segs, uint32_t nsegs) {
  using namespace ws;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
  const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
  for (uint64_t t = warp; t < ntasks; t += nwarps) {
    const uint32_t v = vertex[t], sl = slot[t];
    uint32_t in = inst[t];  // the task's instance, then its Philox id
    uint64_t seed = seed0;
    sample_segment_key(segs, nsegs, seed, in);
    const uint64_t off = offsets[v];
    const uint32_t n = (uint32_t)(offsets[v + 1] - off);
    uint32_t* picks = out + t * (uint64_t)k;
    const double* vc = cum ? cum + off : nullptr;
    uint32_t cnt = 0;
    if (k >= n) {  // every edge (weights are positive)
      for (uint32_t c = lane; c < n; c += 32) picks[c] = c;
      if (lane == 0) count[t] = n;
      continue;
    }
    if (n > 4 * k) {
      const uint32_t maxd = 16 * k + 64;
      for (uint32_t base = 0; base < maxd && cnt < k; base += 32) {
        uint32_t c = 0;
        if (base + lane < maxd) {
          const uint32_t x = sample_word(seed, in, sl, hop, base + lane);
          c = vc ? cdf_search(vc, n, x) : index(x, n);
        }
        for (uint32_t l = 0; l < 32 && cnt < k && base + l < maxd; l++) {
          const uint32_t cl = __shfl_sync(kFullMask, c, l);
          bool dup = false;
          for (uint32_t i = lane; i < cnt; i += 32) dup |= picks[i] == cl;
          if (!__any_sync(kFullMask, dup)) {
            if (lane == 0) picks[cnt] = cl;
            cnt++;
            __syncwarp();
          }
        }
      }
      if (cnt == k) {
        if (lane == 0) {
          sort_picks(picks, cnt);
          count[t] = cnt;
        }
        __syncwarp();
        continue;
      }
    }
    // Reservoir keys: round r takes the smallest (key, index) above the
    // last one taken. (A rejection that ran out of draws starts over.)
    bool sorted;
    cnt = vc ? reservoir<true>(seed, in, sl, hop, k, n, weights + off, picks, lane, sorted)
             : reservoir<false>(seed, in, sl, hop, k, n, nullptr, picks, lane, sorted);
    __syncwarp();
    if (lane == 0) {
      if (!sorted) sort_picks(picks, cnt);
      count[t] = cnt;
    }
    __syncwarp();
  }
}
