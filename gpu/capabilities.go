package gpu

// The GPU engine's own capabilities, beyond the ones any engine may have
// (walk/engine.go names those: run stats, chunk release, slot
// preparation; graphsample.DeviceSampler names device sampling and
// walk/visits's DeviceVisitCounter and DeviceVisitBatcher visit counting). Callers find them with
// a type assertion to these interfaces, never to an anonymous one. They
// are here, not in walk, because their methods return this package's
// types, which walk (importing only graph) cannot name; and not in the
// engines package, because Multi asks its engines for them and engines
// imports gpu. They exist in every build, with or without the cuda tag,
// so callers compile either way; without it no engine has them.

// Placer is implemented by engines that may keep part of the graph out of
// device memory (Engine, and Multi for its first engine). Placement is the
// placement plan, nil when the whole graph is on the device.
type Placer interface {
	Placement() *Placement
}

// Streamer is implemented by the engine (Engine) that may stream a graph
// larger than the device budget to its walkers in partitions (stream.go).
// StreamPlan is the plan, nil when it does not stream; StreamStats is what
// streaming did in the last Run.
type Streamer interface {
	StreamPlan() *StreamPlan
	StreamStats() StreamStats
}

// Partitioned is implemented by engines that may share one partitioned
// copy of the graph with the engines of other devices (Engine with
// WithStripes, Multi). Stripes is that copy, nil when the engine holds
// the graph itself.
type Partitioned interface {
	Stripes() *Stripes
}

// HostReadBencher is implemented by the engine (Engine) that can measure
// reads of mapped host memory from its device: the bound on the steps a
// placement plan's host half can serve (walkstage bench
// --host-read-bytes). It allocates and frees its own memory.
type HostReadBencher interface {
	HostReadBench(regionBytes ...int64) (HostReadReport, error)
}
