// walk.cu: the kernels of the GPU engine (gpu/ launches them).
//
//   alias_build     one thread per vertex builds its alias table, bit for bit
//                   the construction of walk.aliasVertex (float64, LIFO lists)
//   walk_thread     persistent blocks for the O(1) samplers (uniform, alias,
//                   PPR, Node2Vec rejection): every thread is a sampler that
//                   holds one walk of the block's task pool in registers
//   sample_neighbor_hop  (sample.cuh) one warp per frontier vertex selects
//                   k of its edges for neighbour sampling, as graphsample.Sample
//   sample_neighbor_resolve, _layout, scan_u32_*  (sample_columns.cuh) the
//                   hops' frontiers and the sample's columns in instance order
//   sample_layer    (sample_layer.cuh) one warp per instance runs every hop
//                   of layer sampling, as graphsample.Sample
//   sample_frontier (sample_frontier.cuh) one warp per instance walks the
//                   multi-dimensional random walk, as graphsample.Sample
//   walk_temporal_* (below, temporal.cuh) persistent blocks for temporal
//                   walks, one walk per thread as walk_thread, one kernel per
//                   time bias and weighting
//   stream_*        (stream.cuh) partition streaming: walkers bucketed by
//                   partition, walked while their partition is on the device
//   walk_overlay_*  (below, overlay.cuh) walk_thread's loop on a live graph's
//                   snapshot: the base CSR plus the snapshot's delta
//   walk_overlay_temporal_*  (below, overlaytemporal.cuh) walk_temporal's
//                   loop on a snapshot: a vertex with a delta steps on its
//                   timed list
//   walk_reservoir  persistent blocks for the reservoir samplers (ZPRS, DPRS;
//                   MetaPath by default): a local task pool of kLocalPoolSlots
//                   walks in shared memory, warp samplers for degrees up to
//                   warp_threshold, the block sampler above (FlowWalker §5)
//
// Both walk kernels take tasks from the global task pool (params.tasks) by
// an atomic cursor and refill a finished slot at once, so no walk waits for
// a slow neighbour. A walk's row of the result pool is written in place
// (walk-major, stride vertices a row, stride a multiple of 8 so rows start
// on 32-byte sectors) so one contiguous copy brings a batch
// back.
#include "params.cuh"
#include "rng.cuh"
#include "samplers.cuh"
#include "scan.cuh"
#include "taskpool.cuh"
#include "placement.cuh"
#include "sample.cuh"
#include "sample_layer.cuh"
#include "sample_frontier.cuh"
#include "sample_fire.cuh"
#include "sample_columns.cuh"
#include "temporal.cuh"
#include "stream.cuh"
#include "overlay.cuh"
#include "overlaytemporal.cuh"
#include "partsplit.cuh"

using namespace ws;

// ---------------------------------------------------------------- alias_build
// scaled (float64, E) and stack (uint32, E) are scratch in global memory:
// vertex v uses [off, off+d) of each; its small list grows up from off and
// its large list down from off+d-1 (an index sits in at most one list, so
// they never meet). __dmul_rn/__ddiv_rn/__dadd_rn forbid FMA contraction:
// the tables must equal the CPU's bit for bit.
extern "C" __global__ void alias_build(const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets,
                                       const float* __restrict__ weights, AliasEntry* __restrict__ table,
                                       double* __restrict__ scaled, uint32_t* __restrict__ stack, uint64_t nv) {
  for (uint64_t v = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; v < nv; v += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t off = offsets[v];
    const uint32_t d = (uint32_t)(offsets[v + 1] - off);
    if (d == 0) continue;
    double sum = 0;
    for (uint32_t i = 0; i < d; i++) sum = __dadd_rn(sum, (double)weights[off + i]);
    const double fd = (double)d;
    double* sc = scaled + off;
    uint32_t* small = stack + off;          // small[0..ns)
    uint32_t* large = stack + off + d - 1;  // large[0], large[-1], ... (nl entries)
    uint32_t ns = 0, nl = 0;
    for (uint32_t i = 0; i < d; i++) {
      const double s = __ddiv_rn(__dmul_rn((double)weights[off + i], fd), sum);
      sc[i] = s;
      if (s < 1.0) small[ns++] = i; else *(large - nl++) = i;
    }
    AliasEntry* tab = table + off;
    while (ns > 0 && nl > 0) {
      const uint32_t s = small[--ns];
      const uint32_t l = *(large - --nl);
      tab[s].prob = __double2float_rn(sc[s]);
      tab[s].alias = l;
      const double nlv = __dadd_rn(__dadd_rn(sc[l], sc[s]), -1.0);
      sc[l] = nlv;
      if (nlv < 1.0) small[ns++] = l; else *(large - nl++) = l;
    }
    while (ns > 0) {
      const uint32_t i = small[--ns];
      tab[i].prob = 1.f;
      tab[i].alias = i;
    }
    while (nl > 0) {
      const uint32_t i = *(large - --nl);
      tab[i].prob = 1.f;
      tab[i].alias = i;
    }
    for (uint32_t i = 0; i < d; i++) {
      tab[i].keep = targets[off + i];
      tab[i].alt = targets[off + tab[i].alias];
    }
  }
}

// ---------------------------------------------------------------- walk_thread
constexpr int kThreadBlock = 256;

// node2vec_reject: Node2Vec step >= 1 by rejection (walk/draws.go): attempt
// a uses draw a; a proposal from the static bias is accepted when word z is
// under the threshold of f/fmax. Most acceptances are decided before the
// binary search: z under both the neighbour and outward thresholds accepts
// whatever the class, and at or over both rejects (when 1/p is the largest
// factor, half of the attempts with p 0.5, q 2).
__device__ __forceinline__ uint32_t node2vec_reject(const WalkParams& P, uint4 w, uint64_t seed, uint64_t walk,
                                                    uint32_t step, uint64_t off, uint32_t deg, uint32_t prev,
                                                    uint64_t poff, uint32_t pdeg) {
  const uint64_t either = min(P.accept[1], P.accept[2]), neither = max(P.accept[1], P.accept[2]);
  const EdgeArrays cur = edges_at(P, off);
  const uint32_t* ptg = side(P.targets, P.h_targets, P.split, poff);  // the previous vertex's
  for (uint32_t a = 0; a < kMaxRejections; a++) {
    if (a > 0) w = draw(seed, walk, step, a);
    const uint32_t x = pick_static(cur.targets, cur.alias, off, deg, w.x, w.y);
    const uint64_t z = w.z;
    if (x == prev) {
      if (z < P.accept[0]) return x;
      continue;
    }
    if (z < either) return x;
    if (z >= neither) continue;
    if (z < P.accept[has_edge(ptg, poff, poff + pdeg, x) ? 1 : 2]) return x;
  }
  return node2vec_scan(cur.weights, cur.targets, ptg, off, deg, prev, poff, poff + pdeg, P.bias, seed, walk, step);
}

// walk_thread: each thread owns one walk at a time (its slot of the block's
// task pool, in registers) and takes one step per loop iteration, so walks
// of different lengths (PPR, dead ends) never hold a lane idle: a lane whose
// walk ended takes the next task at once. Task fetches are aggregated per
// warp: one atomicAdd on the global cursor serves every lane that needs one.
// The launch parameters are copied to registers once: the step loop's
// dependent loads then start from registers, not from a parameter load.
enum Mode { kModeStatic, kModePPR, kModeNode2Vec, kModeMetaPath };

constexpr uint32_t kStage = 8;  // vertices a thread stages: one 32-byte sector

// flush_stage writes staged vertices 8g..8g+7 of a row (words past the
// walk's end are garbage the host never reads).
__device__ __forceinline__ void flush_stage(uint32_t* row, uint32_t g, const uint32_t* mine) {
  uint4* dst = reinterpret_cast<uint4*>(row + (g << 3));
  dst[0] = make_uint4(mine[0], mine[1], mine[2], mine[3]);
  dst[1] = make_uint4(mine[4], mine[5], mine[6], mine[7]);
}

