// Package edgelist moves graphs between edge-list files and walkstage's
// graph file (.wsg): the SNAP-style text and Parquet importers, and the
// exporter that writes a graph back out in either format so that importing
// the export rebuilds the same file.
//
// The importers (ImportText, ImportTextReader, ImportParquet) stream any
// input size through bounded memory as an external sort (import.go has the
// pipeline): parallel decoders (textdecode.go, parquetdecode.go) hand
// batches in input order (batch.go) to a run builder (runs.go) whose full
// runs are radix-sorted (radix.go) and spilled delta- and varint-coded
// (runcodec.go); the runs' id sets and edges are then k-way merged
// (merge.go), the external ids ranked into dense ids (ranker.go), and the
// CSR sections written in parts straight into the output file
// (mergepar.go, csrwrite.go, compact.go). The output has the same bytes
// whatever the worker count, and the same as graph.FromEdges and graph.Save
// give for the same edges.
//
// Export and ExportFile (export.go) write the text or Parquet edge list of
// a loaded graph, with a description of the import flags that read it back.
//
// The graph file's layout, header and checksum are the graph package's: the
// importer lays its file out with graph.NewFileLayout and fills the sections
// in place. This package knows nothing of walks, Kafka or GPUs.
//
// Why it is one package of over 4,000 lines rather than the project's usual
// 3,000 at most: it is one idea, an external sort with two front ends. The
// decoders write straight into the run builder's column batches, and the
// record, run-file, run-reader and option types (with the test knobs in
// ImportOptions) are shared by every stage from decoding to the final
// merge; a split between the decoders and the sort, or between the sort
// and the CSR writer, would export those internals for no other user. The
// exporter is the importers' inverse: it prints the import flags that
// rebuild its input, and the round-trip tests need both.
package edgelist
