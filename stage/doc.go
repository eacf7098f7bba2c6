// Package stage wires walkstage's pipeline: it takes validated requests and
// their acknowledgements from source, groups small requests into one engine
// launch (micro-batching), splits the walks back per batch into sink
// writers, publishes the completion event and only then acknowledges the
// request. It owns the lifecycle (actors that stop together, graceful
// shutdown), its metrics and logs, and builds itself from a configuration
// (FromConfig, Main) that stage/config reads from the environment; what it
// knows of its dependencies' health, the retries on them and the health
// endpoints are stage/health's. It knows nothing of Kafka offsets: the
// source's acknowledgement is the only handle on them.
//
// Size: a little over the project's ~3,000 lines without tests. Intake,
// micro-batching, the engine's turns, writing, finishing, graph versions
// and the live graph (edges.go: snapshots bound to micro-batches, edge
// offset waits) all act on one batch and the Stage's queues and slots; the
// parts without that state already live beside it (stage/config,
// stage/health, stage/live, internal/turns, catalog.LoadGraph).
package stage
