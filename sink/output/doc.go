// Package output is the contract between walkstage's batch writer (sink)
// and everything that reads what it wrote: where a batch's objects live
// (BatchLayout, Layout, the output kinds), the `_SUCCESS` manifest that
// lists a committed batch's parts (Manifest, ReadManifest, DecodeManifest,
// ReadComplete), and the readers and tidying of the output tree:
// FindBatches and DeleteBatch for one batch id, ListCommitted for the
// committed batches of a kind, TidyOrphans for the parts no manifest
// lists.
//
// A batch lives under
//
//	{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch_id}/part-NNNNN-{attempt}.parquet
//	{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch_id}/_SUCCESS
//
// and batches written before kinds had paths of their own under
// {prefix}/graph=... directly; the readers find both. Readers go by the
// manifest: a batch directory may hold parts of attempts that lost, or of
// attempts killed before any commit (see sink.BatchWriter.Commit for the
// protocol that writes manifests).
//
// It knows buckets (through store/, whose options bound its store calls)
// and the manifest's description of walks and graphs; it knows nothing of
// Parquet encoding, the writer, Kafka or the stage, so tools that only list,
// read or tidy output import it rather than the sink.
package output
