// Package sink turns completed walks into Parquet objects on a
// gocloud.dev/blob bucket, with a `_SUCCESS` manifest written last so that
// readers and retries can tell a complete batch from an interrupted one.
// It holds the batch writers (walks, visits, samples), their commit
// protocol and manifests, the output layout, and the listings and tidying
// of written output (Lookup, ListCommitted, TidyOrphans). Buckets are
// opened and objects written through the store package (store/), which
// knows nothing of Parquet; row groups of walks are encoded into Parquet
// pages by sink/pages, which knows nothing of batches or stores.
//
// It is larger than the project's other packages (some 4,200 lines
// without tests) because the writers, their commit protocol and the
// readers of written output (Lookup, ListCommitted, TidyOrphans) are one
// contract, the output layout and manifests: the readers go by what the
// commit guarantees, and keeping them beside it keeps the two in step.
//
// A batch lives under
//
//	{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch_id}/part-NNNNN-{attempt}.parquet
//	{prefix}/kind={kind}/graph={graph}/algorithm={algorithm}/batch={batch_id}/_SUCCESS
//
// where kind is the output kind (KindWalks, KindVisits, KindSamples), so
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
// store.Sweep and NewBatchWriter remove what killed writers left (S3
// multipart uploads, local temporary files), and store.Check proves the
// store usable at start-up.
// Every store call has a deadline (WithCallTimeout, WithUploadStallTimeout).
// Readers must go by the manifest: a batch directory may briefly hold
// parts of attempts that lost, which the winner deletes after it commits
// (best effort), and killed attempts leave directories without one.
// ListCommitted reads a kind through its manifests; TidyOrphans removes
// the parts no manifest lists once they are older than any live attempt.
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

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// SuccessName is the manifest's object name inside a batch directory.
const SuccessName = "_SUCCESS"

// ErrInvalidLayout is wrapped when a graph name, batch id or prefix cannot be
// turned into object keys.
var ErrInvalidLayout = errors.New("invalid output layout")

// Output kinds: each has a Parquet schema of its own (docs/reference/messages.md)
// and a path component of its own, "kind={kind}".
const (
	KindWalks   = "walks"       // one row per walk
	KindVisits  = OutputVisits  // one row per query (sink/visits.go)
	KindSamples = OutputSamples // one row per sampled edge (sink/samples.go)
)

// kindDir is the path component that starts every kind's subtree.
const kindDir = "kind="

// Layout names the objects of one batch.
type Layout struct {
	// Dir is the batch directory key, without a trailing slash.
	Dir string
}

// BatchLayout computes where a batch of output kind (KindWalks,
// KindVisits or KindSamples) lives. Graph, algorithm and batch id are
// escaped like Hive partition values (characters outside [A-Za-z0-9._-]
// become %XX), so any id is safe as a key segment and the directories
// read as partition columns in Spark and DuckDB.
func BatchLayout(prefix, kind, graphName, algorithm, batchID string) (Layout, error) {
	switch kind {
	case KindWalks, KindVisits, KindSamples:
	default:
		return Layout{}, fmt.Errorf("%w: output kind %q is not %s, %s or %s", ErrInvalidLayout, kind, KindWalks, KindVisits, KindSamples)
	}
	for _, p := range []struct{ what, v string }{{"graph name", graphName}, {"algorithm", algorithm}, {"batch id", batchID}} {
		if p.v == "" {
			return Layout{}, fmt.Errorf("%w: empty %s", ErrInvalidLayout, p.what)
		}
	}
	prefix = strings.Trim(prefix, "/")
	if strings.Contains(prefix, "//") {
		return Layout{}, fmt.Errorf("%w: prefix %q has an empty segment", ErrInvalidLayout, prefix)
	}
	for _, seg := range strings.Split(prefix, "/") {
		if seg == "." || seg == ".." {
			return Layout{}, fmt.Errorf("%w: prefix %q has a %q segment", ErrInvalidLayout, prefix, seg)
		}
	}
	dir := path.Join(kindDir+kind, "graph="+escape(graphName), "algorithm="+escape(algorithm), "batch="+escape(batchID))
	if prefix != "" {
		dir = prefix + "/" + dir
	}
	return Layout{Dir: dir}, nil
}

// PartKey is the key part i had before parts were named per attempt;
// batches written by earlier versions use it.
func (l Layout) PartKey(i int) string { return fmt.Sprintf("%s/part-%05d.parquet", l.Dir, i) }

// AttemptPartKey is the key of part i written by one attempt at the batch
// ("part-00000-<attempt>.parquet"). Every BatchWriter has its own attempt
// id, so two writers of one batch never write the same object, and only
// the manifest says which attempt's parts make up the batch.
func (l Layout) AttemptPartKey(i int, attempt string) string {
	return fmt.Sprintf("%s/part-%05d-%s.parquet", l.Dir, i, attempt)
}

// isPart says whether key is a part of the batch, of any attempt or of the
// naming before attempts.
func (l Layout) isPart(key string) bool {
	name, ok := strings.CutPrefix(key, l.Dir+"/part-")
	return ok && !strings.Contains(name, "/") && strings.HasSuffix(name, ".parquet")
}

// SuccessKey is the key of the manifest.
func (l Layout) SuccessKey() string { return l.Dir + "/" + SuccessName }

// escape makes s safe as one Hive-style key segment.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		case c == '.' && !(s == "." || s == ".."):
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
