// Package source turns Kafka messages into validated walk requests and
// carries walkstage's side of the wire: the request decoder (versioned,
// strict JSON), the completion event, the dead-letter copy of rejected
// messages, and the consumer-group reader that commits offsets in order per
// partition. It is the only package that knows offsets exist: the stage gets
// each request with an acknowledgement (Delivery.Commit) and calls it once
// the batch's output is durable.
package source

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
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
	MaxWalksPerBatch int // seeds x walks_per_seed
	// SkipUnknown walks the known seeds and counts the rest instead of
	// rejecting a request that names vertices the graph lacks.
	SkipUnknown bool
}

// DefaultLimits match the stage's configuration defaults.
func DefaultLimits() Limits {
	return Limits{MaxMessageBytes: 4 << 20, MaxSeeds: 100_000, MaxWalkLength: 1000, MaxWalksPerSeed: 100,
		MaxWalksPerBatch: 10_000_000}
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
	// removed when skipping; Starts are their dense ids.
	Seeds  []int64
	Starts []uint32
	// Skipped counts seeds the graph lacks (SkipUnknown); SkippedIDs lists
	// the first few for the completion event.
	Skipped    int
	SkippedIDs []int64
	// RNGSeed keys the Philox stream. When the request gives none it is the
	// FNV-64a hash of the batch id, so a redelivered batch walks the same walks.
	RNGSeed        uint64
	RNGSeedDerived bool
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
	return walk.Job{Tag: tag, Algorithm: r.Algorithm, Seed: r.RNGSeed, Starts: starts}
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
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("batch_id %q has character %q; allowed: A-Z a-z 0-9 . _ -", truncate(id, 64), c)
		}
	}
	return nil
}

// requestV1 is the wire form of version 1 (docs/messages.md). Pointers
// distinguish "absent" (take the default) from zero (validate it).
type requestV1 struct {
	Version      int       `json:"version"`
	BatchID      string    `json:"batch_id"`
	Graph        string    `json:"graph"`
	GraphVersion string    `json:"graph_version"`
	Algorithm    string    `json:"algorithm"`
	Length       *int      `json:"length"`
	WalksPerSeed *int      `json:"walks_per_seed"`
	Weighted     bool      `json:"weighted"`
	P            *float64  `json:"p"`
	Q            *float64  `json:"q"`
	StopProb     *float64  `json:"stop_probability"`
	Schema       []int     `json:"schema"`
	Sampler      string    `json:"sampler"`
	Seeds        []int64   `json:"seeds"`
	SeedRange    *seedSpan `json:"seed_range"`
	RNGSeed      *uint64   `json:"rng_seed"`
}

type seedSpan struct {
	First int64 `json:"first"`
	Count int64 `json:"count"`
}

// Defaults applied when a field is absent.
const (
	DefaultWalksPerSeed = 1
	DefaultStopProb     = 0.15
	DefaultPQ           = 1.0
	maxSkippedIDs       = 100
)

