// Package gpu is walkstage's CUDA engine: it uploads the graph and its
// sampling tables once and runs the FlowWalker-style persistent kernels of
// kernels/ behind the walk.Engine interface. Only files built with the
// "cuda" tag import gorgonia.org/cu; a default build has this package's
// errors and options and reports the engine as unavailable.
//
// How a Run goes: jobs with equal algorithms form a group; a group's walks
// are cut into batches sized from free device memory (FlowWalker eq. 3) and
// the pinned host buffers; batches take turns on the batch slots (two by
// default, WithBatchSlots), each with its own stream, in a pipeline of
// goroutines (pipeline.go): batch i+1 walks and crosses the bus while batch
// i is cut into chunks and batch i-1's chunks are emitted. Chunks the
// receiver gives back (Release) are reused; with WithLentChunks they are
// not copies but views of the slot's pinned buffer, and the slot is walked
// again once all are back. Inside a batch, persistent blocks take walks from
// a global task pool by an atomic cursor: O(1) samplers (uniform, alias,
// Node2Vec rejection, MetaPath label tables) give every thread one walk;
// the reservoir samplers (ZPRS, DPRS) keep 64 walks per block in shared
// memory and hand small-degree steps to warps and large ones to the block.
// Uniform, alias, PPR, Node2Vec and MetaPath (label tables) walks equal
// cpu.New's walk by walk; ZPRS and DPRS agree with it in distribution.
//
// Beyond walk.Engine, the engine lends chunks and takes them back
// (Release), prepares its batch slots, samples graphs and counts visits on
// the device (the capabilities named in walk/engine.go,
// graphsample.DeviceSampler and visits.DeviceVisitCounter), and places or
// partitions a graph that does not fit one device (Placer, Partitioned, in
// capabilities.go).
// Multi spreads runs over several devices.
//
// It knows graphs and walks, nothing of Kafka, Parquet or the stage.
//
// Size: the package is larger than one idea's usual 3,000 lines because
// everything in it is a method of one Engine that owns one CUDA context:
// its module of kernels, its streams, the graph arrays on the device, the
// pinned slots and the fault state. The files are grouped by what they add
// to that engine, and a file's prefix names its group:
//
//	engine, device, memory, options, params, launch, slots, run, pipeline,
//	chunkpool, lend, unpack, tables, plan, faults,
//	capabilities, gpu, nocuda                        the walk engine itself
//	temporal                                         temporal walks
//	sample, frontier, stagedcopy                     C-SAW graph sampling
//	visits                                           visit counting
//	placement, hostread, stripes, multi, stream      graphs larger than one
//	                                                 device (in place, or
//	                                                 streamed in partitions);
//	                                                 several devices
//
// Sampling, visits and placement each need the context, the module and the
// device copy of the graph that a Run uses; in packages of their own they
// would reach them through an exported engine internals API that nothing
// else should call, so they stay here (issue 34 weighed both).
package gpu

import "errors"

// ErrUnavailable is returned by New when the engine cannot run here: built
// without the cuda tag, or no usable device.
var ErrUnavailable = errors.New("gpu engine unavailable")
