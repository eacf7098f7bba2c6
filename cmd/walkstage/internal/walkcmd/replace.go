package walkcmd

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// runRequest is what a `walkstage walk` run writes, as its fingerprint
// covers it: the rows (graph, algorithm and its parameters, seeds, random
// seed, engine: the reservoir samplers' walks differ between engines) and
// the file format asked for. Tuning flags that change neither (workers,
// part and row group sizes, zstd level) are left out.
type runRequest struct {
	Tool         string               `json:"tool"`
	Graph        string               `json:"graph"`
	GraphVersion string               `json:"graph_version"`
	Output       string               `json:"output"`
	Algorithm    output.AlgorithmMeta `json:"algorithm"`
	Params       any                  `json:"params,omitempty"` // visits or sampling parameters
	Seed         uint64               `json:"seed"`
	PerSeed      int                  `json:"per_seed"`
	Engine       string               `json:"engine"`
	Compression  string               `json:"compression"`
	WalkEncoding string               `json:"walk_encoding,omitempty"`
	EdgeWeight   bool                 `json:"edge_weight,omitempty"`
	WithTimes    bool                 `json:"with_times,omitempty"`
}

// fingerprint identifies the run's request: the manifest records it, and a
// later run of the same batch id with another fingerprint is a conflict.
func (r runRequest) fingerprint(g *graph.Graph, seeds []uint32) string {
	h := sha256.New()
	desc, _ := json.Marshal(r) // plain data: cannot fail
	h.Write(desc)
	// The seeds go to the hash in blocks: one Write of 8 bytes a seed costs
	// more than the hashing itself, and --seeds all on a graph of millions
	// of vertices made the fingerprint a visible part of the whole command.
	buf := make([]byte, 0, 64<<10)
	for _, s := range seeds {
		if g.HasStringIDs() {
			id := g.ExternalString(s)
			buf = binary.LittleEndian.AppendUint64(buf, uint64(len(id)))
			h.Write(buf)
			h.Write([]byte(id))
			buf = buf[:0]
			continue
		}
		buf = binary.LittleEndian.AppendUint64(buf, uint64(g.ExternalID(s)))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return "walk-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// outputGuard keeps a run from replacing, unasked, an output its batch id
// already has from another request, as the stage refuses one with
// batch_id_conflict; with --replace the earlier output is removed just
// before the run's own commit, so a failed run leaves it in place.
type outputGuard struct {
	bucket   *blob.Bucket
	out      string             // bucket URL, for messages
	replaced []*output.Manifest // the outputs --replace removes
}

// guardOutput looks for complete outputs of batch id under prefix. One made
// by the same request (fingerprint) may stay: the run's commit then keeps it
// and discards its own parts. Any other (another fingerprint, or none: made
// by an earlier version, its parameters unknown) is an error wrapping
// sink.ErrBatchConflict that names it, unless replace is set.
func guardOutput(ctx context.Context, bucket *blob.Bucket, out, prefix, id, fp string, replace bool) (*outputGuard, error) {
	found, err := output.FindBatches(ctx, bucket, prefix, id)
	if err != nil {
		return nil, err
	}
	gd := &outputGuard{bucket: bucket, out: out}
	var conflicts []string
	for _, m := range found {
		if m.Fingerprint == fp {
			continue
		}
		gd.replaced = append(gd.replaced, m)
		conflicts = append(conflicts, describeOutput(out, prefix, m))
	}
	if len(conflicts) > 0 && !replace {
		return nil, fmt.Errorf("%w: batch %s already has output from other parameters:\n  %s\npass --replace-output to delete it and write this run's, or give another --batch-id",
			sink.ErrBatchConflict, id, strings.Join(conflicts, "\n  "))
	}
	return gd, nil
}

// describeOutput names an earlier output and what made it.
func describeOutput(out, prefix string, m *output.Manifest) string {
	where := m.BatchID
	if l, err := m.Layout(prefix); err == nil {
		where = store.ObjectURL(out, l.SuccessKey())
	}
	a := m.Algorithm
	what := fmt.Sprintf("%s %s length %d, seed %d, engine %s, %s", m.Kind(), a.Name, a.Length, m.Seed, m.Engine, m.Compression)
	switch m.Kind() {
	case output.KindVisits:
		what += fmt.Sprintf(", %d queries", m.Queries)
	case output.KindSamples:
		what += fmt.Sprintf(", %d instances", m.Instances)
	default:
		what += fmt.Sprintf(", %d walks", m.Walks)
	}
	if m.Fingerprint == "" {
		what += "; written without a request fingerprint (an earlier version), so its parameters cannot be compared"
	}
	return where + " (" + what + ")"
}

// clear removes the outputs --replace replaces; the run calls it right
// before its commit.
func (gd *outputGuard) clear(ctx context.Context, stderr io.Writer) error {
	if gd == nil {
		return nil
	}
	for _, m := range gd.replaced {
		if err := output.DeleteBatch(ctx, gd.bucket, m); err != nil {
			return fmt.Errorf("--replace: %w", err)
		}
		fmt.Fprintf(stderr, "replaced the earlier output of batch %s (%d part(s))\n", m.BatchID, len(m.Files))
	}
	gd.replaced = nil
	return nil
}
