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
package stage
