package message

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/walkstage/walkstage/walk"

	"github.com/walkstage/walkstage/walk/visits"
)

// RequestVersion is the only request format version this build reads.
const RequestVersion = 1

// Limits bound what one request may ask for. Violations reject the request
// (Reason TooLarge), so one oversized message cannot exhaust a replica.
type Limits struct {
	MaxMessageBytes  int // size of the message value
	MaxSeeds         int // seed vertices, listed or in the range
	MaxWalkLength    int // steps per walk
	MaxWalksPerSeed  int
	MaxWalksPerBatch int   // seeds x walks_per_seed
	MaxTopK          int   // top_k of an output "visits" request
	MaxStepsPerQuery int64 // steps_per_query of an output "visits" request
	MaxStepsPerBatch int64 // queries x steps_per_query of an output "visits" request
	// Sampling requests (sample.go): the largest fan-out or layer
	// size, max_vertices (also its value when absent), and the most edges
	// one request may sample (instances x the most edges an instance can).
	MaxFanout         int
	MaxSampleVertices int
	MaxSampledEdges   int64
	// SkipUnknown walks the known seeds and counts the rest instead of
	// rejecting a request that names vertices the graph lacks.
	SkipUnknown bool
	// Vertices, when set, resolves integer seeds instead of the graph: a
	// live graph's latest snapshot, which holds the vertices edge updates
	// added (the stage's, when WALKSTAGE_EDGE_TOPIC is set). A request
	// with edge_offsets keeps the seeds it does not find yet as
	// Request.Unresolved: the updates it waits for may add them, so the
	// stage resolves them against the snapshot it walks on.
	Vertices VertexResolver
}

// VertexResolver maps external integer ids to dense ids (a live graph's
// snapshot: livegraph.Snapshot).
type VertexResolver interface {
	DenseID(ext int64) (uint32, bool)
}

// DefaultLimits match the stage's configuration defaults.
func DefaultLimits() Limits {
	return Limits{MaxMessageBytes: 4 << 20, MaxSeeds: 100_000, MaxWalkLength: 1000, MaxWalksPerSeed: 100,
		MaxWalksPerBatch: 10_000_000, MaxTopK: 1000, MaxStepsPerQuery: 10_000_000,
		MaxStepsPerBatch: 2_000_000_000, MaxFanout: 1000, MaxSampleVertices: 10_000, MaxSampledEdges: 100_000_000}
}

// Reason is the machine-readable class of a rejection, stable across
// releases (downstream code switches on it).
type Reason string

const (
	ReasonMalformed          Reason = "malformed"           // not JSON, unknown field, wrong type, trailing data
	ReasonUnsupportedVersion Reason = "unsupported_version" // version missing or not 1
	ReasonInvalidBatchID     Reason = "invalid_batch_id"    // missing, bad characters, key mismatch
	ReasonInvalidParameters  Reason = "invalid_parameters"  // algorithm, length, p/q, schema, seeds...
	ReasonTooLarge           Reason = "too_large"           // a Limits bound
	ReasonUnknownVertices    Reason = "unknown_vertices"    // seeds the graph lacks (policy reject)
	ReasonGraphMismatch      Reason = "graph_mismatch"      // "graph" names another graph
)

// RejectError is why a request was refused. Rejections are data: the stage
// reports them in a completion event and the dead-letter topic, commits the
// message and carries on.
type RejectError struct {
	Reason  Reason
	BatchID string // as far as it could be read (message key, else body), maybe empty
	Msg     string
}

func (e *RejectError) Error() string { return fmt.Sprintf("rejected (%s): %s", e.Reason, e.Msg) }

// Request is a validated walk request, ready for an engine.
type Request struct {
	BatchID      string
	Graph        string // as requested; empty when the request did not say
	GraphVersion string // graph version the request is pinned to; empty: any
	Algorithm    walk.Algorithm
	WalksPerSeed int
	// Seeds are the external ids walked, in request order, unknown ones
	// removed when skipping; Starts are their dense ids. For a graph with
	// string ids StringSeeds holds them instead (Seeds is then nil).
	Seeds       []int64
	StringSeeds []string
	Starts      []uint32
	// Skipped counts seeds the graph lacks (SkipUnknown); SkippedIDs lists
	// the first few for the completion event, as external ids in text
	// (decimal for integer ids).
	Skipped    int
	SkippedIDs []string
	// RNGSeed keys the Philox stream. When the request gives none it is the
	// FNV-64a hash of the batch id, so a redelivered batch walks the same walks.
	RNGSeed        uint64
	RNGSeedDerived bool
	// WithTimes asks a temporal walk request for its walks' times (the
	// output's times column).
	WithTimes bool
	// Output is OutputWalks or OutputVisits; Visits is set for the latter.
	Output string
	Visits *VisitSpec
	// Sample is set for the sampling algorithms (output "samples",
	// sample.go); Algorithm is then the zero value.
	Sample *SampleSpec
	// EdgeOffsets asks for a live graph that holds at least these offsets
	// of the edge topic, per partition (read-your-writes): the offset after
	// the requester's last edge record. Nil: any snapshot.
	EdgeOffsets map[int32]int64
	// Unresolved is set when seeds were kept unresolved (Limits.Vertices,
	// EdgeOffsets): Starts are placeholders until the stage resolves the
	// seeds against the snapshot it walks on.
	Unresolved bool
}

