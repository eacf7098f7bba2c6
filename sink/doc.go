// Package sink turns completed walks into Parquet objects on a
// gocloud.dev/blob bucket, with a `_SUCCESS` manifest written last so that
// readers and retries can tell a complete batch from an interrupted one.
// It holds the batch writers (walks, visits, samples), their options and
// shared buffers, the upload of parts, the commit protocol that publishes
// a batch's manifest, and Lookup, the commit's other half: the check that
// answers a redelivered request from the output already written. Three
// packages beside it hold what it builds on, each knowing nothing of the
// writer: sink/output is the output's contract (the layout of batch
// directories, the manifest, and the readers and tidying of committed
// output: FindBatches, ListCommitted, TidyOrphans); sink/pages encodes row
// groups of walks into Parquet pages; store/ opens buckets and writes,
// aborts and sweeps objects, knowing nothing of Parquet.
//
// Size: a little over the project's ~3,000 lines without tests, because the
// three outputs are one writer: walks, visits (visits.go) and samples
// (samples.go, some 800 lines with visits.go) are modes of one BatchWriter
// that share its parts, uploads, memory bound and commit, so the row
// outputs cannot leave without the writer's part plumbing becoming an API
// of its own.
//
// A batch lives under (output.BatchLayout)
//
//	{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch_id}/part-NNNNN-{attempt}.parquet
//	{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch_id}/_SUCCESS
//
// where kind is the output kind (output.KindWalks, KindVisits, KindSamples), so
// that every path under {prefix}/kind={kind}/ holds parts of one schema.
// Batches written before kinds had paths of their own sit under
// {prefix}/graph=... directly (a PPR visits batch beside PPR walks); Lookup
// still finds them. A walks part holds one row per walk (walk_id, start,
// length, walk as a standard three-level LIST of external ids), rows in
// walk id order, and the batch's metadata as file key-value pairs. Parts are written by
// streaming uploads (S3 multipart); an error, Abort or cancellation leaves
// no partial object and no `_SUCCESS` of its own.
//
// Safety under concurrency, kills and redelivery (see BatchWriter.Commit):
// every writer names its parts with an attempt id of its own, and the
// manifest, which lists one attempt's parts, is written last with a
// create-if-absent put. A manifest carrying a request fingerprint is never
// deleted or replaced; two writers of one batch id end with exactly one
// output set, and a different request for a written batch id gets
// ErrBatchConflict. Lookup finds a written batch for a redelivery,
// store.Sweep and the next attempt at a batch remove what killed writers
// left (local temporary files when it opens; S3 multipart uploads when it
// commits, or when it ends without a manifest), and store.Check proves the
// store usable at start-up.
// Every store call has a deadline (WithCallTimeout, WithUploadStallTimeout).
// Readers must go by the manifest: a batch directory may briefly hold
// parts of attempts that lost, which the winner deletes after it commits
// (best effort), and killed attempts leave directories without one.
// output.ListCommitted reads a kind through its manifests;
// output.TidyOrphans removes the parts no manifest lists once they are
// older than any live attempt.
//
// Memory: a BatchWriter holds at most WithMemoryLimit bytes of walks
// (default 512 MiB: chunks waiting for their row group, row groups being
// encoded, encoded row groups waiting for upload), plus per encoder one
// row group's compressed pages and 1 MiB page buffer, plus the upload
// buffers of the parts being uploaded (WithParallelParts x
// WithUploadBuffer, default 4 x 4 x 8 MiB). The
// accounted memory stays under the limit however large the batch: a
// 4M-walk benchmark batch peaked at 525 MiB held with a 512 MiB limit (the
// encoded copy of a row group is counted before its staged walks are
// released).
//
// Reproducibility: the same walks give byte-identical parts, and manifests
// that differ only in the attempt ids of the part names, whatever order
// chunks arrive in and however many encoders run (see BatchWriter).
//
// The package knows walks (walk.Chunk, walk.Algorithm) and graphs (for
// external ids); it knows nothing of Kafka, offsets or the stage that drives
// it: callers acknowledge their input once Commit has returned.
package sink
