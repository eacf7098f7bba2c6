// Package health is what the stage knows of its dependencies (the broker,
// the object store, the engine) and how it tells: a Tracker of outages,
// each held down by the operations whose attempts fail on it until each
// of them succeeds or ends (so a passing probe never hides a stuck retry);
// the retry of such work with capped, jittered back-off, woken early when
// the dependency's probe finds it back (Persist, RetryWait); the probes;
// and the HTTP handler serving /metrics, /healthz and /readyz, from before
// the stage exists (while the graph loads) to its shutdown.
//
// It knows dependencies by name only: nothing of Kafka, object storage or
// engines, nor of the stage's batches, which hold dependencies down under
// holder names of their own.
package health