// Output kinds of a request.
const (
	OutputWalks  = "walks"  // one Parquet row per walk (the default)
	OutputVisits = "visits" // one Parquet row per query: its top-k visited vertices
)

// VisitSpec is what an output "visits" request asks for: the counting
// parameters (visits.VisitParams, with the request's algorithm and RNG seed)
// and the queries, each with its id. Seeds of a request without "queries"
// are one query each, named by their external id.
type VisitSpec struct {
	Params   visits.VisitParams
	QueryIDs []string
	Queries  []visits.VisitQuery
	// QuerySeeds are each query's seeds as external ids (Queries[q].Starts
	// are their dense ids in the graph the request was decoded against);
	// QueryStringSeeds instead for a graph with string ids.
	QuerySeeds       [][]int64
	QueryStringSeeds [][]string
}

// NumQueries is the number of queries of an output "visits" request, 0 for
// walks.
func (r *Request) NumQueries() int {
	if r.Visits == nil {
		return 0
	}
	return len(r.Visits.Queries)
}

// NumSeeds is the number of seeds walked, whatever their id type.
func (r *Request) NumSeeds() int { return max(len(r.Seeds), len(r.StringSeeds)) }

// SeedID is seed i's external id as text (decimal for integer ids).
func (r *Request) SeedID(i int) string {
	if r.StringSeeds != nil {
		return r.StringSeeds[i]
	}
	return strconv.FormatInt(r.Seeds[i], 10)
}

// NumWalks is len(Starts) * WalksPerSeed.
func (r *Request) NumWalks() int { return len(r.Starts) * r.WalksPerSeed }

// Job builds the engine job. Walk id k is the k-th (seed, repetition) pair:
// seed Starts[k / WalksPerSeed], repetition k % WalksPerSeed.
func (r *Request) Job(tag int) walk.Job {
	starts := make([]uint32, 0, r.NumWalks())
	for _, s := range r.Starts {
		for range r.WalksPerSeed {
			starts = append(starts, s)
		}
	}
	return walk.Job{Tag: tag, Algorithm: r.Algorithm, Seed: r.RNGSeed, Starts: starts, WithTimes: r.WithTimes}
}

// DeriveSeed is the default RNG seed of a batch: FNV-64a of its id.
func DeriveSeed(batchID string) uint64 {
	h := fnv.New64a()
	io.WriteString(h, batchID)
	return h.Sum64()
}

// MaxBatchIDLen bounds batch ids, which become object-key path segments.
const MaxBatchIDLen = 128

// ValidBatchID checks that id is usable as one object-key path segment:
// 1 to 128 characters of [A-Za-z0-9._-], not "." or "..".
func ValidBatchID(id string) error {
	if id == "" {
		return errors.New("batch_id is required")
	}
	if len(id) > MaxBatchIDLen {
		return fmt.Errorf("batch_id is %d bytes, limit %d", len(id), MaxBatchIDLen)
	}
	if id == "." || id == ".." {
		return fmt.Errorf("batch_id %q is reserved", id)
	}
	for i, c := range id {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			continue
		}
		// Name the character as the sender wrote it: a rune, not the
		// first byte of its UTF-8 encoding.
		if c == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(id[i:]); size == 1 {
				return fmt.Errorf("batch_id %q is not UTF-8 (byte 0x%02x at offset %d); allowed: A-Z a-z 0-9 . _ -",
					truncate(id, 64), id[i], i)
			}
		}
		return fmt.Errorf("batch_id %q has character %q (%U); allowed: A-Z a-z 0-9 . _ -", truncate(id, 64), c, c)
	}
	return nil
}

// Defaults applied when a field is absent.
const (
	DefaultWalksPerSeed = 1
	DefaultStopProb     = 0.15
	DefaultPQ           = 1.0
	maxSkippedIDs       = 100
)

// safeID returns id when it is a valid batch id, else "" (a rejection then
// falls back to the message key). It keeps garbage out of event keys.
func safeID(id string) string {
	if ValidBatchID(id) != nil {
		return ""
	}
	return id
}

// idList lists the first n of ids for an error, quoted when they are
// string ids.
func idList(ids []string, n int, quote bool) string {
	var b strings.Builder
	for i, x := range ids {
		if i == n {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if quote {
			b.WriteString(strconv.Quote(truncate(x, 64)))
		} else {
			b.WriteString(x)
		}
	}
	return b.String()
}

// truncate shortens s to at most n bytes, not splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
