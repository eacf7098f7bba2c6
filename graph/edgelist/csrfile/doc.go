// Package csrfile writes walkstage's graph file (.wsg) from the importer's
// sorted runs (graph/edgelist/extsort): it k-way merges the runs, resolves
// duplicate edges by the import's policy, ranks external ids into dense ids
// (ranker.go) and writes the CSR sections (offsets, targets, weights,
// labels, times in each vertex's time order, the id map or string table)
// straight into the output file, then checksums it and writes the header.
//
// The merge runs in parts of the source range on several goroutines, each
// writing its own slice of the sections where a serial merge would put it
// (mergepar.go); when duplicates were dropped, the later parts' edges are
// moved down and the sections after the targets slid into place
// (compact.go, csrwrite.go), so the file has the same bytes whatever the
// number of parts or workers, and the same as graph.FromEdges and
// graph.Save give for the same edges. The layout, header and checksum are
// the graph package's (graph.NewFileLayout).
//
// It knows the runs and the graph file; it knows nothing of the input
// formats or the run builder that made the runs, nor of walks, Kafka or
// GPUs.
package csrfile