// DecodeRequest parses and validates one request message against g and lim.
// key is the message key: when present it must equal batch_id. Every
// failure is a *RejectError.
func DecodeRequest(key, value []byte, g *graph.Graph, lim Limits) (*Request, error) {
	keyID := string(key)
	rej := func(r Reason, id string, format string, a ...any) (*Request, error) {
		if id == "" {
			id = keyID
		}
		return nil, &RejectError{Reason: r, BatchID: id, Msg: fmt.Sprintf(format, a...)}
	}
	if lim.MaxMessageBytes > 0 && len(value) > lim.MaxMessageBytes {
		return rej(ReasonTooLarge, "", "message is %d bytes, limit %d", len(value), lim.MaxMessageBytes)
	}
	// Read the version leniently first, so a future version gets
	// "unsupported version" rather than "unknown field".
	var head struct {
		Version *int   `json:"version"`
		BatchID string `json:"batch_id"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return rej(ReasonMalformed, "", "not a JSON object: %v", err)
	}
	if head.Version == nil {
		return rej(ReasonUnsupportedVersion, safeID(head.BatchID), "version is required (this build reads version %d)", RequestVersion)
	}
	if *head.Version != RequestVersion {
		return rej(ReasonUnsupportedVersion, safeID(head.BatchID), "version %d is not supported (this build reads version %d)", *head.Version, RequestVersion)
	}
	var m requestV1
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return rej(ReasonMalformed, safeID(head.BatchID), "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return rej(ReasonMalformed, safeID(head.BatchID), "trailing data after the JSON object")
	}
	if err := ValidBatchID(m.BatchID); err != nil {
		return rej(ReasonInvalidBatchID, safeID(m.BatchID), "%v", err)
	}
	id := m.BatchID
	if keyID != "" && keyID != id {
		return rej(ReasonInvalidBatchID, id, "message key %q differs from batch_id %q", truncate(keyID, 64), id)
	}
	if m.Graph != "" && g != nil && m.Graph != g.Name {
		return rej(ReasonGraphMismatch, id, "request is for graph %q, this stage serves %q", truncate(m.Graph, 64), g.Name)
	}

	if v := m.GraphVersion; v != "" && (len(v) != 16 || strings.Trim(v, "0123456789abcdef") != "") {
		return rej(ReasonInvalidParameters, id, "graph_version %q is not a graph version (16 lowercase hex digits)", truncate(v, 64))
	}
	r := &Request{BatchID: id, Graph: m.Graph, GraphVersion: m.GraphVersion, WalksPerSeed: DefaultWalksPerSeed}
	if m.Algorithm == "" {
		return rej(ReasonInvalidParameters, id, "algorithm is required (deepwalk, ppr, node2vec or metapath)")
	}
	kind, err := walk.ParseKind(m.Algorithm)
	if err != nil {
		return rej(ReasonInvalidParameters, id, "%v", err)
	}
	// An absent length takes the default, clipped to the deployment's limit:
	// a request that did not ask for long walks is not rejected for them.
	a := walk.Algorithm{Kind: kind, Length: walk.DefaultLength, Weighted: m.Weighted}
	if lim.MaxWalkLength > 0 {
		a.Length = min(a.Length, lim.MaxWalkLength)
	}
	if m.Length != nil {
		a.Length = *m.Length
	}
	if a.Length < 1 {
		return rej(ReasonInvalidParameters, id, "length %d must be at least 1", a.Length)
	}
	if lim.MaxWalkLength > 0 && a.Length > lim.MaxWalkLength {
		return rej(ReasonTooLarge, id, "length %d exceeds the limit %d", a.Length, lim.MaxWalkLength)
	}
	if m.WalksPerSeed != nil {
		r.WalksPerSeed = *m.WalksPerSeed
	}
	if r.WalksPerSeed < 1 {
		return rej(ReasonInvalidParameters, id, "walks_per_seed %d must be at least 1", r.WalksPerSeed)
	}
	if lim.MaxWalksPerSeed > 0 && r.WalksPerSeed > lim.MaxWalksPerSeed {
		return rej(ReasonTooLarge, id, "walks_per_seed %d exceeds the limit %d", r.WalksPerSeed, lim.MaxWalksPerSeed)
	}
	// Parameters that belong to another algorithm are an error, not
	// silently ignored: a typo'd algorithm name should not pass.
	switch kind {
	case walk.PPR:
		a.StopProb = DefaultStopProb
		if m.StopProb != nil {
			a.StopProb = *m.StopProb
		}
	case walk.Node2Vec:
		a.P, a.Q = DefaultPQ, DefaultPQ
		if m.P != nil {
			a.P = *m.P
		}
		if m.Q != nil {
			a.Q = *m.Q
		}
	}
	if kind != walk.PPR && m.StopProb != nil {
		return rej(ReasonInvalidParameters, id, "stop_probability is only for ppr, not %s", kind)
	}
	if kind != walk.Node2Vec && (m.P != nil || m.Q != nil) {
		return rej(ReasonInvalidParameters, id, "p and q are only for node2vec, not %s", kind)
	}
	if len(m.Schema) > walk.MaxSchemaLen {
		return rej(ReasonInvalidParameters, id, "schema has %d labels, limit %d", len(m.Schema), walk.MaxSchemaLen)
	}
	for i, l := range m.Schema {
		if l < 0 || l > math.MaxUint8 {
			return rej(ReasonInvalidParameters, id, "schema[%d] = %d is not a label (0..255)", i, l)
		}
		a.Schema = append(a.Schema, uint8(l))
	}
	if m.Sampler != "" {
		if a.Sampler, err = walk.ParseSampler(m.Sampler); err != nil {
			return rej(ReasonInvalidParameters, id, "%v", err)
		}
	}
	if err := a.Validate(g); err != nil {
		return rej(ReasonInvalidParameters, id, "%v", err)
	}
	r.Algorithm = a

	if m.RNGSeed != nil {
		r.RNGSeed = *m.RNGSeed
	} else {
		r.RNGSeed, r.RNGSeedDerived = DeriveSeed(id), true
	}

	// Seeds: a list or a range of external ids, not both.
	switch {
	case m.SeedRange != nil && m.Seeds != nil:
		return rej(ReasonInvalidParameters, id, "give seeds or seed_range, not both")
	case m.SeedRange == nil && len(m.Seeds) == 0:
		return rej(ReasonInvalidParameters, id, "seeds (a non-empty list) or seed_range is required")
	}
	var n int64
	if m.SeedRange != nil {
		sr := *m.SeedRange
		if sr.Count < 1 {
			return rej(ReasonInvalidParameters, id, "seed_range.count %d must be at least 1", sr.Count)
		}
		if sr.First > math.MaxInt64-sr.Count+1 {
			return rej(ReasonInvalidParameters, id, "seed_range overflows int64")
		}
		n = sr.Count
	} else {
		n = int64(len(m.Seeds))
	}
	if lim.MaxSeeds > 0 && n > int64(lim.MaxSeeds) {
		return rej(ReasonTooLarge, id, "%d seeds exceed the limit %d", n, lim.MaxSeeds)
	}
	if lim.MaxWalksPerBatch > 0 && n*int64(r.WalksPerSeed) > int64(lim.MaxWalksPerBatch) {
		return rej(ReasonTooLarge, id, "%d seeds x %d walks_per_seed = %d walks exceed the limit %d",
			n, r.WalksPerSeed, n*int64(r.WalksPerSeed), lim.MaxWalksPerBatch)
	}
	seedAt := func(i int64) int64 {
		if m.SeedRange != nil {
			return m.SeedRange.First + i
		}
		return m.Seeds[i]
	}
	r.Seeds = make([]int64, 0, n)
	r.Starts = make([]uint32, 0, n)
	var unknown []int64
	unknownCount := 0
	for i := range n {
		ext := seedAt(i)
		if g == nil {
			if ext < 0 || ext > math.MaxUint32-1 {
				unknownCount++
				if len(unknown) < maxSkippedIDs {
					unknown = append(unknown, ext)
				}
				continue
			}
			r.Seeds, r.Starts = append(r.Seeds, ext), append(r.Starts, uint32(ext))
			continue
		}
		v, ok := g.DenseID(ext)
		if !ok {
			unknownCount++
			if len(unknown) < maxSkippedIDs {
				unknown = append(unknown, ext)
			}
			continue
		}
		r.Seeds, r.Starts = append(r.Seeds, ext), append(r.Starts, v)
	}
	if unknownCount > 0 {
		if !lim.SkipUnknown {
			return rej(ReasonUnknownVertices, id, "%d of %d seeds are not in the graph, e.g. %s",
				unknownCount, n, idList(unknown, 10))
		}
		r.Skipped, r.SkippedIDs = unknownCount, unknown
		if len(r.Starts) == 0 {
			return rej(ReasonUnknownVertices, id, "none of the %d seeds is in the graph, e.g. %s", n, idList(unknown, 10))
		}
	}
	return r, nil
}

// safeID returns id when it is a valid batch id, else "" (a rejection then
// falls back to the message key). It keeps garbage out of event keys.
func safeID(id string) string {
	if ValidBatchID(id) != nil {
		return ""
	}
	return id
}

func idList(ids []int64, n int) string {
	var b strings.Builder
	for i, x := range ids {
		if i == n {
			b.WriteString(" ...")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
