package gpu

// Node2Vec under streaming (issue 35; docs/design/out-of-core.md, "Node2Vec
// under streaming"). A step at v (previous vertex u) runs the rejection
// loop of node2vec_reject: attempt a draws a proposal x from v's static
// bias and accepts it on word z against the threshold of its class (0:
// x = u, 1: x adjacent to u, 2: otherwise). Only the class test reads u's
// adjacency, which may lie in a partition not on the device. So a walker
// carries a phase beside its vertex: it proposes at part(v) and decides
// every attempt that needs no lookup there (or that needs one while u's
// partition is on the device too); an attempt that needs u's adjacency
// parks it in the check phase, queued by part(u), with its candidate and
// attempt; after walk.MaxRejections rejected attempts it waits for the
// host, which runs the exact scan (walk.Node2VecScan). Every decision is a
// function of the draws of (seed, walk id, step, attempt), never of a
// visit, so the walks are those of the all-device engine and of walk/cpu.
//
// This file holds what needs no GPU: the phases and the host's scan.
// kernels/stream.cuh walks the phases; stream_cuda.go runs the scans.

// Walker phases (the low byte of stream.wphase; the attempt is in bits
// 8-15). kN2V* in kernels/stream.cuh.
const (
	n2vPropose = 0 // waits at part(v): the next attempt's proposal
	n2vCheck   = 1 // waits at part(u): is the candidate adjacent to u?
	n2vScan    = 2 // waits for the host: MaxRejections attempts rejected
)

// n2vScanRecord is one walker handed to the host for its scan (8 words;
// kernels/stream.cuh writes them, stream_scan_apply reads x back): its
// slot, current and previous vertex, step, walk id, job, and the vertex
// the scan picks.
const n2vScanWords = 8