template <int kMode, bool kPlaced>
__device__ __forceinline__ void walk_thread_body(const WalkParams* __restrict__ params) {
  const uint64_t* __restrict__ offsets = params->offsets;
  // Under a placement plan (kPlaced: its own kernels, so the all-device
  // ones carry no extra registers) each step picks device or host arrays.
  const uint64_t* __restrict__ place = kPlaced ? params->place : nullptr;
  const uint64_t split = kPlaced ? params->split : ~0ull, seg_split = kPlaced ? params->seg_split : ~0ull;
  const uint32_t* __restrict__ h_targets = kPlaced ? params->h_targets : nullptr;
  const AliasEntry* __restrict__ h_alias = kPlaced ? params->h_alias : nullptr;
  const uint32_t* __restrict__ targets = params->targets;
  const AliasEntry* __restrict__ alias = params->alias;
  const Task* __restrict__ tasks = params->tasks;
  const uint64_t* __restrict__ seeds = params->seeds;
  uint32_t* __restrict__ result = params->result;
  uint32_t* __restrict__ lengths = params->lengths;
  uint32_t* cursor = params->cursor;
  const uint64_t stride = params->stride;
  const unsigned lane = threadIdx.x & 31;
  const uint32_t n = (uint32_t)params->n_tasks;
  const uint32_t length = (uint32_t)params->length;
  const uint64_t stop = params->stop_threshold;
  constexpr bool metapath = kMode == kModeMetaPath;
  const uint64_t* __restrict__ seg_offsets = params->seg_offsets;
  const uint32_t* __restrict__ seg_targets = params->seg_targets;
  const AliasEntry* __restrict__ seg_alias = params->seg_alias;
  const uint32_t num_labels = (uint32_t)params->num_labels;
  const uint32_t schema_len = (uint32_t)params->schema_len;

  uint32_t task = kNoTask, cur = 0, prev = kNoVertex, step = 0, deg = 0, pdeg = 0;
  uint64_t off = 0, poff = 0, walk = 0, seed = 0;
  uint32_t* row = nullptr;
  // The walk's next eight vertices are staged in shared memory (one row of
  // kStage words a thread, padded to nine words so a warp's stores hit
  // distinct banks) and written as two 16-byte stores: whole 32-byte
  // sectors, where single words would leave partial sectors that ECC memory
  // must read, merge and write back.
  __shared__ uint32_t stage[kThreadBlock][kStage + 1];
  uint32_t* mine = stage[threadIdx.x];
  for (;;) {
    const unsigned active = __activemask();
    const bool need = task == kNoTask;
    const unsigned want = __ballot_sync(active, need);
    if (want) {
      const uint32_t idx = take_global_task(cursor, active, want, lane);
      if (need) {
        if (idx >= n) break;  // the pool is dry: this lane is done
        const Task t = tasks[idx];
        task = idx;
        cur = t.start;
        walk = t.walk;
        seed = seeds[t.job];
        prev = kNoVertex;
        step = 0;
        if (!metapath) off = vertex_edges(offsets, place, cur, deg);
        row = result + (uint64_t)idx * stride;
        mine[0] = cur;
      }
    }
    // MetaPath samples inside the segment of the step's label.
    const uint32_t* tg = targets;
    const AliasEntry* al = alias;
    if (metapath) {
      const uint64_t s = (uint64_t)cur * num_labels + params->schema[step % schema_len];
      off = seg_offsets[s];
      deg = (uint32_t)(seg_offsets[s + 1] - off);
      tg = seg_targets;
      al = seg_alias;
      if (kPlaced) {
        off = segment_start(*params, cur, off);
        if (off >= seg_split) {
          tg = params->h_seg_targets;
          al = params->h_seg_alias;
        }
      }
    } else if (kPlaced && off >= split) {
      tg = h_targets;
      al = h_alias;
    }
    bool more = deg > 0;
    uint32_t next = 0;
    if (more) {
      const uint4 w = draw(seed, walk, step, 0);
      if (kMode == kModePPR) {
        more = (uint64_t)w.x >= stop;
        next = pick_static(tg, al, off, deg, w.y, w.z);
      } else if (kMode == kModeNode2Vec && prev != kNoVertex) {
        next = node2vec_reject(*params, w, seed, walk, step, off, deg, prev, poff, pdeg);
      } else {
        next = pick_static(tg, al, off, deg, w.x, w.y);
      }
    }
    if (more) {
      const uint32_t at = step + 1;
      mine[at & (kStage - 1)] = next;
      if ((at & (kStage - 1)) == kStage - 1) flush_stage(row, at >> 3, mine);
      step++;
      prev = cur;
      poff = off;
      pdeg = deg;
      cur = next;
      more = step < length;
      if (more && !metapath) off = vertex_edges(offsets, place, cur, deg);
    }
    if (!more) {
      if ((step & (kStage - 1)) != kStage - 1) flush_stage(row, step >> 3, mine);
      lengths[task] = step + 1;
      task = kNoTask;
    }
  }
}

// One kernel per mode, so the simple modes do not carry Node2Vec's
// registers; each in two register budgets: the compiler's choice, and capped
// for full occupancy (eight blocks, 2048 threads an SM) to keep more walks
// in flight against memory latency. The engine picks per mode.
#define WALK_THREAD_PLACED(name, mode, placed)                                                        \
  extern "C" __global__ void __launch_bounds__(kThreadBlock) name(const WalkParams* __restrict__ p) { \
    walk_thread_body<mode, placed>(p);                                                                \
  }                                                                                                   \
  extern "C" __global__ void __launch_bounds__(kThreadBlock, 8) name##_full(const WalkParams* __restrict__ p) { \
    walk_thread_body<mode, placed>(p);                                                                \
  }
