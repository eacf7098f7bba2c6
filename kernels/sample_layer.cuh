// sample_layer.cuh: C-SAW layer sampling on the device, the twin of
// graphsample.Sample's LayerSampling (graphsample/sampleinstance.go: sampler.layer,
// layerRejection, layerKeys), word for word: the samples are the CPU's.
//
//   sample_layer  one warp an instance, every hop in one launch (a warp
//                 takes instances first + warp, + nwarps, ...). Hop h:
//                 1. the frontier's degrees (and, weighted, each vertex's
//                    total weight, the last entry of its cum run) are
//                    loaded lane-strided and summed by lane 0 in frontier
//                    order, so the float64 prefix is the CPU's to the bit;
//                 2. n > 4k candidate edges: draws with rejection (32 a
//                    round, draw t at counter {instance, 0xFFFFFFFF, h,
//                    t/4}, accepted in draw order by the warp), mapped to a
//                    slot by the prefix and to an edge uniformly or through
//                    the vertex's cum; k distinct picks are rank-sorted;
//                 3. otherwise (or after 16k + 64 draws): reservoir keys
//                    over the whole frontier's edges, keyed {instance, slot,
//                    h, offset}: when they fit the key buffer every key is
//                    stored and a candidate is taken when fewer than k keys
//                    beat it (so the picks come out in candidate order);
//                    beyond it, k rounds of a warp argmin recompute them;
//                 4. the picks, in (slot, offset) order, are written as
//                    edges and their distinct targets, in that order, are
//                    the next frontier.
//
// Memory: the graph and cum (graphsample.WeightCDF) in global memory, read only.
// Each warp owns one slice of `scratch` (global; `per_warp` bytes, carved by
// layer_scratch): two frontiers of fmax vertices, their degree and weight
// prefixes, kmax picks and keycap keys (keycap >= kmax: also the sort
// buffer). Only the warp's own lanes touch it, ordered by __syncwarp.
// Outputs (global): instance t's edges at [t*stride, t*stride + hop_end[t*hops
// + hops-1]) of out_edge (edge index), out_src and out_dst; hop_end[t*hops+h]
// is the number of its edges after hop h.
#pragma once
#include <stdint.h>
#include "rng.cuh"
#include "sample.cuh"

namespace ws {

// kLayerSlot is walk.layerSlot: the counter slot of a layer's rejection
// draws, which no frontier position reaches.
constexpr uint32_t kLayerSlot = 0xFFFFFFFFu;

struct LayerScratch {
  uint32_t* frontier;  // fmax vertices
  uint32_t* next;      // fmax vertices
  uint64_t* degpre;    // fmax: inclusive prefix of the frontier's degrees
  double* wpre;        // fmax: inclusive prefix of their total weights
  uint64_t* picks;     // kmax: slot << 32 | offset
  uint64_t* keys;      // keycap: keys (double bits when weighted), sort buffer
};

__device__ __forceinline__ LayerScratch layer_scratch(uint8_t* base, uint32_t fmax, uint32_t kmax) {
  LayerScratch s;
  s.degpre = reinterpret_cast<uint64_t*>(base);
  s.wpre = reinterpret_cast<double*>(s.degpre + fmax);
  s.picks = reinterpret_cast<uint64_t*>(s.wpre + fmax);
  s.keys = s.picks + kmax;
  // the two frontiers after the keys (keycap is the caller's)
  return s;
}

// layer_slot is the frontier slot whose candidates hold candidate index c:
// the first j with c < degpre[j].
__device__ __forceinline__ uint32_t layer_slot(const uint64_t* degpre, uint32_t f, uint64_t c) {
  uint32_t lo = 0, hi = f;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (c < degpre[mid]) hi = mid; else lo = mid + 1;
  }
  return lo;
}

