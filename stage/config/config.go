package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/engines"
	"github.com/walkstage/walkstage/internal/redact"
	"github.com/walkstage/walkstage/sink"
)

// EnvPrefix is prepended to every variable name below.
const EnvPrefix = "WALKSTAGE_"

// Config is the stage's whole configuration, read from WALKSTAGE_* variables
// by Load. The names are a public interface (the Helm chart and every
// deployment set them): add variables freely, never rename one. Each field's
// comment is the variable's documentation; docs and the chart quote it.
type Config struct {
	// ---- Kafka ----

	// WALKSTAGE_BROKERS: comma-separated bootstrap brokers, host:port. Required.
	Brokers []string `env:"BROKERS" envSeparator:","`
	// WALKSTAGE_INPUT_TOPIC: topic of seed-batch requests (key = batch id).
	InputTopic string `env:"INPUT_TOPIC" envDefault:"walkstage-requests"`
	// WALKSTAGE_OUTPUT_TOPIC: topic the completion events go to (key = batch id).
	OutputTopic string `env:"OUTPUT_TOPIC" envDefault:"walkstage-completions"`
	// WALKSTAGE_DLQ_TOPIC: dead-letter topic; rejected requests are copied
	// there unchanged with a walkstage-error header.
	DLQTopic string `env:"DLQ_TOPIC" envDefault:"walkstage-dlq"`
	// WALKSTAGE_GROUP: consumer group id; replicas with the same group share
	// the input topic's partitions.
	Group string `env:"GROUP" envDefault:"walkstage"`
	// WALKSTAGE_CLIENT_ID: Kafka client id (shows in broker logs and quotas).
	ClientID string `env:"CLIENT_ID" envDefault:"walkstage"`
	// WALKSTAGE_SESSION_TIMEOUT: consumer group session timeout; a replica
	// silent for this long loses its partitions.
	SessionTimeout time.Duration `env:"SESSION_TIMEOUT" envDefault:"30s"`
	// WALKSTAGE_REBALANCE_TIMEOUT: how long the group waits for members to
	// rejoin during a rebalance.
	RebalanceTimeout time.Duration `env:"REBALANCE_TIMEOUT" envDefault:"30s"`

	// WALKSTAGE_TLS: connect to the brokers with TLS (implied by any TLS_* file).
	TLS bool `env:"TLS" envDefault:"false"`
	// WALKSTAGE_TLS_CA_FILE: PEM bundle of CAs that sign the brokers'
	// certificates (default: the system pool).
	TLSCAFile string `env:"TLS_CA_FILE"`
	// WALKSTAGE_TLS_CERT_FILE: PEM client certificate for mutual TLS (needs TLS_KEY_FILE).
	TLSCertFile string `env:"TLS_CERT_FILE"`
	// WALKSTAGE_TLS_KEY_FILE: PEM private key of TLS_CERT_FILE.
	TLSKeyFile string `env:"TLS_KEY_FILE"`
	// WALKSTAGE_TLS_SERVER_NAME: name to verify in the brokers' certificates
	// (default: the host of each broker address).
	TLSServerName string `env:"TLS_SERVER_NAME"`
	// WALKSTAGE_TLS_INSECURE_SKIP_VERIFY: accept any broker certificate. For
	// tests only: it makes TLS useless against an active attacker.
	TLSInsecureSkipVerify bool `env:"TLS_INSECURE_SKIP_VERIFY" envDefault:"false"`

	// WALKSTAGE_SASL_MECHANISM: none, plain, scram-sha-256 or scram-sha-512.
	SASLMechanism string `env:"SASL_MECHANISM" envDefault:"none"`
	// WALKSTAGE_SASL_USERNAME: SASL user (required with a mechanism).
	SASLUsername string `env:"SASL_USERNAME"`
	// WALKSTAGE_SASL_PASSWORD: SASL password (required with a mechanism).
	// Mount it from a Secret; it is never logged.
	SASLPassword string `env:"SASL_PASSWORD"`

	// ---- Graph and output ----

	// WALKSTAGE_GRAPH: the graph to walk, in walkstage's binary format: a
	// local path, or an object URL (s3://, gs://, azblob://, file://) that is
	// downloaded to a temporary file first. Required.
	Graph string `env:"GRAPH"`
	// WALKSTAGE_GRAPH_DOWNLOAD_DIR: where a graph given by URL is downloaded
	// (default: the system temporary directory). Needs room for the graph.
	GraphDownloadDir string `env:"GRAPH_DOWNLOAD_DIR"`
	// WALKSTAGE_GRAPH_POLL_INTERVAL: when GRAPH names a catalog pointer (an
	// object URL ending in /CURRENT, written by walkstage graph publish),
	// how often the stage reads it and swaps to a new version without a
	// restart. 0: read it once at start-up only.
	GraphPollInterval time.Duration `env:"GRAPH_POLL_INTERVAL" envDefault:"30s"`
	// WALKSTAGE_GRAPH_SWAP: how a new version replaces the old one: overlap
	// (build the new engine while the old one serves, then swap between
	// micro-batches; needs memory for both), drain (stop launching, finish
	// in-flight batches, release the old engine, build the new one, resume)
	// or auto (drain for the GPU engine, overlap for the CPU engine).
	GraphSwap string `env:"GRAPH_SWAP" envDefault:"auto"`
	// WALKSTAGE_GRAPH_VERSION_WAIT: how long a request pinned to a
	// graph_version that is not loaded waits for it (a newer version being
	// published) before it is rejected with graph_version_unavailable.
	GraphVersionWait time.Duration `env:"GRAPH_VERSION_WAIT" envDefault:"60s"`
	// WALKSTAGE_EDGE_TOPIC: topic of edge updates for a live graph (JSON or
	// binary records, docs/reference/messages.md): every replica reads every
	// partition and applies the inserts and deletes over the loaded graph,
	// without a rebuild; deepwalk and ppr walks (uniform and alias samplers),
	// node2vec walks (its rejection sampler) and metapath walks (its auto
	// sampler; on the gpu engine up to 16 labels) walk them, other
	// requests the loaded graph alone. Bad records go to the
	// dead-letter topic. Empty: off. Needs the in-memory cpu engine, the
	// gpu engine with the whole graph on each device (not the out-of-core
	// engine, nor a GPU placement plan, stream or partition: a graph larger
	// than a device or GPU_MEMORY_LIMIT, GPU_STREAM on, GPU_PARTITION on) or
	// the hybrid engine (its cpu engine walks what its gpu engine cannot),
	// a graph with integer ids and no graph following (GRAPH_POLL_INTERVAL
	// 0 or a graph file): the stage refuses to start otherwise.
	EdgeTopic string `env:"EDGE_TOPIC"`
	// WALKSTAGE_EDGE_PUBLISH_INTERVAL: how often the edge updates applied
	// are published to the walks (a new snapshot) while updates arrive:
	// an update is walkable within about this long of its arrival.
	EdgePublishInterval time.Duration `env:"EDGE_PUBLISH_INTERVAL" envDefault:"100ms"`
	// WALKSTAGE_EDGE_OFFSETS_WAIT: how long a request with edge_offsets
	// (read-your-writes) waits for the live graph to hold them before it is
	// rejected with edge_offsets_unavailable.
	EdgeOffsetsWait time.Duration `env:"EDGE_OFFSETS_WAIT" envDefault:"30s"`
	// WALKSTAGE_EDGE_SNAPSHOT_HOLD: how long requests whose walks cost the
	// engine a copy of each new snapshot (temporal walks on the GPU
	// engine, which gathers the snapshot's time-ordered edge lists on the
	// host: about a second for a delta over a million vertices of a
	// 128-million-edge graph) keep walking the snapshot the engine holds
	// while newer ones are published. Each still walks one consistent
	// snapshot and reports its watermark (edge_offsets); a request whose
	// edge_offsets or seeds that snapshot lacks takes the newest. Other
	// requests always walk the newest. 0: every request the newest.
	EdgeSnapshotHold time.Duration `env:"EDGE_SNAPSHOT_HOLD" envDefault:"2s"`
	// WALKSTAGE_EDGE_COMPACT_RATIO: the live graph is compacted in the
	// background into a new base (the delta merged, deleted edges dropped)
	// when its delta (appended edges plus tombstones) reaches this share of
	// the base's edges and EDGE_COMPACT_MIN; walks go on meanwhile and move
	// to the new base at the swap. Walks from vertices with a delta are
	// several times slower than on a compacted graph, so keep it small;
	// each compaction costs a pass over the whole graph and, until the
	// swap, memory for a second copy of it and its engine tables. 0: never.
	EdgeCompactRatio float64 `env:"EDGE_COMPACT_RATIO" envDefault:"0.05"`
	// WALKSTAGE_EDGE_COMPACT_MIN: the smallest delta (appended edges plus
	// tombstones) compacted, so a small graph is not compacted at every
	// publication.
	EdgeCompactMin int64 `env:"EDGE_COMPACT_MIN" envDefault:"100000"`
	// WALKSTAGE_EDGE_APPLY_SHARE: the least share of the cores the live
	// graph's applier (and a background compaction) keeps beside a walk
	// backlog (walk requests running or waiting for the engine that hold
	// half the cores or more: walks hold a core a walk, up to CPU_WORKERS
	// or every core for the CPU engine, up to every core for the GPU
	// engine, whose output the sink encodes on every core): then it takes
	// the cores the walks leave free and at least this share; with fewer
	// walks (a few probes) or none it takes every core. The
	// default, 0.1, gives the walks the cores and catches a backlog up
	// more slowly meanwhile (one goroutine stays the applier's); 1 gives
	// ingest every core always (a backlog then slows the walks beside it
	// most).
	EdgeApplyShare float64 `env:"EDGE_APPLY_SHARE" envDefault:"0.1"`
	// WALKSTAGE_EDGE_CATALOG: a graph catalog (a bucket URL whose path is
	// the prefix, as walkstage graph publish --to takes) the live graph's
	// compactions are published to, each with its watermark (edge_topic,
	// edge_offsets in the pointer). At start, when its CURRENT records a
	// watermark of EDGE_TOPIC, the stage loads that version in place of
	// GRAPH and reads the edge topic from those offsets: a restart replays
	// only the records after the last compaction. Empty: compactions are
	// not published, and a restart replays the topic from its start (or
	// from the watermark of the version a GRAPH pointer names).
	EdgeCatalog string `env:"EDGE_CATALOG"`
	// WALKSTAGE_EDGE_WINDOW: keep only a recent window of the live graph's
	// edges, e.g. 48h: an edge is evicted once the edge topic's event time
	// (the largest edge time seen, in Unix ms, base graph included; not the
	// wall clock) is this far past it, in segments of an eighth of the
	// window, so an edge lives between the window and 9/8 of it. Needs
	// EDGE_TOPIC and a graph with edge times (every insert then carries a
	// time). Empty: off, nothing is evicted.
	EdgeWindow time.Duration `env:"EDGE_WINDOW"`
	// WALKSTAGE_OUTPUT_URL: gocloud.dev bucket URL the Parquet walks go to,
	// e.g. s3://bucket?region=eu-west-1, gs://bucket, file:///data/walks. Required.
	// An S3-compatible store adds endpoint=http://host:port&use_path_style=true.
	// The S3 client's settings are parameters of the URL, so that every
	// command reaching the store (walk, load --plain-upload, output) uses
	// the same client: unsigned_payload (default true: bodies are not
	// hashed with SHA-256 for the signature, which cost the stage 15% of
	// its CPU and the store about a core at 1.8 GB/s; false signs them),
	// request_checksum_calculation (default for an endpoint: when_supported
	// over plain HTTP with unsigned bodies, so each body carries a CRC32C or
	// CRC32 header the store checks, keeping integrity end to end;
	// when_required otherwise, as over HTTPS, where the SDK would send
	// aws-chunked trailers that S3-compatible stores commonly refuse and TLS
	// guards the bytes), expect_continue (default false: uploads do not wait
	// a round trip for "100 Continue"). The client keeps 256 idle connections
	// to the store (docs/reference/deploy.md, "Connections and payload
	// signing").
	OutputURL string `env:"OUTPUT_URL"`
	// WALKSTAGE_OUTPUT_PREFIX: key prefix inside the bucket; batch B's
	// objects are under
	// <prefix>/kind=<kind>/graph=<graph>/algorithm=<algorithm>/batch=<B>/
	// (part-NNNNN-<attempt>.parquet and the _SUCCESS manifest; docs/reference/messages.md,
	// "Output layout").
	OutputPrefix string `env:"OUTPUT_PREFIX" envDefault:"walks"`

	// WALKSTAGE_OUTPUT_COMPRESSION: Parquet page codec: zstd, snappy or none.
	OutputCompression string `env:"OUTPUT_COMPRESSION" envDefault:"zstd"`
	// WALKSTAGE_OUTPUT_WALK_ENCODING: Parquet encoding of the walk values:
	// delta_binary_packed (every reader), or byte_stream_split (6% smaller
	// under zstd, but DuckDB cannot read it: it reads BYTE_STREAM_SPLIT only
	// for FLOAT and DOUBLE; Arrow, pyarrow, polars and hyparquet can).
	OutputWalkEncoding string `env:"OUTPUT_WALK_ENCODING" envDefault:"delta_binary_packed"`
	// WALKSTAGE_OUTPUT_FILE_BYTES: a batch's Parquet part is rolled after the
	// row group that brings it to this size (a batch of several parts ends
	// with four smaller ones that share the last part's row groups).
	OutputFileBytes int64 `env:"OUTPUT_FILE_BYTES" envDefault:"268435456"`
	// WALKSTAGE_OUTPUT_ROW_GROUP_WALKS: walks per Parquet row group (0: the
	// sink's default, at most 65,536 walks and 4 Mi vertices).
	OutputRowGroupWalks int `env:"OUTPUT_ROW_GROUP_WALKS" envDefault:"0"`
	// WALKSTAGE_OUTPUT_MEMORY_BYTES: memory one batch's writer may hold
	// (walks waiting for their row group, encoding, upload). With
	// MAX_IN_FLIGHT batches the sink holds at most their product.
	OutputMemoryBytes int64 `env:"OUTPUT_MEMORY_BYTES" envDefault:"134217728"`
	// WALKSTAGE_STORE_TIMEOUT: deadline of each small object-store call
	// (manifest, listing, delete, probe); a store that does not answer is an
	// error retried with back-off, not a stall. Part uploads fail instead
	// when the store accepts none of their bytes for a minute.
	StoreTimeout time.Duration `env:"STORE_TIMEOUT" envDefault:"10s"`
	// WALKSTAGE_OUTPUT_SWEEP_AGE: at start-up, abort S3 multipart uploads
	// under the prefix started longer ago than this, and remove temporary
	// files as old, left by killed replicas (0 disables). It must exceed the
	// longest part upload, as every replica sweeps the shared prefix.
	OutputSweepAge time.Duration `env:"OUTPUT_SWEEP_AGE" envDefault:"1h"`
	// WALKSTAGE_TABLE_CATALOG: also append every committed batch to an
	// Apache Iceberg table of its output kind (walks, visits, samples), so
	// that readers of the tables see only committed batches, each once:
	// file:///warehouse is a file-based catalog on this host's disk (one
	// replica, the demo and tests), an http(s) URL an Iceberg REST catalog.
	// The parts stay where the output prefix puts them; the tables name
	// them. Empty: no tables.
	TableCatalog string `env:"TABLE_CATALOG"`
	// WALKSTAGE_TABLE_NAMESPACE: the catalog namespace holding the tables.
	TableNamespace string `env:"TABLE_NAMESPACE" envDefault:"walkstage"`
	// WALKSTAGE_TABLE_COMMIT_MAX_FILES: the most data files one table
	// commit adds; batches committed while a commit is in flight join the
	// next one up to this.
	TableCommitMaxFiles int `env:"TABLE_COMMIT_MAX_FILES" envDefault:"1000"`
	// WALKSTAGE_TABLE_COMMIT_INTERVAL: the least time between two commits
	// of a table (0: as soon as the previous one ends), unless 2 x
	// MAX_IN_FLIGHT batches wait for one. Fewer, larger commits cost less
	// (a commit's cost grows with the snapshots the table holds); each
	// batch's event waits for its commit, up to this long. Batches waiting
	// for a commit (at most 4 x MAX_IN_FLIGHT) are outside the in-flight
	// window: their objects are durable, and they hold no walks.
	TableCommitInterval time.Duration `env:"TABLE_COMMIT_INTERVAL" envDefault:"50ms"`

	// ---- Engine ----

	// WALKSTAGE_ENGINE: auto (GPU when built with CUDA and a device is
	// present, else CPU), cpu, gpu (fail at start-up without a GPU) or
	// hybrid (the CPU and the GPU engine walk every batch together, its
	// walks split by their measured rates; needs a GPU as gpu does; the
	// walks are the same: docs/design/hybrid.md).
	Engine string `env:"ENGINE" envDefault:"auto"`
	// WALKSTAGE_CPU_WORKERS: walking goroutines of the CPU engine (0: one per core).
	CPUWorkers int `env:"CPU_WORKERS" envDefault:"0"`
	// WALKSTAGE_CPU_FUSED_TABLE_BYTES: most memory the CPU engine's fused
	// table (32 bytes per edge) may take; when it fits it replaces the
	// packed alias table (12 bytes per edge) and weighted DeepWalk and PPR
	// run about 20% faster. -1: a quarter of the memory the process may use
	// (physical or cgroup limit); 0: off (the packed table only).
	CPUFusedTableBytes int64 `env:"CPU_FUSED_TABLE_BYTES" envDefault:"-1"`
	// WALKSTAGE_CPU_LABEL_TABLES: when the CPU engine builds MetaPath's
	// label tables: lazy (on the first MetaPath batch, which waits about
	// 1.5 s per 30 M edges) or eager (at start-up, before /readyz).
	CPULabelTables string `env:"CPU_LABEL_TABLES" envDefault:"lazy"`
	// WALKSTAGE_HOST_MEMORY_LIMIT: the host memory budget in bytes. A
	// graph whose CPU engine (graph and tables) needs more is walked out
	// of core from its file, in partitions read with large direct reads
	// (docs/design/out-of-core.md); the walks are the same. 0: the
	// cgroup's limit (v2 memory.max, else v1 memory.limit_in_bytes), else
	// MemAvailable; -1: always in memory.
	HostMemoryLimit int64 `env:"HOST_MEMORY_LIMIT" envDefault:"0"`
	// WALKSTAGE_GPU_MEMORY_LIMIT: most device memory the GPU engine uses
	// for the graph, its tables and the batch slots, in bytes (0: what the
	// device has free). A graph that does not fit is walked under a
	// placement plan: the edges of the highest-degree vertices on the
	// device, the rest in pinned host memory read in place over PCIe
	// (docs/design/placement.md); the walks are the same either way.
	GPUMemoryLimit int64 `env:"GPU_MEMORY_LIMIT" envDefault:"0"`
	// WALKSTAGE_GPU_LEND_CHUNKS: with one GPU, the writers read the walks
	// in the engine's pinned batch buffers and give each chunk back once
	// encoded, instead of the engine copying every batch out of them. A
	// buffer is walked again only once all its chunks are back, which in the
	// stage (a buffer's walks spread over many batches' writers) costs more
	// than the copy saves (docs/benchmarks/stage.md, "Lending in the
	// stage"). So off; `walkstage walk` lends (one job, a buffer's walks in
	// a row).
	GPULendChunks bool `env:"GPU_LEND_CHUNKS" envDefault:"false"`
	// WALKSTAGE_GPU_BATCH_SLOTS: batches each GPU engine has in flight,
	// each with its own stream and 128 MiB pinned host buffer (0: the
	// engine's default, 2; at most 8).
	GPUBatchSlots int `env:"GPU_BATCH_SLOTS" envDefault:"0"`
	// WALKSTAGE_GPUS: the GPUs the engine uses: all, or a comma-separated
	// list of device ordinals. With several, each holds the whole graph and
	// every batch's walks are split between them (the walks are those of
	// one GPU). An ordinal may repeat: two engines on one device (tests).
	GPUs string `env:"GPUS" envDefault:"all"`
	// WALKSTAGE_GPU_PARTITION: with several GPUs, whether the graph is
	// partitioned over their memory instead of copied to each (one copy
	// of the edge arrays and tables cut into vertex ranges, one per GPU,
	// that every GPU reads in place over NVLink; docs/design/placement.md): auto
	// (when the graph does not fit the smallest GPU), on, or off (each GPU
	// holds it whole, or walks it under a placement plan in host memory).
	GPUPartition string `env:"GPU_PARTITION" envDefault:"auto"`
	// WALKSTAGE_GPU_STREAM: whether a GPU engine whose graph does not fit
	// the device (or WALKSTAGE_GPU_MEMORY_LIMIT) streams it to the walkers
	// in partitions (docs/design/out-of-core.md): auto (when it does not
	// fit: a stream plan and a placement plan, each with half of the
	// device's share for the graph, and each batch walked under the one
	// the cost model says is faster; the placement plan walks what
	// streaming refuses), on (streaming alone), or off (the placement plan
	// alone reads the host's share in place). Streaming walks DeepWalk and
	// PPR on the uniform and alias samplers, Node2Vec on its rejection
	// sampler and MetaPath on its auto sampler (up to 16 labels) and
	// refuses the other algorithms under on; auto holds the graph's edges
	// in both layouts (device and pinned host memory), so off is the
	// default.
	GPUStream string `env:"GPU_STREAM" envDefault:"off"`

	// ---- Request limits (violations are rejected, see docs/reference/messages.md) ----

	// WALKSTAGE_MAX_MESSAGE_BYTES: largest request message accepted.
	MaxMessageBytes int `env:"MAX_MESSAGE_BYTES" envDefault:"4194304"`
	// WALKSTAGE_MAX_SEEDS: most seed vertices in one request (list or range).
	MaxSeeds int `env:"MAX_SEEDS" envDefault:"100000"`
	// WALKSTAGE_MAX_WALK_LENGTH: largest walk length (steps) a request may ask for.
	MaxWalkLength int `env:"MAX_WALK_LENGTH" envDefault:"1000"`
	// WALKSTAGE_MAX_WALKS_PER_SEED: largest walks_per_seed a request may ask for.
	MaxWalksPerSeed int `env:"MAX_WALKS_PER_SEED" envDefault:"100"`
	// WALKSTAGE_MAX_WALKS_PER_BATCH: most walks (seeds x walks_per_seed) in
	// one request; bounds one batch's output size.
	MaxWalksPerBatch int `env:"MAX_WALKS_PER_BATCH" envDefault:"10000000"`
	// WALKSTAGE_MAX_TOP_K: largest top_k an output "visits" request may ask for.
	MaxTopK int `env:"MAX_TOP_K" envDefault:"1000"`
	// WALKSTAGE_MAX_STEPS_PER_QUERY: largest steps_per_query an output
	// "visits" request may ask for.
	MaxStepsPerQuery int `env:"MAX_STEPS_PER_QUERY" envDefault:"10000000"`
	// WALKSTAGE_MAX_STEPS_PER_BATCH: most steps (queries x steps_per_query)
	// an output "visits" request may ask for; bounds one batch's engine time.
	MaxStepsPerBatch int64 `env:"MAX_STEPS_PER_BATCH" envDefault:"2000000000"`
	// WALKSTAGE_MAX_REQUEST_COST: most estimated engine cost of one walk or
	// visits request, in O(1) steps (a uniform or alias step counts 1):
	// walks x length (visits: their steps) x the cost of a step, which for
	// Node2Vec's rejection sampler grows with max(1/p, 1, 1/q) /
	// min(1/p, 1, 1/q), up to 64 attempts and an exact scan of the
	// adjacency, and for the reservoir samplers with the degrees walks meet
	// (docs/reference/deploy.md, admission control). Above it a request is rejected
	// (over_budget). The default admits every request of O(1) steps that
	// the walk limits admit (10^7 walks of 1,000 steps).
	MaxRequestCost int64 `env:"MAX_REQUEST_COST" envDefault:"10000000000"`
	// WALKSTAGE_MAX_FANOUT: largest fan-out (neighbor) or layer size (layer)
	// a sampling request may ask for.
	MaxFanout int `env:"MAX_FANOUT" envDefault:"1000"`
	// WALKSTAGE_MAX_SAMPLE_VERTICES: largest max_vertices of a forest_fire or
	// snowball request, and its value when the request gives none.
	MaxSampleVertices int `env:"MAX_SAMPLE_VERTICES" envDefault:"10000"`
	// WALKSTAGE_MAX_SAMPLED_EDGES: most edges one sampling request may
	// sample (instances x the most edges one instance can); bounds one
	// batch's memory (about 24 bytes an edge).
	MaxSampledEdges int64 `env:"MAX_SAMPLED_EDGES" envDefault:"100000000"`
	// WALKSTAGE_UNKNOWN_VERTICES: what a seed id missing from the graph does:
	// reject (the whole request) or skip (walk the others, count the skipped
	// ones in the completion event).
	UnknownVertices string `env:"UNKNOWN_VERTICES" envDefault:"reject"`

	// ---- Micro-batching and backpressure ----

	// WALKSTAGE_MICROBATCH_MAX_WAIT: how long the engine waits for more
	// requests to share one launch once it holds one. Adds at most this much
	// latency; 0 launches whatever is queued at once.
	MicroBatchMaxWait time.Duration `env:"MICROBATCH_MAX_WAIT" envDefault:"5ms"`
	// WALKSTAGE_MICROBATCH_MAX_WALKS: walks per launch beyond which no more
	// requests join it (a single larger request runs alone).
	MicroBatchMaxWalks int `env:"MICROBATCH_MAX_WALKS" envDefault:"1048576"`
	// WALKSTAGE_MICROBATCH_MAX_REQUESTS: most requests sharing one launch
	// (capped at MAX_IN_FLIGHT). A quarter of MAX_IN_FLIGHT lets the next
	// launches walk while earlier ones are written; a launch as large as the
	// in-flight limit makes the engine wait for all of its writers before
	// the next (docs/benchmarks/stage.md).
	MicroBatchMaxRequests int `env:"MICROBATCH_MAX_REQUESTS" envDefault:"16"`
	// WALKSTAGE_MICROBATCH_MAX_COST: most estimated engine cost (as
	// MAX_REQUEST_COST) of one launch. No request joins a launch beyond it;
	// a request above it walks alone, in slices of at most this cost, and
	// the micro-batches queued behind it walk between its slices, so small
	// requests wait for one slice, not for the whole request. 0 picks it
	// from the engine: 2,500,000 per core for the CPU engine (about a
	// quarter of a second), 2,000,000,000 for the GPU engine.
	MicroBatchMaxCost int64 `env:"MICROBATCH_MAX_COST" envDefault:"0"`
	// WALKSTAGE_QUEUE_DEPTH: validated requests waiting for the engine; when
	// full the consumer stops fetching (backpressure to Kafka).
	QueueDepth int `env:"QUEUE_DEPTH" envDefault:"64"`
	// WALKSTAGE_MAX_IN_FLIGHT: batches walked but not yet committed (being
	// written, manifest, event); when full the engine waits for the sink.
	MaxInFlight int `env:"MAX_IN_FLIGHT" envDefault:"64"`
	// WALKSTAGE_CHUNK_BUFFER: completed-walk chunks buffered per batch
	// between the engine and its writer. Memory in flight is about
	// CHUNK_BUFFER x 1024 walks x (length+1) x 4 bytes per batch.
	ChunkBuffer int `env:"CHUNK_BUFFER" envDefault:"4"`
	// WALKSTAGE_ENCODE_THREADS: row groups encoded at once over all the
	// batches in flight; 0 means the cores (GOMAXPROCS) less an eighth,
	// at least one, which leaves room for the goroutines that read Kafka
	// and start the next launch.
	EncodeThreads int `env:"ENCODE_THREADS" envDefault:"0"`
	// WALKSTAGE_RETRY_BACKOFF_MIN: first wait before retrying work that failed
	// on a dependency (broker, object store, engine); it doubles up to
	// RETRY_BACKOFF_MAX, with jitter. Such work is retried until it
	// succeeds, never dead-lettered: an outage is not the request's fault.
	RetryBackoffMin time.Duration `env:"RETRY_BACKOFF_MIN" envDefault:"200ms"`
	// WALKSTAGE_RETRY_BACKOFF_MAX: longest wait between such retries.
	RetryBackoffMax time.Duration `env:"RETRY_BACKOFF_MAX" envDefault:"30s"`
	// WALKSTAGE_PROBE_INTERVAL: how often the broker (topic metadata) and the
	// object store are probed; a failed probe makes /readyz 503 and pauses
	// consumption until one passes.
	ProbeInterval time.Duration `env:"PROBE_INTERVAL" envDefault:"1s"`
	// WALKSTAGE_PROBE_TIMEOUT: deadline of each probe.
	ProbeTimeout time.Duration `env:"PROBE_TIMEOUT" envDefault:"2s"`
	// WALKSTAGE_BROKER_TIMEOUT: deadline of every produce (completion event,
	// dead letter) and metadata call; a broker that does not answer is an
	// error retried with back-off, not a stall.
	BrokerTimeout time.Duration `env:"BROKER_TIMEOUT" envDefault:"10s"`

	// ---- Operations ----

	// WALKSTAGE_METRICS_ADDR: listen address of /metrics, /healthz and
	// /readyz, host:port; empty disables the HTTP server. The default is
	// loopback only: a stage run on a host should not answer the network
	// unasked. The images and the Helm chart set :9090 (every interface of
	// the container, whose network is the pod's), which the kubelet's probes
	// and Prometheus need.
	MetricsAddr string `env:"METRICS_ADDR" envDefault:"127.0.0.1:9090"`
	// WALKSTAGE_SHUTDOWN_TIMEOUT: after SIGTERM, how long in-flight batches
	// may take to finish; the rest are abandoned uncommitted (redelivered to
	// another replica). Keep it below the pod's terminationGracePeriodSeconds.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"30s"`
	// WALKSTAGE_LOG_LEVEL: debug, info, warn or error.
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`
	// WALKSTAGE_LOG_FORMAT: json (one object per line) or text.
	LogFormat string `env:"LOG_FORMAT" envDefault:"json"`
}

// Load reads the configuration from environ (os.Environ() form;
// nil means the process environment) and validates it. The error lists every
// bad variable, one per line, not just the first.
func Load(environ []string) (Config, error) {
	opts := env.Options{Prefix: EnvPrefix}
	if environ != nil {
		opts.Environment = make(map[string]string, len(environ))
		for _, kv := range environ {
			k, v, _ := strings.Cut(kv, "=")
			opts.Environment[k] = v
		}
	} else {
		opts.Environment = envMap()
	}
	var c Config
	var errs []error
	if err := env.ParseWithOptions(&c, opts); err != nil {
		var agg env.AggregateError
		if errors.As(err, &agg) {
			errs = append(errs, agg.Errors...)
		} else {
			errs = append(errs, err)
		}
	}
	// env applies a default to a variable set to the empty string as well;
	// for METRICS_ADDR the empty string is documented to mean "no HTTP
	// server", which is what tests and the demo ask for, so honour it.
	if v, set := opts.Environment[EnvPrefix+"METRICS_ADDR"]; set && v == "" {
		c.MetricsAddr = ""
	}
	// EDGE_WINDOW=0 would read as no window; refuse it rather than keep
	// every edge of a graph its operator meant to bound.
	if v, set := opts.Environment[EnvPrefix+"EDGE_WINDOW"]; set && v != "" && c.EdgeWindow == 0 {
		errs = append(errs, fmt.Errorf("%sEDGE_WINDOW: %q is no window: give the window to keep, e.g. 48h, or leave it empty to keep every edge", EnvPrefix, v))
	}
	errs = append(errs, c.validate()...)
	if len(errs) > 0 {
		return c, &Error{Errs: errs}
	}
	return c, nil
}

func envMap() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// Error lists every problem found in the configuration.
type Error struct{ Errs []error }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems):", len(e.Errs))
	for _, err := range e.Errs {
		b.WriteString("\n  ")
		b.WriteString(err.Error())
	}
	return redact.String(b.String()) // the problems quote URLs and brokers
}

func (e *Error) Unwrap() []error { return e.Errs }

// badFunc records one invalid variable: its name (without the prefix) and
// why.
type badFunc func(name, format string, a ...any)

// validate checks values the parser cannot: required strings, enums,
// ranges and combinations. It returns one error per problem, each naming
// its variable, so a misconfigured deployment learns everything at once.
func (c *Config) validate() []error {
	var errs []error
	bad := func(name, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s%s: %s", EnvPrefix, name, fmt.Sprintf(format, a...)))
	}
	c.validateKafka(bad)
	c.validateGraphAndOutput(bad)
	c.validateEdges(bad)
	c.validateEngineAndLimits(bad)
	c.validateOperations(bad)
	return errs
}

// validateKafka checks the brokers, topics, group and their security.
func (c *Config) validateKafka(bad badFunc) {
	if len(c.Brokers) == 0 {
		bad("BROKERS", "required (comma-separated host:port list)")
	}
	for _, b := range c.Brokers {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(b)); err != nil {
			bad("BROKERS", "%q is not host:port", b)
		}
	}
	for _, t := range []struct{ name, v string }{{"INPUT_TOPIC", c.InputTopic}, {"OUTPUT_TOPIC", c.OutputTopic},
		{"DLQ_TOPIC", c.DLQTopic}, {"GROUP", c.Group}} {
		if strings.TrimSpace(t.v) == "" {
			bad(t.name, "must not be empty")
		}
	}
	if c.InputTopic != "" && (c.InputTopic == c.OutputTopic || c.InputTopic == c.DLQTopic) {
		bad("INPUT_TOPIC", "%q must differ from the output and dead-letter topics", c.InputTopic)
	}
	if c.SessionTimeout < time.Second {
		bad("SESSION_TIMEOUT", "%v is below 1s", c.SessionTimeout)
	}
	if c.RebalanceTimeout < time.Second {
		bad("REBALANCE_TIMEOUT", "%v is below 1s", c.RebalanceTimeout)
	}
	for _, f := range []struct{ name, path string }{{"TLS_CA_FILE", c.TLSCAFile}, {"TLS_CERT_FILE", c.TLSCertFile}, {"TLS_KEY_FILE", c.TLSKeyFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			bad(f.name, "%v", err)
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("TLS_CERT_FILE", "TLS_CERT_FILE and TLS_KEY_FILE go together")
	}
	switch strings.ToLower(c.SASLMechanism) {
	case "", "none":
	case "plain", "scram-sha-256", "scram-sha-512":
		if c.SASLUsername == "" {
			bad("SASL_USERNAME", "required with SASL mechanism %s", c.SASLMechanism)
		}
		if c.SASLPassword == "" {
			bad("SASL_PASSWORD", "required with SASL mechanism %s", c.SASLMechanism)
		}
	default:
		bad("SASL_MECHANISM", "%q is not none, plain, scram-sha-256 or scram-sha-512", c.SASLMechanism)
	}
}

// validateGraphAndOutput checks where the graph comes from and where walks go.
func (c *Config) validateGraphAndOutput(bad badFunc) {
	if c.Graph == "" {
		bad("GRAPH", "required (path or object URL of a walkstage graph file)")
	}
	c.validateGraphFollowing(bad)
	if c.OutputURL == "" {
		bad("OUTPUT_URL", "required (bucket URL such as s3://bucket?region=... or file:///dir)")
	} else if u, err := url.Parse(c.OutputURL); err != nil || u.Scheme == "" {
		bad("OUTPUT_URL", "%q is not a bucket URL (scheme://...)", c.OutputURL)
	}
	if strings.HasPrefix(c.OutputPrefix, "/") {
		bad("OUTPUT_PREFIX", "%q must not start with /", c.OutputPrefix)
	}
	if _, err := sink.ParseCompression(c.OutputCompression); err != nil {
		bad("OUTPUT_COMPRESSION", "%q is not zstd, snappy or none", c.OutputCompression)
	}
	if _, err := sink.ParseWalkEncoding(c.OutputWalkEncoding); err != nil {
		bad("OUTPUT_WALK_ENCODING", "%q is not delta_binary_packed or byte_stream_split", c.OutputWalkEncoding)
	}
	if c.OutputFileBytes < 1 {
		bad("OUTPUT_FILE_BYTES", "%d must be positive", c.OutputFileBytes)
	}
	if c.OutputRowGroupWalks < 0 {
		bad("OUTPUT_ROW_GROUP_WALKS", "%d must be 0 (default) or more", c.OutputRowGroupWalks)
	}
	if c.OutputMemoryBytes < 1<<20 {
		bad("OUTPUT_MEMORY_BYTES", "%d is below 1 MiB", c.OutputMemoryBytes)
	}
}

// Swap modes (WALKSTAGE_GRAPH_SWAP): how the stage replaces a graph
// version with a new one.
const (
	SwapAuto    = "auto"
	SwapOverlap = "overlap"
	SwapDrain   = "drain"
)

// validateGraphFollowing checks the graph-following variables.
func (c *Config) validateGraphFollowing(bad badFunc) {
	switch c.GraphSwap {
	case SwapAuto, SwapOverlap, SwapDrain:
	default:
		bad("GRAPH_SWAP", "%q is not auto, overlap or drain", c.GraphSwap)
		return
	}
	if c.GraphPollInterval < 0 || c.GraphPollInterval > 0 && c.GraphPollInterval < 100*time.Millisecond {
		bad("GRAPH_POLL_INTERVAL", "%v: use 0 (off) or at least 100ms", c.GraphPollInterval)
		return
	}
	if c.GraphVersionWait < 0 {
		bad("GRAPH_VERSION_WAIT", "%v is negative", c.GraphVersionWait)
	}
}

// validateEdges checks the live graph's variables, and refuses the
// combinations it cannot serve yet rather than half-serving them.
func (c *Config) validateEdges(bad badFunc) {
	if c.EdgePublishInterval < time.Millisecond {
		bad("EDGE_PUBLISH_INTERVAL", "%v: use at least 1ms", c.EdgePublishInterval)
	}
	if c.EdgeSnapshotHold < 0 {
		bad("EDGE_SNAPSHOT_HOLD", "%v is negative (0: every request walks the newest snapshot)", c.EdgeSnapshotHold)
	}
	if c.EdgeOffsetsWait < 0 {
		bad("EDGE_OFFSETS_WAIT", "%v is negative", c.EdgeOffsetsWait)
	}
	if !(c.EdgeCompactRatio >= 0 && c.EdgeCompactRatio <= 1e6) {
		bad("EDGE_COMPACT_RATIO", "%v: use 0 (never) or a positive share of the base's edges, e.g. 0.05", c.EdgeCompactRatio)
	}
	if !(c.EdgeApplyShare > 0 && c.EdgeApplyShare <= 1) {
		bad("EDGE_APPLY_SHARE", "%v: use a share of the cores above 0 and at most 1, e.g. 0.1 (1: ingest keeps every core beside walks)", c.EdgeApplyShare)
	}
	if c.EdgeCompactMin < 1 {
		bad("EDGE_COMPACT_MIN", "%d must be at least 1", c.EdgeCompactMin)
	}
	if c.EdgeCatalog != "" {
		if u, err := url.Parse(c.EdgeCatalog); err != nil || len(u.Scheme) < 2 {
			bad("EDGE_CATALOG", "%q is not a catalog URL (s3://bucket/prefix?region=..., gs://..., file:///dir)", redact.String(c.EdgeCatalog))
		} else if c.EdgeTopic == "" {
			bad("EDGE_CATALOG", "is set, but EDGE_TOPIC is not: it holds a live graph's compactions")
		}
	}
	switch {
	case c.EdgeWindow < 0:
		bad("EDGE_WINDOW", "%v is negative: give the window to keep, e.g. 48h, or leave it empty to keep every edge", c.EdgeWindow)
	case c.EdgeWindow > 0 && c.EdgeWindow < time.Millisecond:
		bad("EDGE_WINDOW", "%v: use at least 1ms (edge times are in milliseconds)", c.EdgeWindow)
	case c.EdgeWindow > 0 && c.EdgeTopic == "":
		bad("EDGE_WINDOW", "%v is set without EDGE_TOPIC: a window evicts a live graph's edges; set EDGE_TOPIC or leave EDGE_WINDOW empty", c.EdgeWindow)
	}
	if c.EdgeTopic == "" {
		return
	}
	if c.EdgeTopic == c.InputTopic || c.EdgeTopic == c.OutputTopic || c.EdgeTopic == c.DLQTopic {
		bad("EDGE_TOPIC", "%q is also the input, output or dead-letter topic", c.EdgeTopic)
	}
	if catalog.IsPointerURL(c.Graph) && c.GraphPollInterval > 0 {
		bad("EDGE_TOPIC", "a live graph does not follow new graph versions yet: set GRAPH_POLL_INTERVAL=0 (read the pointer once) or leave EDGE_TOPIC empty")
	}
}

// validateEngineAndLimits checks the engine, the request limits and the
// micro-batching and queue sizes.
func (c *Config) validateEngineAndLimits(bad badFunc) {
	switch c.Engine {
	case "auto", "cpu", "gpu", "hybrid":
	default:
		bad("ENGINE", "%q is not auto, cpu, gpu or hybrid", c.Engine)
	}
	positive := []struct {
		name string
		v    int
	}{{"MAX_MESSAGE_BYTES", c.MaxMessageBytes}, {"MAX_SEEDS", c.MaxSeeds}, {"MAX_WALK_LENGTH", c.MaxWalkLength},
		{"MAX_WALKS_PER_SEED", c.MaxWalksPerSeed}, {"MAX_WALKS_PER_BATCH", c.MaxWalksPerBatch},
		{"MAX_TOP_K", c.MaxTopK}, {"MAX_STEPS_PER_QUERY", c.MaxStepsPerQuery},
		{"MAX_FANOUT", c.MaxFanout}, {"MAX_SAMPLE_VERTICES", c.MaxSampleVertices},
		{"MICROBATCH_MAX_WALKS", c.MicroBatchMaxWalks}, {"MICROBATCH_MAX_REQUESTS", c.MicroBatchMaxRequests},
		{"QUEUE_DEPTH", c.QueueDepth}, {"MAX_IN_FLIGHT", c.MaxInFlight}, {"CHUNK_BUFFER", c.ChunkBuffer}}
	for _, p := range positive {
		if p.v < 1 {
			bad(p.name, "%d must be at least 1", p.v)
		}
	}
	if c.EncodeThreads < 0 {
		bad("ENCODE_THREADS", "%d must be 0 (auto) or more", c.EncodeThreads)
	}
	if c.MaxStepsPerBatch < 1 {
		bad("MAX_STEPS_PER_BATCH", "%d must be at least 1", c.MaxStepsPerBatch)
	}
	if c.MaxRequestCost < 1 {
		bad("MAX_REQUEST_COST", "%d must be at least 1", c.MaxRequestCost)
	}
	if c.MicroBatchMaxCost < 0 {
		bad("MICROBATCH_MAX_COST", "%d must be 0 (from the engine) or more", c.MicroBatchMaxCost)
	}
	if c.MaxSampledEdges < 1 {
		bad("MAX_SAMPLED_EDGES", "%d must be at least 1", c.MaxSampledEdges)
	}
	if c.CPUWorkers < 0 {
		bad("CPU_WORKERS", "%d must be 0 (one per core) or more", c.CPUWorkers)
	}
	if c.CPULabelTables != "lazy" && c.CPULabelTables != "eager" {
		bad("CPU_LABEL_TABLES", "%q must be lazy or eager", c.CPULabelTables)
	}
	if _, err := engines.ParseGPUs(c.GPUs); err != nil {
		bad("GPUS", "%v", err)
	}
	if _, err := engines.ParsePartition(c.GPUPartition); err != nil {
		bad("GPU_PARTITION", "%v", err)
	}
	if _, err := engines.ParseStream(c.GPUStream); err != nil {
		bad("GPU_STREAM", "%v", err)
	}
	if c.HostMemoryLimit < -1 {
		bad("HOST_MEMORY_LIMIT", "%d must be -1 (always in memory), 0 (the cgroup's limit or MemAvailable) or a byte count", c.HostMemoryLimit)
	}
	if c.GPUMemoryLimit < 0 {
		bad("GPU_MEMORY_LIMIT", "%d must be 0 (the free device memory) or a byte count", c.GPUMemoryLimit)
	}
	if c.GPUBatchSlots < 0 || c.GPUBatchSlots > 8 {
		bad("GPU_BATCH_SLOTS", "%d must be 0 (the engine's default) to 8", c.GPUBatchSlots)
	}
	if c.CPUFusedTableBytes < -1 {
		bad("CPU_FUSED_TABLE_BYTES", "%d must be -1 (a quarter of memory), 0 (off) or a byte count", c.CPUFusedTableBytes)
	}
	if c.MaxWalkLength > 1<<16 {
		bad("MAX_WALK_LENGTH", "%d is above the engine limit 65536", c.MaxWalkLength)
	}
	switch c.UnknownVertices {
	case "reject", "skip":
	default:
		bad("UNKNOWN_VERTICES", "%q is not reject or skip", c.UnknownVertices)
	}
	if c.MicroBatchMaxWait < 0 {
		bad("MICROBATCH_MAX_WAIT", "%v is negative", c.MicroBatchMaxWait)
	}
}

// validateOperations checks the HTTP address, timeouts, retries and logging.
func (c *Config) validateOperations(bad badFunc) {
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("METRICS_ADDR", "%q is not [host]:port", c.MetricsAddr)
		}
	}
	if c.ShutdownTimeout <= 0 {
		bad("SHUTDOWN_TIMEOUT", "%v must be positive", c.ShutdownTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"RETRY_BACKOFF_MIN", c.RetryBackoffMin}, {"RETRY_BACKOFF_MAX", c.RetryBackoffMax}, {"PROBE_INTERVAL", c.ProbeInterval},
		{"PROBE_TIMEOUT", c.ProbeTimeout}, {"BROKER_TIMEOUT", c.BrokerTimeout}, {"STORE_TIMEOUT", c.StoreTimeout}} {
		if d.v <= 0 {
			bad(d.name, "%v must be positive", d.v)
		}
	}
	if c.TableCatalog != "" {
		if u, err := url.Parse(c.TableCatalog); err != nil || (u.Scheme != "file" && u.Scheme != "http" && u.Scheme != "https") {
			bad("TABLE_CATALOG", "%q is not file:///warehouse or an http(s) REST catalog URL", redact.String(c.TableCatalog))
		}
	}
	if c.TableCommitInterval < 0 {
		bad("TABLE_COMMIT_INTERVAL", "%v is negative", c.TableCommitInterval)
	}
	if c.TableCommitMaxFiles < 1 {
		bad("TABLE_COMMIT_MAX_FILES", "%d must be at least 1", c.TableCommitMaxFiles)
	}
	if c.OutputSweepAge < 0 {
		bad("OUTPUT_SWEEP_AGE", "%v is negative", c.OutputSweepAge)
	}
	if c.RetryBackoffMax < c.RetryBackoffMin {
		bad("RETRY_BACKOFF_MAX", "%v is below RETRY_BACKOFF_MIN %v", c.RetryBackoffMax, c.RetryBackoffMin)
	}
	if _, err := parseLogLevel(c.LogLevel); err != nil {
		bad("LOG_LEVEL", "%v", err)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		bad("LOG_FORMAT", "%q is not json or text", c.LogFormat)
	}
}

// parseLogLevel accepts debug, info, warn and error.
func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// Variable is one configuration variable, for `walkstage run --help` and
// `--check`.
type Variable struct {
	Name, Default, Value string
}

// Variables lists every variable with its default, in declaration order.
func Variables() []Variable {
	var vs []Variable
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		vs = append(vs, Variable{Name: EnvPrefix + name, Default: f.Tag.Get("envDefault")})
	}
	return vs
}

// Describe lists every variable with its value in c, the SASL password and
// the credentials in URLs masked.
func Describe(c Config) []Variable {
	vs := Variables()
	v := reflect.ValueOf(c)
	for i := range vs {
		f := v.Field(i)
		switch x := f.Interface().(type) {
		case []string:
			vs[i].Value = strings.Join(x, ",")
		default:
			vs[i].Value = fmt.Sprint(x)
		}
		vs[i].Value = redact.String(vs[i].Value)
		if vs[i].Name == EnvPrefix+"SASL_PASSWORD" && vs[i].Value != "" {
			vs[i].Value = "****"
		}
	}
	return vs
}

// Setting is the value a stage started in this process's environment
// would take for the variable name (WALKSTAGE_...): the environment's,
// else its documented default. Commands that talk to a running stage
// (walkstage load, output) take their defaults from it, so one
// environment configures both.
func Setting(name string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	for _, v := range Variables() {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}
