package stage

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/stage/health"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/ooc"
)

// metrics are the stage's Prometheus series (walkstage_ prefix, base units).
type metrics struct {
	batches          *prometheus.CounterVec // status
	rejections       *prometheus.CounterVec // reason
	walks, steps     prometheus.Counter
	latency          prometheus.Histogram
	phase            *prometheus.HistogramVec // queued, walking, writing
	queued, inFlight prometheus.Gauge
	edgeWaits        prometheus.Gauge // requests waiting for their edge_offsets (edges.go)
	engineRuns       prometheus.Counter
	engineSlices     prometheus.Counter
	engineSeconds    prometheus.Counter
	engineBytes      prometheus.Gauge
	hybridSteps      *prometheus.CounterVec // engine: cpu, gpu
	streamBytes      *prometheus.CounterVec // how: copied, read
	streamVisits     prometheus.Counter
	streamWalkers    prometheus.Counter
	streamBatches    *prometheus.CounterVec // mode: copied, in_place
	// The out-of-core CPU engine's reads and visits (walk/ooc).
	oocBytes, oocLoads, oocVisits, oocScans prometheus.Counter
	oocWalkers, oocSlots                    prometheus.Gauge
	graphBytes                              prometheus.Gauge
	microBatchRequests                      prometheus.Histogram
	sampleCalls                             *prometheus.CounterVec // requests: alone, merged
	sampleMerged                            prometheus.Counter
	depUp                                   *prometheus.GaugeVec   // dependency
	retries                                 *prometheus.CounterVec // dependency
}

