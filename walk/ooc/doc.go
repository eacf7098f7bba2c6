// Package ooc is the out-of-core CPU engine: it walks a graph file larger
// than the host's memory budget without mapping it. The graph is cut into
// vertex-range partitions sized to the budget (plan.go); walkers (walk id,
// current vertex, step, the vertices so far) stay in memory, queued by the
// partition of their current vertex; the engine loads the partition with
// the most waiting walkers with large sequential reads (O_DIRECT where the
// filesystem allows it, reader.go) into a bounded pool of slots that also
// caches the busiest partitions, advances every walker in it as far as it
// can inside the partition and queues the rest again (C-SAW §V: most
// active first, many walk instances per partition visit; GStream's
// resident walker state, moving topology).
//
// Walks equal walk/cpu's walk by walk for the same seed: every decision
// follows the draw contract of walk/draws.go, keyed by (seed, walk id,
// step, draw), and the alias tables are built per partition with
// walk.AliasVertex from the same weights, so the order in which partitions
// are visited changes nothing. Uniform and weighted DeepWalk, PPR and
// MetaPath on label tables run out of core, and Node2Vec on its rejection
// sampler, whose class tests wait at the previous vertex's partition
// (node2vec.go); temporal walks, forced reservoir steppers and MetaPath
// without label tables are refused by Check (walk.AlgorithmChecker).
//
// It imports walk and graph only; it knows nothing of Kafka, Parquet,
// CUDA or how the engine is chosen (engines does that).
package ooc
