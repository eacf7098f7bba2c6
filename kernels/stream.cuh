// stream.cuh: partition streaming (gpu/stream.go, gpu/stream_cuda.go). The
// graph's edges are cut into vertex-range partitions; some are resident,
// the others pass through two device buffers. A visit walks every walker
// whose current vertex lies in a resident partition or in the streamed one
// now in a buffer, each as far as it can, and parks it where it leaves.
//
//   stream_init     one thread a walker: its state from its task, row[0]
//   stream_count    one thread a walker: waiting walkers per partition
//                   (shared-memory histogram, then global), for the host's
//                   most-active-first choice
//   stream_collect  one thread a walker: the walkers a visit can move, in a
//                   list (warp-aggregated appends)
//   stream_walk     persistent blocks; a thread takes listed walkers by an
//                   atomic cursor and steps each until it finishes or its
//                   vertex's partition is on neither side
//
// Walker state lives in global memory between visits (wv: current vertex,
// kNoVertex once finished; wstep: steps taken) and in registers during
// one. Partition bounds and base pointers are copied to shared memory per
// block. A base is the device address of the partition's first edge less
// ELo entries (12 bytes each for a weighted graph's resident partitions,
// 4 or 12 for the streamed one: cur_bytes), so a vertex's global edge offset indexes it directly; 0
// means "not on the device now" (a resident partition without edges has
// base 1, never read: its vertices are dead ends).
//
// MetaPath (kStreamMetaPath, gpu/streamlabels.go) walks the partitions in
// their label layout (each vertex's edges regrouped by label, the label
// tables' order): a step at v in step s takes label schema[s % schema_len]
// and draws inside v's segment of it, found by the resident segment ends
// (seg_ends: num_labels-1 uint32 a vertex, relative to v's first edge;
// global memory), as walk_thread_metapath does in the label tables. An
// empty segment ends the walk, as a dead end does.
#pragma once
#include "params.cuh"
#include "rng.cuh"
#include "taskpool.cuh"

namespace ws {

constexpr int kStreamBlock = 256;
constexpr uint32_t kMaxStreamParts = 1024;  // gpu.maxStreamParts
constexpr uint32_t kNoPart = 0xFFFFFFFFu;

// Mode bits of StreamParams.mode.
constexpr uint64_t kStreamEntries = 1;  // resident edges are 12-byte {prob, keep, alt} (weighted graph), else 4-byte targets
constexpr uint64_t kStreamAlias = 2;    // alias draw (weighted walk), else uniform
constexpr uint64_t kStreamPPR = 4;      // stop on draw word x, sample on y, z
constexpr uint64_t kStreamMetaPath = 8; // label layout: draw inside the segment of the step's label
constexpr uint64_t kStreamNode2Vec = 16; // Node2Vec's phases (stream_walk_node2vec; gpu/streamn2v.go)

// Node2Vec walker phases (gpu.n2vPropose...): the low byte of wphase; the
// attempt is in bits 8-15.
constexpr uint32_t kN2VPropose = 0;  // waits at part(v)
constexpr uint32_t kN2VCheck = 1;    // waits at part(u): is candidate wcand adjacent to u?
constexpr uint32_t kN2VScan = 2;     // waits for the host's exact scan
constexpr uint32_t kN2VScanWords = 8;  // a scan record: slot, v, u, step, walk lo, walk hi, job, picked

// StreamParams: one batch's streaming state (device memory; gpu/stream_cuda.go
// mirrors it field by field, every field 8 bytes).
struct StreamParams {
  const uint64_t* offsets;  // V+1, resident
  const uint32_t* bounds;   // nparts+1 vertex bounds
  const uint64_t* base;     // nparts: biased base of each resident partition, 0 otherwise
  const Task* tasks;        // n
  const uint64_t* seeds;
  uint32_t* result;         // n rows of stride vertices
  uint32_t* lengths;        // n
  uint32_t* wv;             // n: current vertex, kNoVertex when finished
  uint32_t* wstep;          // n: steps taken
  uint32_t* list;           // n: walkers of this visit
  uint32_t* list_len;       // [0] list length, [1] walk cursor
  uint32_t* counts;         // nparts: waiting walkers
  uint64_t nparts;
  uint64_t n;
  uint64_t stride;
  uint64_t length;
  uint64_t mode;
  uint64_t stop_threshold;
  const uint32_t* seg_ends;  // V*(num_labels-1) (kStreamMetaPath; null for one label)
  uint64_t num_labels;
  uint64_t schema_len;
  uint8_t schema[kMaxSchema];
  // Node2Vec (kStreamNode2Vec; null otherwise): the previous vertex
  // (kNoVertex before the first step), phase and attempt, and the
  // candidate a check phase tests (n each, global memory); the thresholds
  // of word z per class (return, neighbour, outward).
  uint32_t* wprev;
  uint32_t* wphase;
  uint32_t* wcand;
  uint64_t accept[3];
};
static_assert(sizeof(StreamParams) == 280, "StreamParams layout changed: update gpu/stream_cuda.go");

// stream_part is the partition holding v: bounds[p] <= v < bounds[p+1]
// (bounds in shared memory, nparts >= 1).
__device__ __forceinline__ uint32_t stream_part(const uint32_t* bounds, uint32_t nparts, uint32_t v) {
  uint32_t lo = 0, hi = nparts;
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) >> 1;
    if (bounds[mid] <= v) lo = mid; else hi = mid;
  }
  return lo;
}

}  // namespace ws