func newMetrics(reg prometheus.Registerer, s *Stage) (*metrics, error) {
	// Batch latency spans a few milliseconds (a small refresh batch) to
	// minutes (a full re-embedding); exponential buckets cover both.
	lat := prometheus.ExponentialBuckets(0.001, 2, 20)
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "walkstage_queue_depth",
		Help: "Batches waiting in each internal queue: requests (fetched, waiting for the engine), in_flight (walked or walking, not yet acknowledged) and edge_offsets (fetched, waiting for the live graph to reach their edge_offsets)."},
		[]string{"queue"})
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_batches_total",
			Help: "Batches finished, by status (succeeded, failed, rejected)."}, []string{"status"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_rejections_total",
			Help: "Rejected requests by reason (malformed, unsupported_version, invalid_batch_id, invalid_parameters, too_large, over_budget, unknown_vertices, graph_mismatch, ...)."},
			[]string{"reason"}),
		walks: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_walks_total", Help: "Walks written by succeeded batches."}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_steps_total", Help: "Walk steps written by succeeded batches (rate() gives steps/s)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "walkstage_batch_duration_seconds",
			Help: "End-to-end latency of succeeded batches, from fetch to durable completion event.", Buckets: lat}),
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "walkstage_batch_phase_duration_seconds",
			Help:    "Latency of succeeded batches by phase: queued (fetch to engine launch), walking (the engine run), writing (run end to manifest durable).",
			Buckets: lat}, []string{"phase"}),
		queued:    depth.WithLabelValues("requests"),
		inFlight:  depth.WithLabelValues("in_flight"),
		edgeWaits: depth.WithLabelValues("edge_offsets"),
		engineRuns: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_engine_runs_total",
			Help: "Engine launches (each may walk several micro-batched requests; a request walked in slices counts once)."}),
		engineSlices: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_engine_slices_total",
			Help: "Engine runs of requests above the per-micro-batch budget (WALKSTAGE_MICROBATCH_MAX_COST), walked alone in slices with other micro-batches walking between them: one per slice (walkstage_engine_runs_total counts such a request once)."}),
		engineSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_engine_busy_seconds_total",
			Help: "Time the engine spent running; rate() is its utilisation."}),
		hybridSteps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_hybrid_steps_total",
			Help: "Walk steps the hybrid engine's CPU and GPU engines emitted (WALKSTAGE_ENGINE=hybrid; their ratio is the CPU/GPU share of the work)."}, []string{"engine"}),
		streamBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_gpu_stream_bytes_total",
			Help: "Bytes of graph partitions the GPU engine streamed under a stream plan (WALKSTAGE_GPU_STREAM): copied to the device, and read from the graph's file for them (a disk plan)."}, []string{"how"}),
		streamVisits: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_gpu_stream_visits_total",
			Help: "Kernel visits of the GPU engine's streamed partitions (one a partition copied in, or the resident ones alone): a sweep over the graph is about as many visits as it has partitions."}),
		streamWalkers: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_gpu_stream_walkers_total",
			Help: "Walkers the GPU engine's streamed partition visits moved, summed over the visits: over walkstage_gpu_stream_visits_total, the walkers a copied partition serves (C-SAW's walkers per partition)."}),
		streamBatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_gpu_stream_batches_total",
			Help: "Batches the GPU engine walked under a stream plan, by how it reached the streamed share: copied (partitions copied in), in_place (read in place, the cost model's choice for a small batch) or placement (the placement plan held beside the stream plan under WALKSTAGE_GPU_STREAM=auto, the cost model's choice for short walks and small batches)."}, []string{"mode"}),
		oocBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_host_stream_bytes_total",
			Help: "Bytes the out-of-core CPU engine read from the graph's file and its alias table file (a graph above the host memory budget)."}),
		oocLoads: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_host_stream_loads_total",
			Help: "Partitions the out-of-core CPU engine read into its pool: over the graph's partition count, sweeps over the graph."}),
		oocVisits: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_host_stream_visits_total",
			Help: "Partition visits of the out-of-core CPU engine (each walks the waiting walkers through every partition held)."}),
		oocScans: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_host_stream_node2vec_scans_total",
			Help: "Node2Vec steps the out-of-core CPU engine took by the exact scan (64 proposals rejected), reading edges from the file."}),
		oocWalkers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_host_stream_walkers",
			Help: "Walkers in flight at most in the out-of-core CPU engine's last run (its division of the budget)."}),
		oocSlots: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_host_stream_slots",
			Help: "Partitions the out-of-core CPU engine's pool held at once in its last run (its division of the budget)."}),
		engineBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_engine_memory_bytes",
			Help: "Working memory the engine reported for its last run (GPU: device bytes for pools and results)."}),
		graphBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkstage_graph_memory_bytes",
			Help: "Size of the loaded graph's arrays."}),
		microBatchRequests: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "walkstage_microbatch_requests",
			Help: "Requests sharing one engine launch.", Buckets: prometheus.ExponentialBuckets(1, 2, 8)}),
		sampleCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_sample_calls_total",
			Help: "Sampler calls of graph sampling requests (output samples), by requests: alone (one request's wave) or merged (several small requests of a micro-batch with the same parameters sampled in one call)."},
			[]string{"requests"}),
		sampleMerged: prometheus.NewCounter(prometheus.CounterOpts{Name: "walkstage_sample_merged_requests_total",
			Help: "Sampling requests sampled in a merged call (walkstage_sample_calls_total{requests=\"merged\"}) with others."}),
		depUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "walkstage_dependency_up",
			Help: "1 while the dependency (broker, object_store, engine) answers, 0 while the stage retries it (not ready, consumption paused)."},
			[]string{"dependency"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "walkstage_dependency_failures_total",
			Help: "Failed calls and probes by dependency (broker, object_store, engine); each is retried with back-off."},
			[]string{"dependency"}),
	}
	cs := []prometheus.Collector{m.batches, m.rejections, m.walks, m.steps, m.latency, m.phase, depth, m.engineRuns, m.engineSlices, m.engineSeconds, m.hybridSteps,
		m.streamBytes, m.streamVisits, m.streamWalkers, m.streamBatches, m.oocBytes, m.oocLoads, m.oocVisits, m.oocScans, m.oocWalkers, m.oocSlots, m.engineBytes, m.graphBytes, m.microBatchRequests, m.sampleCalls, m.sampleMerged, m.depUp, m.retries,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkstage_consumer_lag",
			Help: "Messages between the consumer's position and the end of its partitions, as last reported by the reader."},
			func() float64 {
				if s.o.Lag == nil {
					return 0
				}
				return float64(s.o.Lag())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkstage_source_unassigned_partitions",
			Help: "Partitions of the input topic that no member of the consumer group reads, as of the consumer's last check (the stage is not ready while there are any)."},
			func() float64 {
				if s.o.UnassignedPartitions == nil {
					return 0
				}
				return float64(s.o.UnassignedPartitions())
			}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "walkstage_source_log_resets_total",
			Help: "Input partitions found with their log replaced (a broker back without its data, the topic created again, a committed offset past the log end); each is read again from its new start."},
			func() float64 {
				if s.o.LogResets == nil {
					return 0
				}
				return float64(s.o.LogResets())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkstage_gpu_device_edge_share",
			Help: "Share of the graph's edges the GPU engine holds in device memory: 1 when the whole graph is there, less under a placement plan (the rest is read from pinned host memory over PCIe), 0 for the CPU engine."},
			func() float64 { return s.placementFigure(func(p *gpu.Placement) float64 { return p.DeviceShare() }, 1) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkstage_gpu_placement_host_bytes",
			Help: "Pinned host memory holding the graph's edges under the GPU engine's placement plan (0 without one)."},
			func() float64 {
				return s.placementFigure(func(p *gpu.Placement) float64 { return float64(p.Bytes(true)) }, 0)
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkstage_ready", Help: "1 when /readyz answers 200."},
			func() float64 {
				if s.ready() == nil {
					return 1
				}
				return 0
			}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("stage metrics: %w", err)
		}
	}
	// Status series exist from the start, so rate() works before the first rejection.
	for _, st := range []string{"succeeded", "failed", "rejected"} {
		m.batches.WithLabelValues(st)
	}
	for _, p := range []string{"queued", "walking", "writing"} {
		m.phase.WithLabelValues(p)
	}
	for _, d := range []string{health.Broker, health.Store, health.Engine} {
		m.depUp.WithLabelValues(d).Set(1)
		m.retries.WithLabelValues(d)
	}
	return m, nil
}