#define WALK_THREAD(name, mode)               \
  WALK_THREAD_PLACED(name, mode, false)       \
  WALK_THREAD_PLACED(name##_placed, mode, true)
WALK_THREAD(walk_thread_static, kModeStatic)
WALK_THREAD(walk_thread_ppr, kModePPR)
WALK_THREAD(walk_thread_node2vec, kModeNode2Vec)
WALK_THREAD(walk_thread_metapath, kModeMetaPath)

// -------------------------------------------------------------- walk_overlay
// walk_overlay: walk_thread's loop (task pool, staging, one walk a thread)
// for DeepWalk, PPR and Node2Vec (kN2V) on a live graph's snapshot: each
// step is overlay_step's or overlay_node2vec_step's (overlay.cuh), which
// take the base's step at a vertex without a delta. Only for a graph wholly
// on the device (no placement plan, no streaming, no stripes:
// gpu/overlay_cuda.go refuses the rest).
template <bool kPPR, bool kEdges, bool kN2V = false, bool kMP = false>
__device__ __forceinline__ void walk_overlay_body(const WalkParams* __restrict__ params, const DeltaParams& D,
                                                  const EdgeSet& S = EdgeSet{}, const MetaPathArgs& M = MetaPathArgs{}) {
  const uint32_t* __restrict__ targets = params->targets;
  const AliasEntry* __restrict__ alias = params->alias;
  const float* __restrict__ weights = params->weights;
  const bool weighted = params->weighted != 0;
  const Task* __restrict__ tasks = params->tasks;
  const uint64_t* __restrict__ seeds = params->seeds;
  uint32_t* __restrict__ result = params->result;
  uint32_t* __restrict__ lengths = params->lengths;
  uint32_t* cursor = params->cursor;
  const uint64_t stride = params->stride;
  const unsigned lane = threadIdx.x & 31;
  const uint32_t n = (uint32_t)params->n_tasks;
  const uint32_t length = (uint32_t)params->length;
  const uint64_t stop = params->stop_threshold;

  uint32_t task = kNoTask, cur = 0, step = 0;
  uint32_t prev = kNoVertex;  // Node2Vec's previous vertex
  uint64_t walk = 0, seed = 0;
  uint32_t* row = nullptr;
  __shared__ uint32_t stage[kThreadBlock][kStage + 1];
  uint32_t* mine = stage[threadIdx.x];
  for (;;) {
    const unsigned active = __activemask();
    const bool need = task == kNoTask;
    const unsigned want = __ballot_sync(active, need);
    if (want) {
      const uint32_t idx = take_global_task(cursor, active, want, lane);
      if (need) {
        if (idx >= n) break;  // the pool is dry: this lane is done
        const Task t = tasks[idx];
        task = idx;
        cur = t.start;
        walk = t.walk;
        seed = seeds[t.job];
        step = 0;
        prev = kNoVertex;
        row = result + (uint64_t)idx * stride;
        mine[0] = cur;
      }
    }
    uint32_t next = 0;
    bool more;
    if (kMP) {
      more = overlay_metapath_step(D, M, *params, weighted, params->schema[step % (uint32_t)params->schema_len], seed, walk, step, cur, next);
    } else if (kN2V) {
      more = overlay_node2vec_step(D, S, targets, alias, weights, weighted, params->accept, params->bias, seed, walk, step, prev, cur, next);
    } else {
      more = overlay_step<kPPR, kEdges>(D, targets, alias, weights, weighted, stop, seed, walk, step, cur, next);
    }
    if (more) {
      const uint32_t at = step + 1;
      mine[at & (kStage - 1)] = next;
      if ((at & (kStage - 1)) == kStage - 1) flush_stage(row, at >> 3, mine);
      step++;
      prev = cur;
      cur = next;
      more = step < length;
    }
    if (!more) {
      if ((step & (kStage - 1)) != kStage - 1) flush_stage(row, step >> 3, mine);
      lengths[task] = step + 1;
      task = kNoTask;
    }
  }
}

// In three register budgets: the compiler's, capped at 64 (four blocks an
// SM) and at 40 (six blocks, a few spills), and the 40 one with the
// dead-edge and dead-item bitmaps (_6e, the engine's default: a target in
// the record's filter is looked up there before the head, and one in the
// head's filter in place of the tombstones' search); gpu/overlay_cuda.go's
// overlayVariant picks one (docs/benchmarks/live-graph.md has the
// measurements). The delta's pointers are kernel arguments, read from the
// parameter bank where a step needs them rather than held in registers.
#define WALK_OVERLAY_ARGS                                                                              \
  const WalkParams *__restrict__ p, const uint64_t *__restrict__ records, uint64_t n_records,            \
      const uint32_t *__restrict__ dead_edges, const uint32_t *__restrict__ dead_items,                  \
      const DeltaWord *__restrict__ words,                                                               \
      const DeltaHead *__restrict__ heads, const DeltaHead *__restrict__ pheads, const uint2 *__restrict__ items, \
      uint64_t base_vertices, uint64_t n_words
#define WALK_OVERLAY_PARAMS \
  DeltaParams{records, n_records, dead_edges, dead_items, words, heads, pheads, items, base_vertices, n_words}
#define WALK_OVERLAY(name, ppr)                                                                      \
  extern "C" __global__ void __launch_bounds__(kThreadBlock) name(WALK_OVERLAY_ARGS) {               \
    walk_overlay_body<ppr, false>(p, WALK_OVERLAY_PARAMS);                                           \
  }                                                                                                  \
  extern "C" __global__ void __launch_bounds__(kThreadBlock, 4) name##_full(WALK_OVERLAY_ARGS) {     \
    walk_overlay_body<ppr, false>(p, WALK_OVERLAY_PARAMS);                                           \
  }                                                                                                  \
  extern "C" __global__ void __launch_bounds__(kThreadBlock, 6) name##_6(WALK_OVERLAY_ARGS) {        \
    walk_overlay_body<ppr, false>(p, WALK_OVERLAY_PARAMS);                                           \
  }                                                                                                  \
  extern "C" __global__ void __launch_bounds__(kThreadBlock, 6) name##_6e(WALK_OVERLAY_ARGS) {       \
    walk_overlay_body<ppr, true>(p, WALK_OVERLAY_PARAMS);                                            \
  }
WALK_OVERLAY(walk_overlay_static, false)
WALK_OVERLAY(walk_overlay_ppr, true)

// walk_overlay_node2vec: Node2Vec (rejection sampler) on a snapshot, in the
// compiler's register budget alone (its rejection loop and searches would
// spill under a cap, as walk_thread_node2vec's would); after the overlay
// arguments, the snapshot's edge set (overlay_edge_set).
extern "C" __global__ void __launch_bounds__(kThreadBlock) walk_overlay_node2vec(WALK_OVERLAY_ARGS,
    unsigned long long* __restrict__ set_keys, uint32_t* __restrict__ set_vals, uint64_t set_mask) {
  walk_overlay_body<false, false, true>(p, WALK_OVERLAY_PARAMS, EdgeSet{set_keys, set_vals, set_mask});
}

// walk_overlay_metapath: MetaPath (the auto sampler, on the label tables)
// on a snapshot; after the overlay arguments, the appended edges' labels
// and the segments' weight sums (label_weight_sums; null for an
// unweighted walk).
extern "C" __global__ void __launch_bounds__(kThreadBlock) walk_overlay_metapath(WALK_OVERLAY_ARGS,
    const uint8_t* __restrict__ dlabels, const double* __restrict__ seg_sums) {
  walk_overlay_body<false, false, false, true>(p, WALK_OVERLAY_PARAMS, EdgeSet{}, MetaPathArgs{dlabels, seg_sums});
}

// label_weight_sums: each (vertex, label) segment's weight sum
// (label_weight_sums_build), for MetaPath's weighted overlay step.
extern "C" __global__ void label_weight_sums(const uint64_t* __restrict__ offsets, const float* __restrict__ weights,
                                             const uint8_t* __restrict__ labels, uint64_t nv, uint64_t nl,
                                             double* __restrict__ sums) {
  label_weight_sums_build(offsets, weights, labels, nv, (uint32_t)nl, sums);
}

// overlay_edge_set: the snapshot's edge set for Node2Vec
// (overlay_edge_set_build), its arrays cleared before.
extern "C" __global__ void overlay_edge_set(const DeltaWord* __restrict__ words, const DeltaHead* __restrict__ heads,
                                            const DeltaHead* __restrict__ pheads, const uint2* __restrict__ items,
                                            uint64_t n_records, uint64_t base_vertices, uint64_t n_words,
                                            unsigned long long* __restrict__ set_keys, uint32_t* __restrict__ set_vals,
                                            uint64_t set_mask) {
  const DeltaParams D{nullptr, n_records, nullptr, nullptr, words, heads, pheads, items, base_vertices, n_words};
  overlay_edge_set_build(D, EdgeSet{set_keys, set_vals, set_mask});
}

// overlay_records: the vertex records of the delta resident on the device
// for one weighting (overlay.cuh, overlay_records_build), after its copy;
// records is the end of the kernel arguments, weighted before it.
extern "C" __global__ void overlay_records(const uint64_t* __restrict__ offsets, uint64_t n_records,
                                           const DeltaWord* __restrict__ words, const DeltaHead* __restrict__ heads,
                                           const DeltaHead* __restrict__ pheads, const uint2* __restrict__ items,
                                           uint64_t base_vertices, uint64_t n_words, uint64_t weighted,
                                           uint64_t* __restrict__ records) {
  overlay_records_build(DeltaParams{records, n_records, nullptr, nullptr, words, heads, pheads, items, base_vertices, n_words},
                        offsets, weighted != 0, records);
}

// overlay_dead_edges: the dead-edge and dead-item bitmaps of the delta
// resident on the device (overlay.cuh, overlay_dead_edges_build), cleared
// before.
extern "C" __global__ void overlay_dead_edges(const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets,
                                              uint64_t n_records, const DeltaWord* __restrict__ words,
                                              const DeltaHead* __restrict__ heads, const DeltaHead* __restrict__ pheads,
                                              const uint2* __restrict__ items, uint64_t base_vertices, uint64_t n_words,
                                              uint32_t* dead, uint32_t* items_dead) {
  overlay_dead_edges_build(DeltaParams{nullptr, n_records, dead, items_dead, words, heads, pheads, items, base_vertices, n_words},
                           offsets, targets, dead, items_dead);
}