// rank_sort sorts cnt distinct values of p ascending through tmp (the warp;
// O(cnt^2 / 32) compares, cnt is a layer size or a burn count).
template <typename T>
__device__ __forceinline__ void rank_sort(T* p, uint32_t cnt, T* tmp, uint32_t lane) {
  for (uint32_t i = lane; i < cnt; i += 32) {
    const T v = p[i];
    uint32_t r = 0;
    for (uint32_t j = 0; j < cnt; j++) r += p[j] < v;
    tmp[r] = v;
  }
  __syncwarp();
  for (uint32_t i = lane; i < cnt; i += 32) p[i] = tmp[i];
  __syncwarp();
}

// layer_key is candidate c's reservoir key: unweighted the word above the
// index (unique, ordered as walk's (word, index)), weighted graphsample.SelectKey
// as double bits (+inf for a non-positive weight: never taken).
__device__ __forceinline__ uint64_t layer_key(const uint64_t* offsets, const float* weights, bool weighted, uint64_t seed,
                                              uint32_t inst, uint32_t hop, const uint32_t* frontier, const uint64_t* degpre,
                                              uint32_t f, uint64_t c, uint64_t* pick) {
  const uint32_t j = layer_slot(degpre, f, c);
  const uint32_t off = (uint32_t)(c - (j ? degpre[j - 1] : 0));
  *pick = (uint64_t)j << 32 | off;
  const uint32_t x = sample_word(seed, inst, j, hop, off);
  if (!weighted) return (uint64_t)x << 32 | (uint32_t)c;
  const double w = (double)weights[offsets[frontier[j]] + off];
  return __double_as_longlong(w > 0 ? select_key(x, w) : INFINITY);
}

// key_less orders keys as walk's keyed.less: by key, ties to the lower
// candidate index (unweighted keys carry the index already).
__device__ __forceinline__ bool key_less(bool weighted, uint64_t a, uint64_t ca, uint64_t b, uint64_t cb) {
  if (!weighted) return a < b;
  const double x = __longlong_as_double(a), y = __longlong_as_double(b);
  return x < y || (x == y && ca < cb);
}

}  // namespace ws

