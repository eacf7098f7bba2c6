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
};
static_assert(sizeof(StreamParams) == 232, "StreamParams layout changed: update gpu/stream_cuda.go");

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
  }
}

extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_count(const ws::StreamParams* __restrict__ P) {
  using namespace ws;
  __shared__ uint32_t sb[kMaxStreamParts + 1];
  __shared__ uint32_t sc[kMaxStreamParts];
  const uint32_t np = (uint32_t)P->nparts;
  for (uint32_t i = threadIdx.x; i <= np; i += blockDim.x) {
    sb[i] = P->bounds[i];
    if (i < np) sc[i] = 0;
  }
  __syncthreads();
  const uint64_t n = P->n;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t v = P->wv[i];
    if (v != kNoVertex) atomicAdd(&sc[stream_part(sb, np, v)], 1u);
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < np; i += blockDim.x) {
    if (sc[i]) atomicAdd(&P->counts[i], sc[i]);
  }
}

// stream_collect lists the walkers whose partition is resident or cur.
// The loop index is warp-uniform so every lane reaches the ballot.
extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_collect(const ws::StreamParams* __restrict__ P, uint64_t cur) {
  using namespace ws;
  __shared__ uint32_t sb[kMaxStreamParts + 1];
  __shared__ uint8_t in[kMaxStreamParts];
  const uint32_t np = (uint32_t)P->nparts;
  for (uint32_t i = threadIdx.x; i <= np; i += blockDim.x) {
    sb[i] = P->bounds[i];
    if (i < np) in[i] = P->base[i] != 0 || i == cur;
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
      want = v != kNoVertex && in[stream_part(sb, np, v)];
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

// stream_walk: each thread takes one listed walker at a time and steps it
// with the draws of walk/draws.go (draw 0 of (seed, walk, step)), as
// walk_thread's static, PPR and MetaPath (label tables) modes do, writing each vertex to its row
// (global memory) as it goes. It parks the walker (state back to global
// memory) at the first vertex whose partition is on neither side; a dead
// end, a PPR stop or the last step finish it.
extern "C" __global__ void __launch_bounds__(ws::kStreamBlock) stream_walk(const ws::StreamParams* __restrict__ P, uint64_t cur,
                                                                           uint64_t cur_base, uint64_t cur_bytes) {
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
  const bool metapath = (mode & kStreamMetaPath) != 0;
  const uint32_t* __restrict__ seg_ends = P->seg_ends;
  const uint32_t num_labels = (uint32_t)P->num_labels;
  const uint32_t schema_len = (uint32_t)P->schema_len;
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
    bool done = false;
    for (;;) {
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
      const uint64_t col = off + index(x, deg);
      const uint32_t* a = reinterpret_cast<const uint32_t*>(b + col * es);
      uint32_t next;
      if (es == 4) {
        next = __ldg(a);
      } else {
        next = !alias || unit24(y) < __uint_as_float(__ldg(a)) ? __ldg(a + 1) : __ldg(a + 2);
      }
      step++;
      row[step] = next;
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
  }
}