// ------------------------------------------------------------- walk_temporal
// walk_temporal: walk_thread's loop for temporal walks (temporal.cuh has the
// step): each thread owns one walk, its vertex, edge range and time bound
// in registers, and stages its vertices in shared memory as walk_thread
// does. With times_out, each step's time goes straight to the walk's row
// of times (8 bytes, row-major like the vertices): only runs that asked for
// the times column pay for it. Only for a graph wholly on the device.
template <int kBias, bool kWeighted, bool kN2V = false>
__device__ __forceinline__ void walk_temporal_body(const WalkParams* __restrict__ params) {
  const uint64_t* __restrict__ offsets = params->offsets;
  const uint32_t* __restrict__ targets = params->targets;
  const Task* __restrict__ tasks = params->tasks;
  const uint64_t* __restrict__ seeds = params->seeds;
  uint32_t* __restrict__ result = params->result;
  int64_t* __restrict__ times_out = params->times_out;
  uint32_t* __restrict__ lengths = params->lengths;
  uint32_t* cursor = params->cursor;
  const uint64_t stride = params->stride;
  const unsigned lane = threadIdx.x & 31;
  const uint32_t n = (uint32_t)params->n_tasks;
  const uint32_t length = (uint32_t)params->length;
  const int64_t bound = params->time_start;
  const bool has_start = (params->time_flags & kTimeHasStart) != 0;
  const TemporalCtx C = temporal_ctx(params);
  // With the next table, a step after the first needs the time it took
  // only for a gap's far end and for the times column.
  const bool need_t = !C.next || C.has_gap || times_out;

  uint32_t task = kNoTask, cur = 0, step = 0;
  uint32_t prev = kNoVertex;  // temporal Node2Vec's previous vertex
  uint64_t a = 0, b = 0, walk = 0, seed = 0;
  uint32_t nxw = 0;  // the next record's y for the position taken last (step > 0, C.next)
  int64_t t = 0;
  uint32_t* row = nullptr;
  __shared__ uint32_t stage[kThreadBlock][kStage + 1];
  uint32_t* mine = stage[threadIdx.x];
  for (;;) {
    const unsigned active = __activemask();
    const bool need = task == kNoTask;
    const unsigned want = __ballot_sync(active, need);
    if (want) {
      const uint32_t idx = take_global_task(cursor, active, want, lane);
      if (need) {
        if (idx >= n) break;  // the pool is dry: this lane is done
        const Task tk = tasks[idx];
        task = idx;
        cur = tk.start;
        prev = kNoVertex;
        walk = tk.walk;
        seed = seeds[tk.job];
        step = 0;
        t = bound;
        a = offsets[cur];
        b = offsets[cur + 1];
        row = result + (uint64_t)idx * stride;
        mine[0] = cur;
        if (times_out) times_out[(uint64_t)idx * stride] = t;
      }
    }
    const bool known = step > 0 && C.next;
    uint64_t k = ~0ull;
    uint64_t lo = 0, hi = 0;
    bool coop = false;  // a Node2Vec window long enough for the warp
    if (kN2V && step > 0) {
      // From the second step: the window, then the rejection draw; a step
      // it leaves undecided takes the exact ZPRS draw over the window, by
      // this thread for a short window and by the warp below for a long one.
      temporal_window(C, a, b, t, true, known, nxw, lo, hi);
      const BaseAdj adj{targets, offsets[prev], offsets[prev + 1]};
      if (lo < hi)
        k = temporal_n2v_reject<kBias, kWeighted>(C, nullptr, targets, a, b, lo, hi, known && (nxw & kNextOneCell),
                                                  prev, params->accept, adj, seed, walk, step);
      if (k == ~1ull) {
        k = ~0ull;
        coop = hi - lo >= kN2VWarpWindow;
        if (!coop)
          k = temporal_n2v_step<kBias, kWeighted>(TemporalScan{C.times, C.bytime, C.weights, C.scale, C.backward},
                                                  targets, a, lo, hi, prev, adj, params->bias[0], params->bias[1],
                                                  params->bias[2], seed, walk, step);
      }
    } else if (a < b && kBias == kTimeExponential) {
      // The common step (exp_step_fast) first; every other step, and a
      // window whose sums are zero, takes the whole temporal_step.
      k = ~1ull;
      if (known && !C.has_gap && (nxw & kNextOneCell)) {
        k = C.backward ? exp_step_fast<true>(C.exp_sums, a, b, nxw, seed, walk, step)
                       : exp_step_fast<false>(C.exp_sums, a, b, nxw, seed, walk, step);
      }
      if (k == ~1ull)
        k = temporal_step_slow<kBias, kWeighted>(params, a, b, t, step > 0 || has_start, known, nxw, seed, walk, step);
    } else if (a < b) {
      k = temporal_step<kBias, kWeighted>(C, a, b, t, step > 0 || has_start, known, nxw, seed, walk, step);
    }
    if (kN2V) {
      // The warp takes its lanes' long windows one after another, when
      // all 32 lanes are here: each is one of the ZPRS's 32 lanes, and a
      // lane that left the loop (the pool dry) cannot take part. A warp
      // short of a lane takes them one thread each.
      const unsigned live = __activemask();
      if (live == 0xFFFFFFFFu) {
        for (unsigned todo = __ballot_sync(live, coop); todo != 0; todo &= todo - 1) {
          const int src = __ffs(todo) - 1;
          const uint32_t p = __shfl_sync(live, prev, src);
          const uint64_t r = temporal_n2v_warp<kBias, kWeighted>(
              live, lane, TemporalScan{C.times, C.bytime, C.weights, C.scale, C.backward}, targets,
              __shfl_sync(live, a, src), __shfl_sync(live, lo, src), __shfl_sync(live, hi, src), p,
              BaseAdj{targets, offsets[p], offsets[p + 1]}, params->bias[0], params->bias[1], params->bias[2],
              __shfl_sync(live, seed, src), __shfl_sync(live, walk, src), __shfl_sync(live, step, src));
          if (lane == (unsigned)src) k = r;
        }
      } else if (coop) {
        k = temporal_n2v_step<kBias, kWeighted>(TemporalScan{C.times, C.bytime, C.weights, C.scale, C.backward},
                                                targets, a, lo, hi, prev, BaseAdj{targets, offsets[prev], offsets[prev + 1]},
                                                params->bias[0], params->bias[1], params->bias[2], seed, walk, step);
      }
    }
    bool more = k != ~0ull;
    if (more) {
      uint32_t next;
      if (C.next) {
        const uint4 r = __ldg(C.next + k);
        next = r.x;
        nxw = r.y;
        a = r.z;
        b = r.w;
      } else {
        next = __ldg(targets + a + __ldg(C.bytime + k));
      }
      if (need_t) t = __ldg(C.times + k);
      const uint32_t at = step + 1;
      mine[at & (kStage - 1)] = next;
      if ((at & (kStage - 1)) == kStage - 1) flush_stage(row, at >> 3, mine);
      if (times_out) times_out[(uint64_t)task * stride + at] = t;
      step++;
      prev = cur;
      cur = next;
      more = step < length;
      if (more && !C.next) {
        a = offsets[cur];
        b = offsets[cur + 1];
      }
    }
    if (!more) {
      if ((step & (kStage - 1)) != kStage - 1) flush_stage(row, step >> 3, mine);
      lengths[task] = step + 1;
      task = kNoTask;
    }
  }
}

// Each in walk_thread's two register budgets: the compiler's, and capped
// at 64 (four blocks an SM: the exponential kernels take 80 registers
// otherwise, three blocks); the engine picks per kernel (temporal_cuda.go).
#define WALK_TEMPORAL(name, bias, weighted)                                                         \
  extern "C" __global__ void __launch_bounds__(kThreadBlock) name(const __grid_constant__ WalkParams p) { \
    walk_temporal_body<bias, weighted>(&p);                                                         \
  }                                                                                                 \
  extern "C" __global__ void __launch_bounds__(kThreadBlock, 4) name##_full(const __grid_constant__ WalkParams p) { \
    walk_temporal_body<bias, weighted>(&p);                                                         \
  }
