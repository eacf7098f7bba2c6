// params.cuh: what one launch of a walk kernel needs, in one struct that the
// host (gpu/params_cuda.go mirrors it field by field) copies into device
// memory before the launch. Every field is 8 bytes wide except the schema
// (64 bytes), so the Go and C layouts agree without padding rules.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace ws {

constexpr uint32_t kNoVertex = 0xFFFFFFFFu;  // graph.NoVertex
constexpr uint32_t kNoTask = 0xFFFFFFFFu;

// Algorithm kinds and samplers: the numeric values of walk.Kind and
// walk.StepperKind.
enum Kind : uint32_t { kDeepWalk = 1, kPPR = 2, kNode2Vec = 3, kMetaPath = 4 };
enum Sampler : uint32_t { kAuto = 0, kUniform = 1, kAlias = 2, kRejection = 3, kZPRS = 4, kDPRS = 5,
                          // GPU only: MetaPath through per-(vertex, label) tables, O(1) a step
                          kLabelTables = 6 };

// Draw indices (walk/draws.go): draw 0 serves the O(1) samplers and the
// PPR stop word; Node2Vec's rejection attempts use draws 0..63 and its exact
// fallback draws 64 onward; the reservoir samplers draw from 1 onward;
// temporal Node2Vec's attempt a draws 2a and 2a+1, its fallback 128 onward.
constexpr uint32_t kMaxRejections = 64;
constexpr uint32_t kFallbackDraw = 64;
constexpr uint32_t kReservoirDraw = 1;
constexpr uint32_t kTemporalN2VFallbackDraw = 2 * kMaxRejections;

constexpr int kMaxSchema = 64;

// Task is one walk of the global task pool (device memory, 16 bytes).
struct Task {
  uint32_t start;  // dense start vertex
  uint32_t job;    // index into WalkParams.seeds
  uint64_t walk;   // walk id within its job: the Philox counter
};

// AliasEntry is one packed alias-table column (device memory, 16 bytes): a
// step loads one entry and knows both candidate vertices, no second lookup
// in targets.
struct AliasEntry {
  float prob;      // keep column with this probability (walk.BuildAlias Prob)
  uint32_t keep;   // targets[off+col]
  uint32_t alt;    // targets[off+alias]
  uint32_t alias;  // local alias column (walk.BuildAlias Alias)
};

struct WalkParams {
  // Graph, resident for the engine's lifetime.
  const uint64_t* offsets;   // V+1
  const uint32_t* targets;   // E, sorted per vertex
  const float* weights;      // E or null
  const uint8_t* labels;     // E or null
  const AliasEntry* alias;   // E or null
  // Batch: task pool, result pool, cursor.
  const Task* tasks;         // n_tasks
  const uint64_t* seeds;     // per job
  uint32_t* result;          // n_tasks rows of stride vertices
  uint32_t* lengths;         // n_tasks: vertices written per walk
  uint32_t* cursor;          // global task pool head (atomic)
  uint64_t n_tasks;
  uint64_t stride;           // Length + 1
  // Algorithm.
  uint64_t kind;
  uint64_t sampler;          // resolved
  uint64_t length;           // steps
  uint64_t weighted;
  uint64_t stop_threshold;   // PPR: stop when x0 < this
  uint64_t accept[3];        // Node2Vec thresholds of f/fmax: return, neighbour, outward
  double bias[3];            // Node2Vec factors 1/p, 1, 1/q (reservoir path)
  uint64_t warp_threshold;   // degrees above go to the block sampler
  // MetaPath label tables (kLabelTables): edges regrouped by label within
  // each vertex; segment (v, l) is [seg_offsets[v*num_labels+l], next).
  const uint64_t* seg_offsets;     // V*num_labels+1
  const uint32_t* seg_targets;     // E
  const AliasEntry* seg_alias;     // E or null (unweighted walk)
  uint64_t num_labels;
  // Placement (placement.cuh, gpu/placement.go): null place and split =
  // UINT64_MAX when every edge array is on the device.
  const uint64_t* place;           // V records {relocated start, degree u32, 0 u32} (placement.cuh)
  uint64_t split;                  // relocated edges [0, split) on the device
  uint64_t seg_split;              // the same for the label tables (0 or split)
  const uint32_t* h_targets;       // host twins, pre-biased by -split
  const float* h_weights;          // (-seg_split for the h_seg_ arrays)
  const uint8_t* h_labels;
  const AliasEntry* h_alias;
  const uint32_t* h_seg_targets;
  const AliasEntry* h_seg_alias;
  uint64_t schema_len;
  uint8_t schema[kMaxSchema];
  // Temporal (temporal.cuh): the timed graph's arrays, uploaded by the
  // first temporal run and resident after it.
  const int64_t* times;      // E: per vertex, in time order (graph.Times)
  const uint32_t* bytime;    // E: time-order position -> local edge index (graph.ByTime)
  const double* cumw;        // E or null: per-vertex prefix sums of the weights in time order
  int64_t* times_out;        // n_tasks rows of stride times (with_times), or null
  uint64_t time_bias;        // TimeBias
  uint64_t time_flags;       // kTimeHasStart | kTimeHasMaxGap | kTimeBackward
  int64_t time_start;        // the first step's bound (walk.TimeParams.Bound)
  int64_t max_gap;
  double time_scale;
  uint64_t exp_cell;         // walk.ExpCell: the exponential bias's time cell width G
  const double* exp_sums;    // E or null: the exponential bias's cell sums (temporal_exp_build)
  const int64_t* coarse;     // ceil(E/kCoarse): coarse[j] = times[j*kCoarse] (temporal.cuh's searches)
  const uint4* next;         // E or null: per time-order position, the next step's record (temporal_next_build)
};

}  // namespace ws

// The host mirror (gpu/params.go) hard-codes this layout.
static_assert(sizeof(ws::WalkParams) == 472, "WalkParams layout changed: update gpu/params.go");
static_assert(offsetof(ws::WalkParams, schema) == 304, "WalkParams layout changed: update gpu/params.go");
static_assert(offsetof(ws::WalkParams, times) == 368, "WalkParams layout changed: update gpu/params.go");
static_assert(offsetof(ws::WalkParams, exp_sums) == 448, "WalkParams layout changed: update gpu/params.go");
static_assert(offsetof(ws::WalkParams, coarse) == 456, "WalkParams layout changed: update gpu/params.go");
static_assert(offsetof(ws::WalkParams, next) == 464, "WalkParams layout changed: update gpu/params.go");
static_assert(sizeof(ws::Task) == 16, "Task layout changed: update gpu/params.go");
static_assert(sizeof(ws::AliasEntry) == 16, "AliasEntry layout changed");
