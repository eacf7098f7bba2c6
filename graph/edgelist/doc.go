// Package edgelist imports edge-list files into walkstage's graph file
// (.wsg): the SNAP-style text and Parquet importers. The exporter, which
// writes a graph back out in either format so that importing the export
// rebuilds the same file, is graph/edgelist/export.
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
// String ids (ImportOptions.StringIDs; strdict.go) ride the same int64
// pipeline rather than a pipeline of their own. The decoders validate and
// hash each id and stage it, grouped by dictionary shard; the committer
// copies a batch's staged bytes into the run's arenas, and its records
// carry the ids' places there. When the sorter takes a run, it interns
// the run's strings shard by shard (each shard's table and strings in a
// core's cache, the shards on Workers goroutines), ranks the run's
// distinct strings in bytewise order and rewrites the records with those
// ranks: run-local ids. Because a run's local ids are ranks, the map from
// them to the graph's dense ids (ranks among all the input's strings)
// rises, so a run sorted by local ids is sorted by dense ids too, and the
// radix sort, the run encoding, the marks and the final merge work on
// local ids unchanged. After the last run, the runs' sorted string sets
// are merged into the graph's string table (spilled to a temporary file)
// and a local-to-dense map per run, which the final merge's readers apply.
// So the edges are sorted once, as with int64 ids, memory stays bounded by
// the run size (plus 4 bytes per distinct id per run for the maps, and the
// string table's offsets, 8 bytes a vertex), and the output does not
// depend on the input order. The other designs were slower or unbounded:
// a global in-memory dictionary grows with the input's distinct ids;
// sorting the distinct strings first and then rewriting every edge as
// dense ids before the int64 import reads and sorts the edges twice; and
// interning each id as it arrives, in one table on the committer, was the
// import's bottleneck (a cache miss or two per id, on one goroutine).
//
// Edge times (TimeColumn, TimeColumnName) are a field of each record: the
// runs are sorted by (source, target, time), the graph file's edge order
// (graph.FromEdges's), and a duplicate is an edge equal in all three, so
// one pair at two times is two edges whatever the duplicate policy (which
// applies to edges at the same time). The writer then lays each vertex's
// times out in time order with the permutation (the times and bytime
// sections), one vertex at a time.
//
// The graph file's layout, header and checksum are the graph package's: the
// importer lays its file out with graph.NewFileLayout and fills the sections
// in place. This package knows nothing of walks, Kafka or GPUs.
//
// Why it is one package of over 5,000 lines rather than the project's usual
// 3,000 at most: it is one idea, an external sort with two front ends. The
// decoders write straight into the run builder's column batches, and the
// record, run-file, run-reader and option types (with the test knobs in
// ImportOptions) are shared by every stage from decoding to the final
// merge; a split between the decoders and the sort, or between the sort
// and the CSR writer, would export those internals for no other user.
package edgelist