WALK_TEMPORAL(walk_temporal_uniform, kTimeUniform, false)
WALK_TEMPORAL(walk_temporal_uniform_w, kTimeUniform, true)
WALK_TEMPORAL(walk_temporal_linear, kTimeLinear, false)
WALK_TEMPORAL(walk_temporal_linear_w, kTimeLinear, true)
WALK_TEMPORAL(walk_temporal_exp, kTimeExponential, false)
WALK_TEMPORAL(walk_temporal_exp_w, kTimeExponential, true)

// Temporal Node2Vec (p and q on a temporal walk): the first step the plain
// temporal step, the others temporal_n2v_step; the compiler's registers.
#define WALK_TEMPORAL_N2V(name, bias, weighted)                                                     \
  extern "C" __global__ void __launch_bounds__(kThreadBlock) name(const __grid_constant__ WalkParams p) { \
    walk_temporal_body<bias, weighted, true>(&p);                                                   \
  }
WALK_TEMPORAL_N2V(walk_temporal_n2v_uniform, kTimeUniform, false)
WALK_TEMPORAL_N2V(walk_temporal_n2v_uniform_w, kTimeUniform, true)
WALK_TEMPORAL_N2V(walk_temporal_n2v_linear, kTimeLinear, false)
WALK_TEMPORAL_N2V(walk_temporal_n2v_linear_w, kTimeLinear, true)
WALK_TEMPORAL_N2V(walk_temporal_n2v_exp, kTimeExponential, false)
WALK_TEMPORAL_N2V(walk_temporal_n2v_exp_w, kTimeExponential, true)

// SnapN2V is what temporal Node2Vec on a snapshot reads beyond the timed
// lists: the delta resident on the device and its edge set, for the class
// test in the snapshot (overlay_has_edge).
struct SnapN2V {
  DeltaParams D;
  EdgeSet S;
};

// SnapAdj is BaseAdj's class test in the snapshot: whether prev has a live
// edge to x (walk/cpu's overlayN2VClass).
struct SnapAdj {
  const SnapN2V* N;
  const uint32_t* __restrict__ targets;
  uint32_t prev;
  __device__ __forceinline__ bool operator()(uint32_t x) const { return overlay_has_edge(N->D, N->S, targets, prev, x); }
};

// SnapFactor is timed_list_scan's Node2Vec factor of list position k: f
// by the class of its target against prev in the snapshot.
struct SnapFactor {
  static constexpr bool kApplies = true;
  SnapAdj has;
  const uint32_t* __restrict__ ltg;
  double f0, f1, f2;
  __device__ __forceinline__ double operator()(uint64_t k) const {
    const uint32_t x = __ldg(ltg + k);
    return x == has.prev ? f0 : has(x) ? f1 : f2;
  }
};

// overlay_n2v_step is walk/cpu's temporal Node2Vec step after the first on
// a snapshot: at a vertex with a timed list (list; [a, b) the list) by
// rejection on the list and, undecided, the list's scan times the factor
// (overlayTemporalN2V); at one without, the base's step (rejection, then
// the serial ZPRS) with the classes in the snapshot (temporalNode2VecStep
// with overlay). use and nxw are the record of the edge taken, as
// temporal_step reads them.
template <int kBias, bool kWeighted>
__device__ __forceinline__ uint64_t overlay_n2v_step(const WalkParams* __restrict__ P, const TemporalCtx& C,
                                                     const TimedLists& L, const SnapN2V* N, bool list, uint64_t a,
                                                     uint64_t b, int64_t t, bool use, uint32_t nxw, uint32_t prev,
                                                     uint64_t seed, uint64_t walk, uint32_t step) {
  const TemporalCtx X = list ? list_ctx(C, L) : C;
  uint64_t lo, hi;
  temporal_window(X, a, b, t, true, use, nxw, lo, hi);
  if (lo == hi) return ~0ull;
  const SnapAdj adj{N, P->targets, prev};
  const uint64_t k =
      temporal_n2v_reject<kBias, kWeighted>(X, list ? L.targets : nullptr, P->targets, a, b, lo, hi,
                                            use && (nxw & kNextOneCell), prev, P->accept, adj, seed, walk, step);
  if (k != ~1ull) return k;
  if (list)
    return timed_list_scan<kBias, kWeighted, SnapFactor>(L.times, L.weights, lo, hi, C.scale, C.backward, seed, walk,
                                                         step, kTemporalN2VFallbackDraw,
                                                         SnapFactor{adj, L.targets, P->bias[0], P->bias[1], P->bias[2]});
  return temporal_n2v_step<kBias, kWeighted>(TemporalScan{C.times, C.bytime, C.weights, C.scale, C.backward},
                                             P->targets, a, lo, hi, prev, adj, P->bias[0], P->bias[1], P->bias[2], seed,
                                             walk, step);
}

// ------------------------------------------------------ walk_overlay_temporal
// walk_overlay_temporal: walk_temporal's loop on a live graph's snapshot
// (overlaytemporal.cuh has the list step): at a vertex with a delta the step
// draws on its timed list, elsewhere it is the base's. A step reads the next
// record of the position it took (the lists' own, timed_next_build, point
// into the target's list where it has one, the base's into the base's time
// order), so a later step neither searches its window nor reads offsets;
// a base record is of no use when its target has a list (the step then
// searches the list). Only for a graph wholly on the device.
template <int kBias, bool kWeighted, bool kN2V = false>
__device__ __forceinline__ void walk_overlay_temporal_body(const WalkParams* __restrict__ params, const TimedLists& L,
                                                           const SnapN2V* N = nullptr) {
  const uint64_t* __restrict__ offsets = params->offsets;
  const uint32_t* __restrict__ targets = params->targets;
  const Task* __restrict__ tasks = params->tasks;
  const uint64_t* __restrict__ seeds = params->seeds;
  uint32_t* __restrict__ result = params->result;
  int64_t* __restrict__ times_out = params->times_out;
  uint32_t* __restrict__ lengths = params->lengths;
  uint32_t* cursor = params->cursor;
  const uint64_t stride = params->stride;
  const unsigned lane = threadIdx.x & 31;
  const uint32_t n = (uint32_t)params->n_tasks;
  const uint32_t length = (uint32_t)params->length;
  const int64_t bound = params->time_start;
  const bool has_start = (params->time_flags & kTimeHasStart) != 0;
  const TemporalCtx C = temporal_ctx(params);

  uint32_t task = kNoTask, cur = 0, step = 0;
  uint32_t prev = kNoVertex;  // temporal Node2Vec's previous vertex
  uint64_t walk = 0, seed = 0;
  // a, b, nxw: the last record's target's order and window bound (known);
  // from_list: the record is a list's (else the base's).
  uint64_t a = 0, b = 0;
  bool known = false, from_list = false;
  uint32_t nxw = 0;
  int64_t t = 0;
  // With next records, the time of the edge taken is loaded only when a
  // step needs it (a search where the record is of no use): tpos is its
  // position, in the lists when tlist, and lazy says t is not loaded yet.
  // A gap's far end and the times column need it at every step.
  const bool eager = !C.next || C.has_gap || times_out;
  uint64_t tpos = 0;
  bool tlist = false, lazy = false;
  uint32_t* row = nullptr;
  __shared__ uint32_t stage[kThreadBlock][kStage + 1];
  uint32_t* mine = stage[threadIdx.x];
  for (;;) {
    const unsigned active = __activemask();
    const bool need = task == kNoTask;
    const unsigned want = __ballot_sync(active, need);
    if (want) {
      const uint32_t idx = take_global_task(cursor, active, want, lane);
      if (need) {
        if (idx >= n) break;  // the pool is dry: this lane is done
        const Task tk = tasks[idx];
        task = idx;
        cur = tk.start;
        prev = kNoVertex;
        walk = tk.walk;
        seed = seeds[tk.job];
        step = 0;
        t = bound;
        known = lazy = false;
        row = result + (uint64_t)idx * stride;
        mine[0] = cur;
        if (times_out) times_out[(uint64_t)idx * stride] = t;
      }
    }
    const bool bounded = step > 0 || has_start;
    const uint32_t li = cur < L.n_index ? __ldg(L.index + cur) : 0;
    const bool list = li != 0;
    const bool use = known && (from_list || !list);  // the record is of cur's order
    if (lazy && !use) {
      t = __ldg((tlist ? L.times : C.times) + tpos);
      lazy = false;
    }
    uint64_t k = ~0ull;
    uint32_t next = 0;
    if (list || cur < L.base_vertices) {
      if (!use) {
        a = list ? __ldg(L.off + li - 1) : offsets[cur];
        b = list ? __ldg(L.off + li) : offsets[cur + 1];
      }
      if (kN2V && a < b && step > 0) {
        k = overlay_n2v_step<kBias, kWeighted>(params, C, L, N, list, a, b, t, use, nxw, prev, seed, walk, step);
      } else if (a < b) {
        k = ~1ull;
        if (kBias == kTimeExponential && use && !C.has_gap && (nxw & kNextOneCell)) {
          const double* S = list ? L.exp_sums : C.exp_sums;
          k = C.backward ? exp_step_fast<true>(S, a, b, nxw, seed, walk, step)
                         : exp_step_fast<false>(S, a, b, nxw, seed, walk, step);
        }
        if (k == ~1ull) {
          // One call for both orders, their arrays selected: the lanes of
          // a warp on a list and on the base step together.
          const TemporalCtx X = list ? list_ctx(C, L) : C;
          k = temporal_step<kBias, kWeighted>(X, a, b, t, bounded, use, nxw, seed, walk, step, list, L.weights);
        }
      }
      known = false;
      if (k != ~0ull) {
        const uint4* recs = list ? L.next : C.next;
        if (recs) {
          const uint4 r = __ldg(recs + k);
          next = r.x;
          nxw = r.y;
          a = r.z;
          b = r.w;
          known = true;
        } else {
          next = list ? __ldg(L.targets + k) : __ldg(targets + a + __ldg(C.bytime + k));
        }
        if (eager || !known) {
          t = list ? __ldg(L.times + k) : __ldg(C.times + k);
        } else {
          tpos = k;
          tlist = list;
          lazy = true;
        }
        from_list = list;
      }
    }
    bool more = k != ~0ull;
    if (more) {
      const uint32_t at = step + 1;
      mine[at & (kStage - 1)] = next;
      if ((at & (kStage - 1)) == kStage - 1) flush_stage(row, at >> 3, mine);
      if (times_out) times_out[(uint64_t)task * stride + at] = t;
      step++;
      prev = cur;
      cur = next;
      more = step < length;
    }
    if (!more) {
      if ((step & (kStage - 1)) != kStage - 1) flush_stage(row, step >> 3, mine);
      lengths[task] = step + 1;
      task = kNoTask;
    }
  }
}

