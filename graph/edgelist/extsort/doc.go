// Package extsort is the external sort under the edge-list importers
// (graph/edgelist): sorted runs of edge records, spilled to temporary files
// and merged back, in bounded memory whatever the input size.
//
// It holds the record (Rec: source, target, weight, label and position in
// its run; TRec with the time as the merge reads it) and the run (Run: in
// memory, or spilled with its restart marks, id set and string set); the
// radix sorter of a run by (source, target, time, position) (Sorter,
// radix.go); the run encoding, delta- and varint-coded and written in slabs
// on several goroutines (Encoder, EncodeRun), and its decoder, which can
// start at any mark so that a merge can run in parts (Reader, Mark, Pos;
// runcodec.go); the k-way merges of runs (MergeRuns, HeapMerge: ties go to
// the earlier run, so "first" means first in the input) and of their
// sorted id sets (EncodeIDs, MergeIDs; merge.go); for string ids, the
// staging arenas the decoders fill (Staged), the run dictionary that turns
// a run's strings into run-local ranks (Dict), and the merge of the runs'
// string sets into the graph's string table with a local-to-dense map per
// run (StrSet, MergeStrings, StringTable; strdict.go, where the scheme is
// explained); and the goroutine helpers the importer's stages share
// (Worker, ParallelFor).
//
// The importer decides what goes into a run and when a run is cut (its run
// builder), and what the merged stream becomes (the graph file); this
// package knows nothing of input formats, import options, duplicate
// policies or the graph file's layout, nor of walks, Kafka or GPUs.
package extsort