extern "C" __global__ void stream_init(const ws::StreamParams* __restrict__ P) {
  using namespace ws;
  const uint64_t n = P->n;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t v = P->tasks[i].start;
    P->result[i * P->stride] = v;
    P->wv[i] = v;
    P->wstep[i] = 0;
    if (P->wprev) {
      P->wprev[i] = kNoVertex;
      P->wphase[i] = kN2VPropose;
    }
  }
}

namespace ws {

// stream_waits is the partition walker i (vertex v, not finished) waits
// at: its vertex's, or for a Node2Vec walker in the check phase its
// previous vertex's; nparts for one waiting for the host's scan.
__device__ __forceinline__ uint32_t stream_waits(const StreamParams* __restrict__ P, const uint32_t* sb, uint32_t np,
                                                 uint64_t i, uint32_t v) {
  if (P->wphase) {
    const uint32_t ph = P->wphase[i] & 0xFFu;
    if (ph == kN2VScan) return np;
    if (ph == kN2VCheck) v = P->wprev[i];
  }
  return stream_part(sb, np, v);
}

}  // namespace ws

// stream_count counts the walkers waiting at each partition and, when
// remaining is not null, adds the steps the unfinished walkers have left
// (length - steps taken: an upper bound for PPR and MetaPath) to it: the
// host reads the rest of a batch in place once that costs less than the
// copies it still waits for (gpu.streamTail).
extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_count(const ws::StreamParams* __restrict__ P,
                                                                            unsigned long long* remaining) {
  using namespace ws;
  __shared__ uint32_t sb[kMaxStreamParts + 1];
  __shared__ uint32_t sc[kMaxStreamParts + 1];  // [nparts]: walkers waiting for the host's scan
  const uint32_t np = (uint32_t)P->nparts;
  for (uint32_t i = threadIdx.x; i <= np; i += blockDim.x) {
    sb[i] = P->bounds[i];
    sc[i] = 0;
  }
  __syncthreads();
  const uint64_t n = P->n;
  unsigned long long rem = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t v = P->wv[i];
    if (v != kNoVertex) {
      atomicAdd(&sc[stream_waits(P, sb, np, i, v)], 1u);
      if (remaining) rem += P->length - P->wstep[i];
    }
  }
  if (remaining) {
    // Every thread of the block is here (blockDim is a multiple of 32).
    for (int o = 16; o > 0; o >>= 1) rem += __shfl_down_sync(0xFFFFFFFFu, rem, o);
    if ((threadIdx.x & 31) == 0 && rem) atomicAdd(remaining, rem);
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i <= np; i += blockDim.x) {
    if (sc[i]) atomicAdd(&P->counts[i], sc[i]);
  }
}