// The lists' arrays are kernel arguments (the parameter bank), in
// TimedLists' order; the launch's WalkParams are in device memory, as the
// other overlay kernels read them.
#define WALK_OVERLAY_TEMPORAL(name, bias, weighted)                                                     \
  extern "C" __global__ void __launch_bounds__(kThreadBlock) name(                                      \
      const WalkParams* __restrict__ p, const uint32_t* __restrict__ index, uint64_t n_index,           \
      uint64_t base_vertices, const uint64_t* __restrict__ off, const int64_t* __restrict__ times,       \
      const int64_t* __restrict__ coarse, const uint32_t* __restrict__ tgts, const float* __restrict__ w, \
      const double* __restrict__ cumw, const double* __restrict__ exp_sums, const uint4* __restrict__ nx) { \
    walk_overlay_temporal_body<bias, weighted>(                                                         \
        p, TimedLists{index, n_index, base_vertices, off, times, coarse, tgts, w, cumw, exp_sums, nx});  \
  }
WALK_OVERLAY_TEMPORAL(walk_overlay_temporal_uniform, kTimeUniform, false)
WALK_OVERLAY_TEMPORAL(walk_overlay_temporal_uniform_w, kTimeUniform, true)
WALK_OVERLAY_TEMPORAL(walk_overlay_temporal_linear, kTimeLinear, false)
WALK_OVERLAY_TEMPORAL(walk_overlay_temporal_linear_w, kTimeLinear, true)
WALK_OVERLAY_TEMPORAL(walk_overlay_temporal_exp, kTimeExponential, false)
WALK_OVERLAY_TEMPORAL(walk_overlay_temporal_exp_w, kTimeExponential, true)

// Temporal Node2Vec on a snapshot: after the lists' arguments, the delta's
// (WALK_OVERLAY_ARGS' after p, gpu's overlayArgs) and its edge set
// (edgeSetArgs), for the class test in the snapshot.
#define WALK_OVERLAY_TEMPORAL_N2V(name, bias, weighted)                                                  \
  extern "C" __global__ void __launch_bounds__(kThreadBlock) name(                                       \
      const WalkParams* __restrict__ p, const uint32_t* __restrict__ index, uint64_t n_index,            \
      uint64_t base_vertices, const uint64_t* __restrict__ off, const int64_t* __restrict__ times,        \
      const int64_t* __restrict__ coarse, const uint32_t* __restrict__ tgts, const float* __restrict__ w,  \
      const double* __restrict__ cumw, const double* __restrict__ exp_sums, const uint4* __restrict__ nx,  \
      const uint64_t* __restrict__ records, uint64_t n_records, const uint32_t* __restrict__ dead_edges,   \
      const uint32_t* __restrict__ dead_items, const DeltaWord* __restrict__ words,                      \
      const DeltaHead* __restrict__ heads, const DeltaHead* __restrict__ pheads,                         \
      const uint2* __restrict__ items, uint64_t ov_base_vertices, uint64_t n_words,                      \
      unsigned long long* __restrict__ set_keys, uint32_t* __restrict__ set_vals, uint64_t set_mask) {   \
    const SnapN2V n{DeltaParams{records, n_records, dead_edges, dead_items, words, heads, pheads, items,   \
                                ov_base_vertices, n_words},                                              \
                    EdgeSet{set_keys, set_vals, set_mask}};                                              \
    walk_overlay_temporal_body<bias, weighted, true>(                                                    \
        p, TimedLists{index, n_index, base_vertices, off, times, coarse, tgts, w, cumw, exp_sums, nx}, &n); \
  }
WALK_OVERLAY_TEMPORAL_N2V(walk_overlay_temporal_n2v_uniform, kTimeUniform, false)
WALK_OVERLAY_TEMPORAL_N2V(walk_overlay_temporal_n2v_uniform_w, kTimeUniform, true)
WALK_OVERLAY_TEMPORAL_N2V(walk_overlay_temporal_n2v_linear, kTimeLinear, false)
WALK_OVERLAY_TEMPORAL_N2V(walk_overlay_temporal_n2v_linear_w, kTimeLinear, true)
WALK_OVERLAY_TEMPORAL_N2V(walk_overlay_temporal_n2v_exp, kTimeExponential, false)
WALK_OVERLAY_TEMPORAL_N2V(walk_overlay_temporal_n2v_exp_w, kTimeExponential, true)

// temporal_cumw_build: one thread a vertex sums its weights in time order
// into cumw, float64, in the CPU's order (cpu.Engine.windowWeights), so
// weighted draws compare against the same prefix sums bit for bit.
extern "C" __global__ void temporal_cumw_build(const uint64_t* __restrict__ offsets, const float* __restrict__ weights,
                                               const uint32_t* __restrict__ bytime, double* __restrict__ cumw,
                                               uint64_t nv) {
  for (uint64_t v = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; v < nv; v += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t a = offsets[v], b = offsets[v + 1];
    double sum = 0;
    for (uint64_t k = a; k < b; k++) {
      sum = __dadd_rn(sum, (double)weights[a + bytime[k]]);
      cumw[k] = sum;
    }
  }
}