extern "C" __global__ void __launch_bounds__(ws::kSampleThreads) sample_layer(
    const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets, const float* __restrict__ weights,
    const double* __restrict__ cum, uint64_t seed0, const uint32_t* __restrict__ sizes, uint32_t hops,
    const uint32_t* __restrict__ starts, uint32_t ips, uint32_t first, uint32_t ninst, uint32_t fmax, uint32_t kmax,
    uint32_t keycap, uint8_t* __restrict__ scratch, uint64_t per_warp, uint32_t stride, uint64_t* __restrict__ out_edge,
    uint32_t* __restrict__ out_src, uint32_t* __restrict__ out_dst, uint32_t* __restrict__ hop_end,
    const ws::SampleSeg* __restrict__ segs, uint32_t nsegs) {
  using namespace ws;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warp = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5;
  const uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
  LayerScratch s = layer_scratch(scratch + warp * per_warp, fmax, kmax);
  uint32_t* fa = reinterpret_cast<uint32_t*>(s.keys + keycap);
  uint32_t* fb = fa + fmax;
  const bool weighted = cum != nullptr;
  for (uint64_t t = warp; t < ninst; t += nwarps) {
    const uint32_t inst = first + (uint32_t)t;
    uint64_t seed = seed0;
    uint32_t kin = inst;  // the instance's Philox id (sample_segment_key)
    sample_segment_key(segs, nsegs, seed, kin);
    uint32_t* frontier = fa;
    uint32_t* next = fb;
    if (lane == 0) frontier[0] = starts[inst / ips];
    __syncwarp();
    uint32_t f = 1, total = 0;
    uint64_t* oe = out_edge + t * (uint64_t)stride;
    uint32_t* os = out_src + t * (uint64_t)stride;
    uint32_t* od = out_dst + t * (uint64_t)stride;
    for (uint32_t h = 0; h < hops; h++) {
      if (f == 0) {
        if (lane == 0) hop_end[t * hops + h] = total;
        continue;
      }
      const uint32_t k = sizes[h];
      // 1. degrees and total weights, summed in frontier order by lane 0.
      for (uint32_t j = lane; j < f; j += 32) {
        const uint32_t v = frontier[j];
        const uint64_t a = offsets[v], b = offsets[v + 1];
        s.degpre[j] = b - a;
        if (weighted) s.wpre[j] = b > a ? cum[b - 1] : 0.0;
      }
      __syncwarp();
      if (lane == 0) {
        uint64_t sum = 0;
        double tw = 0.0;
        for (uint32_t j = 0; j < f; j++) {
          sum += s.degpre[j];
          s.degpre[j] = sum;
          if (weighted) {
            tw = __dadd_rn(tw, s.wpre[j]);
            s.wpre[j] = tw;
          }
        }
      }
      __syncwarp();
      const uint64_t n = s.degpre[f - 1];
      const double totw = weighted ? s.wpre[f - 1] : 0.0;
      uint32_t cnt = 0;
      bool done = false;
      // 2. draws with rejection of taken edges (walk's layerRejection).
      if (n > 4ull * k && n <= 0xFFFFFFFFull) {
        const uint32_t maxd = 16 * k + 64;
        for (uint32_t base = 0; base < maxd && cnt < k; base += 32) {
          uint64_t pk = 0;
          if (base + lane < maxd) {
            const uint32_t x = sample_word(seed, kin, kLayerSlot, h, base + lane);
            if (!weighted) {
              const uint32_t i = index(x, (uint32_t)n);
              const uint32_t j = layer_slot(s.degpre, f, i);
              pk = (uint64_t)j << 32 | (uint32_t)(i - (j ? s.degpre[j - 1] : 0));
            } else {
              const double target = __dmul_rn(__ddiv_rn((double)x, 4294967296.0), totw);
              uint32_t lo = 0, hi = f;
              while (lo < hi) {
                const uint32_t mid = lo + (hi - lo) / 2;
                if (target < s.wpre[mid]) hi = mid; else lo = mid + 1;
              }
              uint32_t j = lo < f ? lo : f - 1;
              while (j > 0 && s.wpre[j] == s.wpre[j - 1]) j--;  // a vertex without edges: none of the mass
              const double r = __dsub_rn(target, j ? s.wpre[j - 1] : 0.0);
              const uint32_t v = frontier[j];
              const uint64_t a = offsets[v];
              const uint32_t d = (uint32_t)(offsets[v + 1] - a);
              uint32_t cl = 0, ch = d;
              while (cl < ch) {
                const uint32_t mid = cl + (ch - cl) / 2;
                if (r < cum[a + mid]) ch = mid; else cl = mid + 1;
              }
              pk = (uint64_t)j << 32 | (cl < d ? cl : (d ? d - 1 : 0));
            }
          }
          for (uint32_t l = 0; l < 32 && cnt < k && base + l < maxd; l++) {
            const uint64_t pl = __shfl_sync(kFullMask, pk, l);
            bool dup = false;
            for (uint32_t i = lane; i < cnt; i += 32) dup |= s.picks[i] == pl;
            if (!__any_sync(kFullMask, dup)) {
              if (lane == 0) s.picks[cnt] = pl;
              cnt++;
              __syncwarp();
            }
          }
        }
        if (cnt == k) {
          rank_sort(s.picks, cnt, s.keys, lane);
          done = true;
        }
      }
      // 3. reservoir keys over every candidate (walk's layerKeys).
      if (!done) {
        cnt = 0;
        if (n == 0) {
        } else if (!weighted && k >= n) {
          for (uint64_t c = lane; c < n; c += 32) {
            const uint32_t j = layer_slot(s.degpre, f, c);
            s.picks[c] = (uint64_t)j << 32 | (uint32_t)(c - (j ? s.degpre[j - 1] : 0));
          }
          cnt = (uint32_t)n;
          __syncwarp();
        } else if (n <= keycap) {
          uint64_t pk;
          for (uint64_t c = lane; c < n; c += 32)
            s.keys[c] = layer_key(offsets, weights, weighted, seed, kin, h, frontier, s.degpre, f, c, &pk);
          __syncwarp();
          for (uint64_t b = 0; b < n; b += 32) {
            const uint64_t c = b + lane;
            bool take = false;
            if (c < n) {
              const uint64_t kc = s.keys[c];
              take = !weighted || __longlong_as_double(kc) < INFINITY;
              uint32_t r = 0;
              for (uint64_t o = 0; take && o < n && r < k; o++) r += key_less(weighted, s.keys[o], o, kc, c);
              take = take && r < k;
            }
            const unsigned m = __ballot_sync(kFullMask, take);
            if (take) {
              const uint32_t j = layer_slot(s.degpre, f, c);
              s.picks[cnt + __popc(m & ((1u << lane) - 1))] = (uint64_t)j << 32 | (uint32_t)(c - (j ? s.degpre[j - 1] : 0));
            }
            cnt += __popc(m);
          }
          __syncwarp();
        } else {
          // k rounds: the smallest (key, index) above the last one taken.
          uint64_t lastK = 0, lastC = 0;
          bool any = false;
          for (uint32_t r = 0; r < k; r++) {
            uint64_t bk = ~0ull, bc = ~0ull, bp = 0;
            bool have = false;
            for (uint64_t c = lane; c < n; c += 32) {
              uint64_t pk;
              const uint64_t key = layer_key(offsets, weights, weighted, seed, kin, h, frontier, s.degpre, f, c, &pk);
              if (weighted && !(__longlong_as_double(key) < INFINITY)) continue;
              if (any && !key_less(weighted, lastK, lastC, key, c)) continue;
              if (!have || key_less(weighted, key, c, bk, bc)) { bk = key; bc = c; bp = pk; have = true; }
            }
            for (int sh = 16; sh > 0; sh >>= 1) {
              const uint64_t ok = __shfl_xor_sync(kFullMask, bk, sh);
              const uint64_t oc = __shfl_xor_sync(kFullMask, bc, sh);
              const uint64_t op = __shfl_xor_sync(kFullMask, bp, sh);
              const bool oh = __shfl_xor_sync(kFullMask, have, sh);
              if (oh && (!have || key_less(weighted, ok, oc, bk, bc))) { bk = ok; bc = oc; bp = op; have = true; }
            }
            if (!have) break;
            if (lane == 0) s.picks[cnt] = bp;
            cnt++;
            lastK = bk; lastC = bc; any = true;
          }
          __syncwarp();
          rank_sort(s.picks, cnt, s.keys, lane);
        }
      }
      // 4. edges in (slot, offset) order; distinct targets, first seen first.
      uint32_t nf = 0;
      for (uint32_t b = 0; b < cnt; b += 32) {
        const uint32_t i = b + lane;
        const bool valid = i < cnt;
        uint32_t u = 0;
        bool fresh = valid;
        if (valid) {
          const uint64_t pk = s.picks[i];
          const uint32_t v = frontier[pk >> 32];
          const uint64_t e = offsets[v] + (uint32_t)pk;
          u = targets[e];
          oe[total + i] = e;
          os[total + i] = v;
          od[total + i] = u;
          for (uint32_t q = 0; q < nf && fresh; q++) fresh = next[q] != u;
        }
        for (uint32_t l = 0; l < 32; l++) {
          const uint32_t ul = __shfl_sync(kFullMask, u, l);
          const bool vl = __shfl_sync(kFullMask, valid, l);
          if (l < lane && vl && ul == u) fresh = false;
        }
        const unsigned m = __ballot_sync(kFullMask, fresh);
        if (fresh) next[nf + __popc(m & ((1u << lane) - 1))] = u;
        nf += __popc(m);
        __syncwarp();
      }
      total += cnt;
      if (lane == 0) hop_end[t * hops + h] = total;
      uint32_t* tmp = frontier;
      frontier = next;
      next = tmp;
      f = nf;
      __syncwarp();
    }
  }
}
