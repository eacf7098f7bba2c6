package output

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
	KindWalks   = "walks"   // one row per walk
	KindVisits  = "visits"  // one row per query (sink/visits.go)
	KindSamples = "samples" // one row per sampled edge (sink/samples.go)
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
// ("part-00000-<attempt>.parquet"). Every sink.BatchWriter has its own attempt
// id, so two writers of one batch never write the same object, and only
// the manifest says which attempt's parts make up the batch.
func (l Layout) AttemptPartKey(i int, attempt string) string {
	return fmt.Sprintf("%s/part-%05d-%s.parquet", l.Dir, i, attempt)
}

// IsPart says whether key is a part of the batch, of any attempt or of the
// naming before attempts.
func (l Layout) IsPart(key string) bool {
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