// stream_collect lists the walkers whose partition is resident or cur.
// The loop index is warp-uniform so every lane reaches the ballot.
extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_collect(const ws::StreamParams* __restrict__ P, uint64_t cur) {
  using namespace ws;
  __shared__ uint32_t sb[kMaxStreamParts + 1];
  __shared__ uint8_t in[kMaxStreamParts + 1];  // [nparts]: the host's scan, never in a visit
  const uint32_t np = (uint32_t)P->nparts;
  for (uint32_t i = threadIdx.x; i <= np; i += blockDim.x) {
    sb[i] = P->bounds[i];
    in[i] = i < np && (P->base[i] != 0 || i == cur);
  }
  __syncthreads();
  const uint64_t n = P->n;
  const unsigned lane = threadIdx.x & 31;
  const uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t w0 = blockIdx.x * (uint64_t)blockDim.x + (threadIdx.x & ~31u); w0 < n; w0 += step) {
    const uint64_t i = w0 + lane;
    bool want = false;
    if (i < n) {
      const uint32_t v = P->wv[i];
      want = v != kNoVertex && in[stream_waits(P, sb, np, i, v)];
    }
    const unsigned m = __ballot_sync(0xFFFFFFFFu, want);
    if (m == 0) continue;
    const unsigned leader = __ffs(m) - 1;
    uint32_t at = 0;
    if (lane == leader) at = atomicAdd(&P->list_len[0], (uint32_t)__popc(m));
    at = __shfl_sync(0xFFFFFFFFu, at, leader);
    if (want) P->list[at + __popc(m & ((1u << lane) - 1))] = (uint32_t)i;
  }
}