// placementFigure reads f of the serving GPU engine's placement plan:
// whole when the GPU engine holds the whole graph, 0 for the CPU engine.
func (s *Stage) placementFigure(f func(*gpu.Placement) float64, whole float64) float64 {
	pe, ok := s.graphs.serving().e.(gpu.Placer)
	if !ok {
		return 0
	}
	if p := pe.Placement(); p != nil {
		return f(p)
	}
	return whole
}

// ready is nil when the stage should receive traffic: the graph is loaded
// (a Stage exists only then), the consumer has joined its group and its
// group reads every partition of the input topic, every dependency answers,
// and it is not shutting down.
func (s *Stage) ready() error {
	if s.draining.Load() {
		return fmt.Errorf("shutting down")
	}
	if err := s.health.Err(); err != nil {
		return err
	}
	if !s.o.Joined() {
		return fmt.Errorf("consumer has not joined group yet")
	}
	if s.o.Consuming != nil {
		if err := s.o.Consuming(); err != nil {
			return fmt.Errorf("not consuming: %w", err)
		}
	}
	return nil
}

// Handler serves /metrics, /healthz (the process is alive and its engine
// usable: a sticky GPU error fails it, so the orchestrator restarts the
// container and with it the device context) and /readyz.
func (s *Stage) Handler() http.Handler {
	return health.Handler(s.o.Registry, s.ready, func() error {
		if s.health.EngineBroken() {
			return s.health.Err()
		}
		return nil
	})
}

// streamer is a GPU engine that may stream its graph in partitions
// (gpu.Engine with the cuda tag); StreamStats is its last run's.
type streamer interface{ StreamStats() gpu.StreamStats }

// outOfCore is the out-of-core CPU engine (walk/ooc) as the metrics see it.
type outOfCore interface{ OutOfCoreStats() ooc.Stats }

// countStreamed adds what e's last run streamed to the stream metrics (the
// GPU engine's stream plans, the out-of-core CPU engine's reads). It runs
// inside the run's turn, before another run can replace the figures.
func (s *Stage) countStreamed(e walk.Engine) {
	if o, ok := e.(outOfCore); ok {
		r := o.OutOfCoreStats()
		s.m.oocBytes.Add(float64(r.BytesRead))
		s.m.oocLoads.Add(float64(r.Loads))
		s.m.oocVisits.Add(float64(r.Visits))
		s.m.oocScans.Add(float64(r.Scans))
		s.m.oocWalkers.Set(float64(r.Walkers))
		s.m.oocSlots.Set(float64(r.Slots))
	}
	st, ok := e.(streamer)
	if !ok {
		return
	}
	r := st.StreamStats()
	s.m.streamBytes.WithLabelValues("copied").Add(float64(r.BytesCopied))
	s.m.streamBytes.WithLabelValues("read").Add(float64(r.BytesRead))
	s.m.streamVisits.Add(float64(r.Visits))
	s.m.streamWalkers.Add(float64(r.Walkers))
	s.m.streamBatches.WithLabelValues("copied").Add(float64(r.Batches))
	s.m.streamBatches.WithLabelValues("in_place").Add(float64(r.InPlaceBatches))
	s.m.streamBatches.WithLabelValues("placement").Add(float64(r.PlacedBatches))
}
