// Package stage wires walkstage's pipeline: it takes validated requests and
// their acknowledgements from source, groups small requests into one engine
// launch (micro-batching), splits the walks back per batch into sink
// writers, publishes the completion event and only then acknowledges the
// request. It owns the lifecycle (actors that stop together, graceful
// shutdown), metrics, logs and the health endpoints, and builds itself from
// a configuration (FromConfig, Main) that stage/config reads from the
// environment. It knows nothing of Kafka offsets: the source's
// acknowledgement is the only handle on them.
package stage