// temporal_exp_build: the exponential bias's cell sums (walk.ExpSums, whose
// comment defines them) for one scale and direction, one warp a vertex. A
// round takes the vertex's next 32 positions in summing order (forward
// from its last position down, backward from its first up), a lane each:
// its time cell and det_exp bias (times its weight when weights is not
// null) in registers; then every lane adds the round's 32 biases in order
// through shuffles, restarting at each new cell, and keeps the sum at its
// own position, so the additions are walk's, one after another, to the bit.
extern "C" __global__ void temporal_exp_build(const uint64_t* __restrict__ offsets, const int64_t* __restrict__ times,
                                              const uint32_t* __restrict__ bytime, const float* __restrict__ weights,
                                              double* __restrict__ sums, uint64_t nv, uint64_t G, double scale,
                                              uint64_t backward) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t v = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; v < nv; v += warps) {
    const uint64_t a = offsets[v], b = offsets[v + 1];
    double sum = 0;
    uint64_t cell = 0;
    for (uint64_t r = 0; r < b - a; r += 32) {
      const uint64_t i = r + lane;
      const bool valid = i < b - a;
      const uint64_t k = backward ? a + i : b - 1 - i;
      double x = 0;
      uint64_t c = 0;
      if (valid) {
        const uint64_t u = time_key(times[k]);
        c = u / G;
        uint64_t o = u - c * G;
        if (backward) o = G - 1 - o;
        x = det_exp(__ddiv_rn(-(double)o, scale));
        if (weights) x = __dmul_rn(x, (double)weights[a + bytime[k]]);
      }
      const int n = (int)min((uint64_t)32, b - a - r);
      double mine = 0;
      for (int j = 0; j < n; j++) {
        const double xj = __shfl_sync(0xffffffffu, x, j);
        const uint64_t cj = __shfl_sync(0xffffffffu, c, j);
        if (r + j == 0 || cj != cell) {
          sum = 0;
          cell = cj;
        }
        sum = __dadd_rn(sum, xj);
        if ((int)lane == j) mine = sum;
      }
      if (valid) sums[k] = mine;
    }
  }
}

// temporal_next_build: next[k], for every position k of the time order,
// the record a walk that takes k reads for its next step (temporal.cuh,
// kNextOneCell): k's target w, the window bound a step bounded by k's time
// has in w's time order (next_bound, the search temporal_step makes
// without it) and w's range [a, b) of it; the one-cell flag stays clear
// (temporal_next_cells sets it). One warp a vertex, a lane a position. For
// graphs of fewer than 2^31 edges (the engine builds none otherwise).
extern "C" __global__ void temporal_next_build(const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets,
                                               const int64_t* __restrict__ times, const int64_t* __restrict__ coarse,
                                               const uint32_t* __restrict__ bytime, uint4* __restrict__ next,
                                               uint64_t nv, uint64_t backward) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t v = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; v < nv; v += warps) {
    const uint64_t a = offsets[v], b = offsets[v + 1];
    for (uint64_t k = a + lane; k < b; k += 32) {
      const uint32_t w = targets[a + bytime[k]];
      const uint64_t wa = offsets[w], wb = offsets[w + 1];
      const uint64_t nx = next_bound(times, coarse, wa, wb, times[k], backward != 0);
      next[k] = make_uint4(w, (uint32_t)nx, (uint32_t)wa, (uint32_t)wb);
    }
  }
}

// temporal_next_cells sets (or clears) each record's kNextOneCell for the
// exponential bias's cells of width G: set when every position from the
// record's window bound to its vertex's far end (forward [nx, b), backward
// [a, nx)) is in one time cell, so exp_step skips its cell test (a window
// bounded there lies in that cell whatever the gap). One thread a record.
extern "C" __global__ void temporal_next_cells(const int64_t* __restrict__ times, uint4* __restrict__ next, uint64_t ne,
                                               uint64_t G, uint64_t backward) {
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < ne; k += (uint64_t)gridDim.x * blockDim.x) {
    uint4 r = next[k];
    const uint32_t nx = r.y & kNextPos;
    const uint32_t lo = backward ? r.z : nx, hi = backward ? nx : r.w;
    const bool one = lo < hi && time_key(times[lo]) / G == time_key(times[hi - 1]) / G;
    r.y = nx | (one ? kNextOneCell : 0u);
    next[k].y = r.y;
  }
}

// timed_next_build: the timed lists' next records (overlaytemporal.cuh),
// temporal_next_build's for a snapshot: for list position k, its target w,
// the window bound a step bounded by k's time has in w's order and w's
// range of it, in w's list when w has one (index), else in the base's time
// order; an added vertex without a list gets an empty range (a dead end).
// The one-cell flag stays clear (timed_next_cells). One warp a list.
extern "C" __global__ void timed_next_build(const uint32_t* __restrict__ index, uint64_t n_index, uint64_t base_vertices,
                                            const uint64_t* __restrict__ off, const int64_t* __restrict__ ltimes,
                                            const int64_t* __restrict__ lcoarse, const uint32_t* __restrict__ ltargets,
                                            const uint64_t* __restrict__ offsets, const int64_t* __restrict__ times,
                                            const int64_t* __restrict__ coarse, uint4* __restrict__ next, uint64_t nl,
                                            uint64_t backward) {
  const unsigned lane = threadIdx.x & 31;
  const uint64_t warps = (uint64_t)gridDim.x * (blockDim.x / 32);
  for (uint64_t j = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) / 32; j < nl; j += warps) {
    const uint64_t a = off[j], b = off[j + 1];
    for (uint64_t k = a + lane; k < b; k += 32) {
      const uint32_t w = ltargets[k];
      const uint32_t lw = w < n_index ? index[w] : 0;
      uint64_t wa = 0, wb = 0, nx = 0;
      if (lw != 0) {
        wa = off[lw - 1];
        wb = off[lw];
        nx = next_bound(ltimes, lcoarse, wa, wb, ltimes[k], backward != 0);
      } else if (w < base_vertices) {
        wa = offsets[w];
        wb = offsets[w + 1];
        nx = next_bound(times, coarse, wa, wb, ltimes[k], backward != 0);
      }
      next[k] = make_uint4(w, (uint32_t)nx, (uint32_t)wa, (uint32_t)wb);
    }
  }
}

// timed_next_cells is temporal_next_cells for the lists' records, whose
// positions are in the target's list or the base's time order (index says
// which).
extern "C" __global__ void timed_next_cells(const uint32_t* __restrict__ index, uint64_t n_index,
                                            const int64_t* __restrict__ ltimes, const int64_t* __restrict__ times,
                                            uint4* __restrict__ next, uint64_t ne, uint64_t G, uint64_t backward) {
  for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < ne; k += (uint64_t)gridDim.x * blockDim.x) {
    uint4 r = next[k];
    const int64_t* tt = r.x < n_index && index[r.x] != 0 ? ltimes : times;
    const uint32_t nx = r.y & kNextPos;
    const uint32_t lo = backward ? r.z : nx, hi = backward ? nx : r.w;
    const bool one = lo < hi && time_key(tt[lo]) / G == time_key(tt[hi - 1]) / G;
    next[k].y = nx | (one ? kNextOneCell : 0u);
  }
}

// label_tables_build regroups each vertex's edges by label (stable, so each
// label's segment stays sorted by target) into seg_targets and seg_weights,
// and writes the segment offsets. One thread a vertex, num_labels passes
// over its adjacency (the engine uses it for few labels only).
extern "C" __global__ void label_tables_build(const uint64_t* __restrict__ offsets, const uint32_t* __restrict__ targets,
                                              const float* __restrict__ weights, const uint8_t* __restrict__ labels,
                                              uint64_t* __restrict__ seg_offsets, uint32_t* __restrict__ seg_targets,
                                              float* __restrict__ seg_weights, uint64_t nv, uint64_t num_labels) {
  for (uint64_t v = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; v < nv; v += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t lo = offsets[v], hi = offsets[v + 1];
    uint64_t at = lo;
    for (uint32_t l = 0; l < num_labels; l++) {
      seg_offsets[v * num_labels + l] = at;
      for (uint64_t e = lo; e < hi; e++) {
        if (labels[e] != l) continue;
        seg_targets[at] = targets[e];
        if (weights) seg_weights[at] = weights[e];
        at++;
      }
    }
    if (v == nv - 1) seg_offsets[nv * num_labels] = hi;
  }
}

