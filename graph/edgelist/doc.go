// Package edgelist imports edge-list files into walkstage's graph file
// (.wsg): the SNAP-style text and Parquet importers.
//
// The importers (ImportText, ImportTextReader, ImportParquet) stream any
// input size through bounded memory as an external sort (import.go has the
// pipeline). This package holds the front end: the options, the parallel
// decoders (textdecode.go, parquetdecode.go) that hand batches in input
// order (batch.go) to the run builder (runs.go), which cuts the input into
// runs, stages string ids (strstage.go) and hands each full run to its
// sorter. The sort itself is graph/edgelist/extsort: full runs are
// radix-sorted and spilled delta- and varint-coded, and the runs' id sets
// merged into the sorted external ids. The graph file is written by
// graph/edgelist/csrfile: the runs k-way merged, the external ids ranked
// into dense ids and the CSR sections written in parts straight into the
// output file. The output has the same bytes whatever the worker count,
// and the same as graph.FromEdges and graph.Save give for the same edges.
//
// String ids (ImportOptions.StringIDs; strstage.go here, extsort's
// strdict.go for the dictionary and the string table) ride the same int64
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
// applies to edges at the same time). The writer (csrfile) then lays each vertex's
// times out in time order with the permutation (the times and bytime
// sections), one vertex at a time.
//
// The graph file's layout, header and checksum are the graph package's
// (csrfile lays the file out with graph.NewFileLayout and fills the
// sections in place). The exporter, the importers' inverse, is
// graph/edgelist/export. This package knows nothing of walks, Kafka or
// GPUs.
package edgelist