namespace ws {

// stream_entry_target is the target of edge e of a partition at biased
// base b whose entries are es bytes: the word itself (4) or the keep word
// of an alias entry (12), which is the target in the adjacency's order.
__device__ __forceinline__ uint32_t stream_entry_target(uint64_t b, uint64_t es, uint64_t e) {
  return __ldg(reinterpret_cast<const uint32_t*>(b + e * es) + (es == 4 ? 0 : 1));
}

// stream_has_edge: binary search for x in u's sorted adjacency [lo, hi) of
// a partition on the device (has_edge over stream entries).
__device__ __forceinline__ bool stream_has_edge(uint64_t b, uint64_t es, uint64_t lo, uint64_t hi, uint32_t x) {
  const uint64_t end = hi;
  while (lo < hi) {
    const uint64_t m = lo + ((hi - lo) >> 1);
    if (stream_entry_target(b, es, m) < x) lo = m + 1; else hi = m;
  }
  return lo < end && stream_entry_target(b, es, lo) == x;
}

// stream_pick is pick_static on stream entries: column index(x, deg) of
// the adjacency at off, the target (4-byte entries, or the keep word of a
// uniform walk), or the alias entry's keep when unit24(y) < prob, else alt.
__device__ __forceinline__ uint32_t stream_pick(uint64_t b, uint64_t es, bool alias, uint64_t off, uint32_t deg,
                                                uint32_t x, uint32_t y) {
  const uint64_t col = off + index(x, deg);
  const uint32_t* a = reinterpret_cast<const uint32_t*>(b + col * es);
  if (es == 4) return __ldg(a);
  return !alias || unit24(y) < __uint_as_float(__ldg(a)) ? __ldg(a + 1) : __ldg(a + 2);
}

// stream_walk_body: each thread takes one listed walker at a time and
// steps it with the draws of walk/draws.go (draw 0 of (seed, walk, step)),
// as walk_thread's static, PPR and MetaPath (label tables) modes do,
// writing each vertex to its row (global memory) as it goes. It parks the
// walker (state back to global memory) at the first vertex whose partition
// is on neither side; a dead end, a PPR stop or the last step finish it.
//
// kN2V (stream_walk_node2vec) runs node2vec_reject's loop in phases
// (gpu/streamn2v.go): attempt a draws draw a; a proposal x = u, or a word
// z under both the neighbour and outward thresholds, or at or over both,
// is decided at v; otherwise the class test reads u's adjacency, at once
// when u's partition is on the device too, else the walker parks in the
// check phase (candidate, attempt) and the test runs in a visit of u's
// partition. After kMaxRejections rejections it parks for the host's scan.
template <bool kN2V>
__device__ __forceinline__ void stream_walk_body(const ws::StreamParams* __restrict__ P, uint64_t cur, uint64_t cur_base,
                                                 uint64_t cur_bytes) {
  using namespace ws;
  __shared__ uint32_t sb[kMaxStreamParts + 1];
  __shared__ uint64_t sbase[kMaxStreamParts];
  const uint32_t np = (uint32_t)P->nparts;
  for (uint32_t i = threadIdx.x; i <= np; i += blockDim.x) {
    sb[i] = P->bounds[i];
    if (i < np) sbase[i] = i == cur ? cur_base : P->base[i];
  }
  __syncthreads();
  const uint64_t* __restrict__ offsets = P->offsets;
  const Task* __restrict__ tasks = P->tasks;
  const uint64_t* __restrict__ seeds = P->seeds;
  uint32_t* __restrict__ result = P->result;
  uint32_t* __restrict__ wv = P->wv;
  uint32_t* __restrict__ wstep = P->wstep;
  const uint32_t* __restrict__ list = P->list;
  const uint32_t len = P->list_len[0];
  uint32_t* cursor = P->list_len + 1;
  const uint64_t stride = P->stride;
  const uint32_t length = (uint32_t)P->length;
  const uint64_t mode = P->mode;
  const bool alias = (mode & kStreamAlias) != 0, ppr = (mode & kStreamPPR) != 0;
  const uint64_t res_bytes = (mode & kStreamEntries) != 0 ? 12 : 4;
  const uint64_t stop = P->stop_threshold;
  const bool metapath = !kN2V && (mode & kStreamMetaPath) != 0;
  const uint32_t* __restrict__ seg_ends = P->seg_ends;
  const uint32_t num_labels = (uint32_t)P->num_labels;
  const uint32_t schema_len = (uint32_t)P->schema_len;
  uint64_t acc0 = 0, acc1 = 0, acc2 = 0;
  if (kN2V) {
    acc0 = P->accept[0];
    acc1 = P->accept[1];
    acc2 = P->accept[2];
  }
  const uint64_t lo_acc = min(acc1, acc2), hi_acc = max(acc1, acc2);
  const unsigned lane = threadIdx.x & 31;
  for (;;) {
    const unsigned active = __activemask();
    const uint32_t idx = take_global_task(cursor, active, active, lane);
    if (idx >= len) break;
    const uint32_t i = list[idx];
    const Task t = tasks[i];
    const uint64_t seed = seeds[t.job], walk = t.walk;
    uint32_t* row = result + (uint64_t)i * stride;
    uint32_t v = wv[i], step = wstep[i];
    uint32_t u = kNoVertex, ph = kN2VPropose, cand = 0;
    if (kN2V) {
      u = P->wprev[i];
      ph = P->wphase[i];
      cand = P->wcand[i];
    }
    bool done = false;
    for (;;) {
      uint32_t next = 0;
      if (kN2V && (ph & 0xFFu) == kN2VCheck) {
        // The class test of attempt ph >> 8 at u's partition.
        const uint32_t pu = stream_part(sb, np, u);
        const uint64_t bu = sbase[pu];
        if (bu == 0) break;  // park: u's partition is not on the device
        const uint32_t a = ph >> 8;
        const uint64_t z = draw(seed, walk, step, a).z;
        const bool adj = stream_has_edge(bu, pu == cur ? cur_bytes : res_bytes, offsets[u], offsets[u + 1], cand);
        if (z >= (adj ? acc1 : acc2)) {
          if (a + 1 == kMaxRejections) {
            ph = kN2VScan;
            break;  // park for the host's scan
          }
          ph = (a + 1) << 8 | kN2VPropose;
          continue;
        }
        next = cand;
      } else {
        uint64_t off = offsets[v];
        uint32_t deg = (uint32_t)(offsets[v + 1] - off);
        if (metapath) {
          const uint32_t l = P->schema[step % schema_len];
          const uint32_t* se = seg_ends + (uint64_t)v * (num_labels - 1);
          const uint32_t a = l == 0 ? 0 : se[l - 1];
          const uint32_t z = l == num_labels - 1 ? deg : se[l];
          off += a;
          deg = z - a;
        }
        if (deg == 0) {
          done = true;
          break;
        }
        const uint32_t p = stream_part(sb, np, v);
        const uint64_t b = sbase[p];
        if (b == 0) break;  // park: its partition is not on the device
        // The streamed partition may hold bare targets (a uniform walk of a
        // weighted graph copies a third of the bytes); alias walks always
        // see 12-byte entries.
        const uint64_t es = p == cur ? cur_bytes : res_bytes;
        if (!kN2V || u == kNoVertex) {
          const uint4 w = draw(seed, walk, step, 0);
          uint32_t x = w.x, y = w.y;
          if (ppr) {
            if ((uint64_t)w.x < stop) {
              done = true;
              break;
            }
            x = w.y;
            y = w.z;
          }
          next = stream_pick(b, es, alias, off, deg, x, y);
        } else {
          // node2vec_reject from attempt ph >> 8.
          uint32_t a = ph >> 8;
          bool took = false, park = false;
          for (; a < kMaxRejections; a++) {
            const uint4 w = draw(seed, walk, step, a);
            const uint32_t x = stream_pick(b, es, alias, off, deg, w.x, w.y);
            const uint64_t z = w.z;
            if (x == u) {
              took = z < acc0;
            } else if (z < lo_acc) {
              took = true;
            } else if (z < hi_acc) {
              const uint32_t pu = stream_part(sb, np, u);
              const uint64_t bu = sbase[pu];
              if (bu == 0) {
                cand = x;
                park = true;
                break;
              }
              const bool adj = stream_has_edge(bu, pu == cur ? cur_bytes : res_bytes, offsets[u], offsets[u + 1], x);
              took = z < (adj ? acc1 : acc2);
            }
            if (took) {
              next = x;
              break;
            }
          }
          if (park) {
            ph = a << 8 | kN2VCheck;
            break;  // park at u's partition
          }
          if (!took) {
            ph = kN2VScan;
            break;  // park for the host's scan
          }
        }
      }
      step++;
      row[step] = next;
      if (kN2V) {
        u = v;
        ph = kN2VPropose;
      }
      v = next;
      if (step >= length) {
        done = true;
        break;
      }
    }
    if (done) {
      P->lengths[i] = step + 1;
      wv[i] = kNoVertex;
    } else {
      wv[i] = v;
      wstep[i] = step;
    }
    if (kN2V) {
      P->wprev[i] = u;
      P->wphase[i] = ph;
      P->wcand[i] = cand;
    }
  }
}

}  // namespace ws

extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_walk(const ws::StreamParams* __restrict__ P, uint64_t cur,
                                                                           uint64_t cur_base, uint64_t cur_bytes) {
  ws::stream_walk_body<false>(P, cur, cur_base, cur_bytes);
}

extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_walk_node2vec(const ws::StreamParams* __restrict__ P,
                                                                                    uint64_t cur, uint64_t cur_base,
                                                                                    uint64_t cur_bytes) {
  ws::stream_walk_body<true>(P, cur, cur_base, cur_bytes);
}

// stream_scan_list writes a record (kN2VScanWords words) of each walker
// waiting for the host's scan into recs, up to cap of them, counting them
// all in count[0]: the host scans the first cap, the others wait for the
// next round. One thread a walker.
extern "C" __global__ void stream_scan_list(const ws::StreamParams* __restrict__ P, uint32_t* __restrict__ recs,
                                            uint64_t cap, uint32_t* __restrict__ count) {
  using namespace ws;
  const uint64_t n = P->n;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t v = P->wv[i];
    if (v == kNoVertex || (P->wphase[i] & 0xFFu) != kN2VScan) continue;
    const uint32_t at = atomicAdd(count, 1u);
    if (at >= cap) continue;
    const Task t = P->tasks[i];
    uint32_t* r = recs + (uint64_t)at * kN2VScanWords;
    r[0] = (uint32_t)i;
    r[1] = v;
    r[2] = P->wprev[i];
    r[3] = P->wstep[i];
    r[4] = (uint32_t)t.walk;
    r[5] = (uint32_t)(t.walk >> 32);
    r[6] = t.job;
    r[7] = 0;
  }
}

// stream_scan_apply takes the step the host's scan picked (record word 7)
// for each of the m records: the row, the walker's vertices and step, the
// propose phase, or its end at the walk's last step. One thread a record.
extern "C" __global__ void stream_scan_apply(const ws::StreamParams* __restrict__ P, const uint32_t* __restrict__ recs,
                                             uint64_t m) {
  using namespace ws;
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < m; k += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t* r = recs + k * kN2VScanWords;
    const uint32_t i = r[0], v = r[1], step = r[3] + 1, x = r[7];
    P->result[(uint64_t)i * P->stride + step] = x;
    P->wprev[i] = v;
    P->wphase[i] = kN2VPropose;
    P->wstep[i] = step;
    if (step >= (uint32_t)P->length) {
      P->lengths[i] = step + 1;
      P->wv[i] = kNoVertex;
    } else {
      P->wv[i] = x;
    }
  }
}