// ------------------------------------------------------------- walk_reservoir

// reservoir_step takes one step of the walk in slot s with the group's
// sampler (a warp: lane = lane id, k = 32; the block: lane = thread id,
// k = kBlockThreads). The group's first thread writes the result and
// advances or frees the slot.
template <bool kBlock, bool kDPRS, bool kN2V>
__device__ __forceinline__ void reservoir_step(const WalkParams& P, Slot& S, BlockScratch& sh, unsigned lane) {
  const uint32_t step = S.step, deg = S.deg, task = S.task, prev = S.prev, cur = S.cur;
  const uint64_t off = S.off, walk = S.walk, seed = S.seed, poff = S.poff;
  const uint32_t pdeg = S.pdeg;
  const uint32_t kind = (uint32_t)P.kind;
  bool more = deg > 0;
  if (more && kind == kPPR) more = (uint64_t)draw(seed, walk, step, 0).x >= P.stop_threshold;
  uint32_t col = kNoTask;
  if (more) {
    BiasCtx c;
    const EdgeArrays a = edges_at(P, off);
    c.weights = a.weights;
    c.labels = a.labels;
    c.targets = a.targets;
    c.ptargets = side(P.targets, P.h_targets, P.split, poff);
    c.metapath = kind == kMetaPath;
    c.want = c.metapath ? P.schema[step % (uint32_t)P.schema_len] : 0;
    c.n2v = kind == kNode2Vec && prev != kNoVertex;
    c.prev = prev;
    c.poff = poff;
    c.pend = poff + pdeg;
    c.f[0] = (float)P.bias[0];
    c.f[1] = (float)P.bias[1];
    c.f[2] = (float)P.bias[2];
    LaneWords rng;
    rng.seed = seed;
    rng.walk = walk;
    rng.step = step;
    rng.lane = kDPRS ? 0 : lane;  // DPRS: one stream for the group
    rng.k = kBlock ? kBlockThreads : 32;
    rng.m = 0;
    col = kDPRS ? dprs<kBlock, kN2V>(c, off, deg, rng, lane, sh) : zprs<kBlock, kN2V>(c, off, deg, rng, lane, sh);
    more = col != kNoTask;
  }
  if (kBlock) __syncthreads(); else __syncwarp();  // every thread has read the slot
  if (lane != 0) return;
  if (more) {
    const uint32_t next = __ldg(side(P.targets, P.h_targets, P.split, off) + off + col);
    P.result[(uint64_t)task * P.stride + step + 1] = next;
    S.step = step + 1;
    S.prev = cur;
    S.poff = off;
    S.pdeg = deg;
    S.cur = next;
    uint32_t d;
    S.off = vertex_edges(P.offsets, P.place, next, d);
    S.deg = d;
    more = step + 1 < (uint32_t)P.length;
  }
  if (!more) {
    P.lengths[task] = S.step + 1;
    S.task = kNoTask;
  }
}

template <bool kDPRS, bool kN2V>
__device__ __forceinline__ void walk_reservoir_body(const WalkParams* __restrict__ params) {
  const WalkParams& P = *params;
  __shared__ Slot slots[kLocalPoolSlots];
  __shared__ BlockScratch scratch;
  __shared__ uint32_t live_mask[2], big_mask[2];
  __shared__ uint32_t next_small;
  const unsigned tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint32_t n = (uint32_t)P.n_tasks;
  const uint32_t threshold = (uint32_t)P.warp_threshold;
  bool dry = false;  // warps 0 and 1: the global pool is exhausted
  if (tid < kLocalPoolSlots) slots[tid].task = kNoTask;
  __syncthreads();
  for (;;) {
    // Refill: thread t < kLocalPoolSlots tends slot t; one atomicAdd per warp.
    if (tid < kLocalPoolSlots) {
      Slot& S = slots[tid];
      const bool need = !dry && S.task == kNoTask;
      const unsigned want = __ballot_sync(kFull, need);
      if (want) {
        const uint32_t idx = take_global_task(P.cursor, kFull, want, lane);
        if (need && idx < n) {
          const Task t = P.tasks[idx];
          S.task = idx;
          S.cur = t.start;
          S.walk = t.walk;
          S.seed = P.seeds[t.job];
          S.prev = kNoVertex;
          S.step = 0;
          uint32_t d;
          S.off = vertex_edges(P.offsets, P.place, t.start, d);
          S.deg = d;
          S.poff = 0;
          S.pdeg = 0;
          P.result[(uint64_t)idx * P.stride] = t.start;
        }
        dry = __any_sync(kFull, need && idx >= n);
      }
      const bool live = S.task != kNoTask;
      const unsigned lm = __ballot_sync(kFull, live);
      const unsigned bm = __ballot_sync(kFull, live && S.deg > threshold);
      if (lane == 0) {
        live_mask[warp] = lm;
        big_mask[warp] = bm;
      }
    }
    if (tid == 0) next_small = 0;
    __syncthreads();
    const uint64_t live = (uint64_t)live_mask[1] << 32 | live_mask[0];
    const uint64_t big = (uint64_t)big_mask[1] << 32 | big_mask[0];
    if (live == 0) break;  // refill found nothing: every walk is done
    const uint64_t small = live & ~big;
    // Stage 1: warp samplers take the small tasks, one slot at a time.
    for (;;) {
      uint32_t s = 0;
      if (lane == 0) s = atomicAdd(&next_small, 1u);
      s = __shfl_sync(kFull, s, 0);
      if (s >= kLocalPoolSlots) break;
      if ((small >> s) & 1) reservoir_step<false, kDPRS, kN2V>(P, slots[s], scratch, lane);
    }
    __syncthreads();
    // Stage 2: the block sampler takes the large tasks.
    for (uint64_t m = big; m; m &= m - 1) {
      reservoir_step<true, kDPRS, kN2V>(P, slots[__ffsll((long long)m) - 1], scratch, tid);
      __syncthreads();
    }
  }
}

// One kernel per sampler, and Node2Vec's binary searches only where needed,
// to keep registers (and so resident blocks) in check.
#define WALK_RESERVOIR(name, dprs, n2v)                                                                 \
  extern "C" __global__ void __launch_bounds__(kBlockThreads, 4) name(const WalkParams* __restrict__ p) { \
    walk_reservoir_body<dprs, n2v>(p);                                                                  \
  }
WALK_RESERVOIR(walk_reservoir_zprs, false, false)
WALK_RESERVOIR(walk_reservoir_dprs, true, false)
WALK_RESERVOIR(walk_reservoir_zprs_n2v, false, true)
WALK_RESERVOIR(walk_reservoir_dprs_n2v, true, true)
#include "visits.cuh"

// ------------------------------------------------------------ host_read_bench
// host_read_bench measures what the placement plan's host reads can reach:
// every thread follows its own chain of random reads of vecs 16-byte words
// (one 32- or 64-byte read) from lines lines at base, each address depending
// on the previous read as a walk's next vertex does, so the reads in flight
// are bounded by the threads, as in the walk kernels. base is pinned,
// mapped host memory (or device memory, for comparison).
extern "C" __global__ void __launch_bounds__(kThreadBlock) host_read_bench(const uint4* __restrict__ base, uint64_t lines,
                                                                           uint64_t vecs, uint64_t reads,
                                                                           unsigned long long* __restrict__ sink) {
  uint64_t x = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) * 0x9E3779B97F4A7C15ull + 1;
  uint32_t acc = 0;
  for (uint64_t i = 0; i < reads; i++) {
    x ^= acc;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    const uint4* p = base + __umul64hi(x, lines) * vecs;
    for (uint64_t v = 0; v < vecs; v++) {
      const uint4 w = p[v];
      acc += w.x ^ w.y ^ w.z ^ w.w;
    }
  }
  if (acc == 0x9E3779B9u) atomicAdd(sink, 1ull);  // keeps the loads
}
