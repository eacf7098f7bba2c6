// Package engines chooses and builds a walk engine for a graph: the CPU
// engine (cpu.New, its sampling tables built before the first run),
// the GPU engine (gpu.New, behind the cuda build tag) on one device or a
// gpu.Multi over several, and whether several devices share one
// partitioned copy of the graph (gpu.Stripes), or both engines walking
// every job together (walk/hybrid, engine "hybrid"). The stage, `walkstage
// walk` and `walkstage bench` all build their engine here, so the one-shot
// commands need not import the stage.
//
// A graph that needs more host memory than the budget is walked out of
// core (walk/ooc) when the CPU engine is chosen. The budget is a Setting;
// left at 0 it is read where the deployment states it: the one environment
// variable this package reads, WALKSTAGE_HOST_MEMORY_LIMIT, else the
// cgroup's memory limit, else MemAvailable (ooc.HostMemory). Otherwise it
// takes plain Settings and reads no environment variable or flag itself;
// it knows nothing of Kafka or object storage. What an engine can
// do beyond walk.Engine (run stats, chunk release, device sampling and
// visits, placement, a partitioned graph) is named in walk/engine.go,
// graphsample.DeviceSampler, walk/visits (DeviceVisitCounter,
// DeviceVisitBatcher) and gpu/capabilities.go; callers ask the engine New
// returns with a type assertion to those.
package engines
