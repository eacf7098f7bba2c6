// Package source turns Kafka messages into validated walk requests and
// carries walkstage's side of the wire: the request decoder (versioned,
// strict JSON), the completion event, the dead-letter copy of rejected
// messages, and the consumer-group reader that commits offsets in order per
// partition. It is the only package that knows offsets exist: the stage gets
// each request with an acknowledgement (Delivery.Commit) and calls it once
// the batch's output is durable.
package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

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
	MaxWalksPerBatch int   // seeds x walks_per_seed
	MaxTopK          int   // top_k of an output "visits" request
	MaxStepsPerQuery int64 // steps_per_query of an output "visits" request
	MaxStepsPerBatch int64 // queries x steps_per_query of an output "visits" request
	// Sampling requests (source/sample.go): the largest fan-out or layer
	// size, max_vertices (also its value when absent), and the most edges
	// one request may sample (instances x the most edges an instance can).
	MaxFanout         int
	MaxSampleVertices int
	MaxSampledEdges   int64
	// SkipUnknown walks the known seeds and counts the rest instead of
	// rejecting a request that names vertices the graph lacks.
	SkipUnknown bool
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
	// Output is OutputWalks or OutputVisits; Visits is set for the latter.
	Output string
	Visits *VisitSpec
	// Sample is set for the sampling algorithms (output "samples",
	// source/sample.go); Algorithm is then the zero value.
	Sample *SampleSpec
}

// Output kinds of a request.
const (
	OutputWalks  = "walks"  // one Parquet row per walk (the default)
	OutputVisits = "visits" // one Parquet row per query: its top-k visited vertices
)

// VisitSpec is what an output "visits" request asks for: the counting
// parameters (walk.VisitParams, with the request's algorithm and RNG seed)
// and the queries, each with its id. Seeds of a request without "queries"
// are one query each, named by their external id.
type VisitSpec struct {
	Params   walk.VisitParams
	QueryIDs []string
	Queries  []walk.VisitQuery
	// QuerySeeds are each query's seeds as external ids (Queries[q].Starts
	// are their dense ids in the graph the request was decoded against).
	QuerySeeds [][]int64
}

// NumQueries is the number of queries of an output "visits" request, 0 for
// walks.
func (r *Request) NumQueries() int {
	if r.Visits == nil {
		return 0
	}
	return len(r.Visits.Queries)
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

// requestV1 is the wire form of version 1 (docs/messages.md), filled member
// by member through v1Fields. Pointers distinguish "absent" (take the
// default) from zero (validate it).
type requestV1 struct {
	BatchID      string
	Graph        string
	GraphVersion string
	Algorithm    string
	Length       *int
	WalksPerSeed *int
	Weighted     bool
	P            *float64
	Q            *float64
	StopProb     *float64
	Schema       []int
	Sampler      string
	Seeds        []int64
	SeedRange    *seedSpan
	RNGSeed      *uint64
	// Output "visits" (docs/messages.md).
	Output           string
	TopK             *int
	StepsPerQuery    *int64
	NP, NV           *int64
	ExcludeSeeds     *bool
	ExcludeNeighbors *bool
	MinVisits        *int64
	Queries          []queryV1
	// Sampling algorithms (source/sample.go).
	Fanouts          []int
	Replace          *bool
	LayerSizes       []int
	BurnProb         *float64
	Depth            *int
	MaxVertices      *int
	FrontierSize     *int
	Samples          *int
	InstancesPerSeed *int
	EdgeWeight       *bool
}

// queryV1 is one member of "queries".
type queryV1 struct {
	ID      string
	Seeds   []int64
	Weights []float64
}

type seedSpan struct {
	First int64
	Count int64
}

// v1Fields reads each member of a version 1 request, by its exact name:
// names match case-sensitively, unlike encoding/json's struct fields, so
// "Seeds" is an unknown field rather than a second "seeds".
var v1Fields = map[string]func(m *requestV1, raw []byte) error{
	"version":          func(*requestV1, []byte) error { return nil }, // read first, by readVersion
	"batch_id":         func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.BatchID) },
	"graph":            func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Graph) },
	"graph_version":    func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.GraphVersion) },
	"algorithm":        func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Algorithm) },
	"length":           func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Length) },
	"walks_per_seed":   func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.WalksPerSeed) },
	"weighted":         func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Weighted) },
	"p":                func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.P) },
	"q":                func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Q) },
	"stop_probability": func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.StopProb) },
	"schema":           func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Schema) },
	"sampler":          func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Sampler) },
	"seeds": func(m *requestV1, raw []byte) (err error) {
		m.Seeds, err = parseInt64Array(raw)
		return err
	},
	"seed_range": func(m *requestV1, raw []byte) (err error) {
		m.SeedRange, err = parseSeedSpan(raw)
		return err
	},
	"rng_seed": func(m *requestV1, raw []byte) error {
		s, err := ParseRNGSeed(raw)
		m.RNGSeed = &s
		return err
	},
	"output":            func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Output) },
	"top_k":             func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.TopK) },
	"steps_per_query":   func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.StepsPerQuery) },
	"n_p":               func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.NP) },
	"n_v":               func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.NV) },
	"exclude_seeds":     func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.ExcludeSeeds) },
	"exclude_neighbors": func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.ExcludeNeighbors) },
	"min_visits":        func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.MinVisits) },
	"queries": func(m *requestV1, raw []byte) (err error) {
		m.Queries, err = parseQueries(raw)
		return err
	},
	"fanouts":            func(m *requestV1, raw []byte) error { return unmarshalList(raw, &m.Fanouts) },
	"replace":            func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Replace) },
	"layer_sizes":        func(m *requestV1, raw []byte) error { return unmarshalList(raw, &m.LayerSizes) },
	"burn_probability":   func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.BurnProb) },
	"depth":              func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Depth) },
	"max_vertices":       func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.MaxVertices) },
	"frontier_size":      func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.FrontierSize) },
	"samples":            func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Samples) },
	"instances_per_seed": func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.InstancesPerSeed) },
	"edge_weight":        func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.EdgeWeight) },
}

// unmarshalList reads a JSON array of ints; an empty array is an empty,
// non-nil list (so "given but empty" is told from "absent").
func unmarshalList(raw []byte, dst *[]int) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return err
	}
	if *dst == nil {
		*dst = []int{}
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

// DecodeRequest parses and validates one request message against g and lim.
// key is the message key: when present it must equal batch_id. Every
// failure is a *RejectError.
//
// Decoding is exact where encoding/json is lenient: a null (as a member or
// an array element), a member name in another case and a name given twice
// in one object are malformed, each with a message naming the field.
func DecodeRequest(key, value []byte, g *graph.Graph, lim Limits) (*Request, error) {
	d := &decoder{keyID: string(key), g: g, lim: lim}
	m, err := d.decodeV1(value)
	if err != nil {
		return nil, err
	}
	if err := d.checkIdentity(m); err != nil {
		return nil, err
	}
	r := &Request{BatchID: d.id, Graph: m.Graph, GraphVersion: m.GraphVersion}
	if m.RNGSeed != nil {
		r.RNGSeed = *m.RNGSeed
	} else {
		r.RNGSeed, r.RNGSeedDerived = DeriveSeed(d.id), true
	}
	if kind, ok := walk.ParseSampleKind(m.Algorithm); ok {
		if err := d.checkSample(m, r, kind); err != nil {
			return nil, err
		}
		if err := d.resolveSeeds(m, r); err != nil {
			return nil, err
		}
		if err := d.checkSampleSize(r); err != nil {
			return nil, err
		}
		return r, nil
	}
	if err := d.checkAlgorithm(m, r); err != nil {
		return nil, err
	}
	if err := d.checkNoSampleFields(m); err != nil {
		return nil, err
	}
	if err := d.checkOutput(m, r); err != nil {
		return nil, err
	}
	if m.Queries != nil {
		if err := d.resolveQueries(m, r); err != nil {
			return nil, err
		}
	} else if err := d.resolveSeeds(m, r); err != nil {
		return nil, err
	}
	if r.Visits != nil {
		r.Visits.Params.Algorithm, r.Visits.Params.Seed = r.Algorithm, r.RNGSeed
		if m.Queries == nil { // each seed its own query
			for i, s := range r.Starts {
				r.Visits.QueryIDs = append(r.Visits.QueryIDs, strconv.FormatInt(r.Seeds[i], 10))
				r.Visits.QuerySeeds = append(r.Visits.QuerySeeds, []int64{r.Seeds[i]})
				r.Visits.Queries = append(r.Visits.Queries, walk.VisitQuery{Starts: []uint32{s}})
			}
		}
		if n, per := int64(len(r.Visits.Queries)), r.Visits.Params.StepsPerQuery; d.lim.MaxStepsPerBatch > 0 && per > 0 &&
			n > d.lim.MaxStepsPerBatch/per {
			return nil, d.reject(ReasonTooLarge, "%d queries x %d steps_per_query exceed the limit %d steps", n, per, d.lim.MaxStepsPerBatch)
		}
		if err := r.Visits.Params.Validate(d.g, r.Visits.Queries); err != nil {
			return nil, d.reject(ReasonInvalidParameters, "%v", err)
		}
	}
	return r, nil
}

// decoder holds what every validation step of DecodeRequest needs to
// reject a request: the key and the batch id as far as it has been read.
type decoder struct {
	keyID string
	id    string // a valid batch id once read; rejections fall back to keyID
	g     *graph.Graph
	lim   Limits
}

func (d *decoder) reject(r Reason, format string, a ...any) error {
	id := d.id
	if id == "" {
		id = d.keyID
	}
	return &RejectError{Reason: r, BatchID: id, Msg: fmt.Sprintf(format, a...)}
}

// decodeV1 checks the message's size, JSON and version, and reads its
// members into a requestV1 (types, exact names, no nulls, no duplicates).
func (d *decoder) decodeV1(value []byte) (*requestV1, error) {
	if d.lim.MaxMessageBytes > 0 && len(value) > d.lim.MaxMessageBytes {
		return nil, d.reject(ReasonTooLarge, "message is %d bytes, limit %d", len(value), d.lim.MaxMessageBytes)
	}
	if !json.Valid(value) {
		// Valid says only "no"; Unmarshal says where and why.
		err := json.Unmarshal(value, new(struct{}))
		return nil, d.reject(ReasonMalformed, "not a JSON object: %v", err)
	}
	fields, err := objectFields(value, "")
	if err != nil {
		return nil, d.reject(ReasonMalformed, "%v", err)
	}
	// The batch id, when readable and valid, names the rejections below.
	if raw := fieldRaw(fields, "batch_id"); raw != nil {
		var id string
		if json.Unmarshal(raw, &id) == nil {
			d.id = safeID(id)
		}
	}
	// The version comes before the other names, so a future version gets
	// "unsupported version" rather than "unknown field".
	if err := d.readVersion(fields); err != nil {
		return nil, err
	}
	m := new(requestV1)
	for _, f := range fields {
		set, ok := v1Fields[f.name]
		if !ok {
			return nil, d.reject(ReasonMalformed, "%v", unknownField(f.name, v1Fields))
		}
		if err := set(m, f.raw); err != nil {
			return nil, d.reject(ReasonMalformed, "%s: %v", f.name, err)
		}
	}
	return m, nil
}

func (d *decoder) readVersion(fields []jsonField) error {
	raw := fieldRaw(fields, "version")
	if raw == nil {
		for _, f := range fields {
			if strings.EqualFold(f.name, "version") {
				return d.reject(ReasonMalformed, "%v", unknownField(f.name, v1Fields))
			}
		}
		return d.reject(ReasonUnsupportedVersion, "version is required (this build reads version %d)", RequestVersion)
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil {
		return d.reject(ReasonMalformed, "version: %v", err)
	}
	if v != RequestVersion {
		return d.reject(ReasonUnsupportedVersion, "version %d is not supported (this build reads version %d)", v, RequestVersion)
	}
	return nil
}

// checkIdentity validates batch_id, its agreement with the message key and
// the graph the request is meant for.
func (d *decoder) checkIdentity(m *requestV1) error {
	if err := ValidBatchID(m.BatchID); err != nil {
		return d.reject(ReasonInvalidBatchID, "%v", err)
	}
	d.id = m.BatchID
	if d.keyID != "" && d.keyID != d.id {
		return d.reject(ReasonInvalidBatchID, "message key %q differs from batch_id %q", truncate(d.keyID, 64), d.id)
	}
	if m.Graph != "" && d.g != nil && m.Graph != d.g.Name {
		return d.reject(ReasonGraphMismatch, "request is for graph %q, this stage serves %q", truncate(m.Graph, 64), d.g.Name)
	}
	if v := m.GraphVersion; v != "" && (len(v) != 16 || strings.Trim(v, "0123456789abcdef") != "") {
		return d.reject(ReasonInvalidParameters, "graph_version %q is not a graph version (16 lowercase hex digits)", truncate(v, 64))
	}
	return nil
}

// checkAlgorithm validates the algorithm and its parameters, the length and
// walks_per_seed, and sets r.Algorithm and r.WalksPerSeed.
func (d *decoder) checkAlgorithm(m *requestV1, r *Request) error {
	if m.Algorithm == "" {
		return d.reject(ReasonInvalidParameters, "algorithm is required (deepwalk, ppr, node2vec, metapath; samplers neighbor, layer, forest_fire, snowball, frontier)")
	}
	kind, err := walk.ParseKind(m.Algorithm)
	if err != nil {
		return d.reject(ReasonInvalidParameters, "%v", err)
	}
	// An absent length takes the default, clipped to the deployment's limit:
	// a request that did not ask for long walks is not rejected for them.
	a := walk.Algorithm{Kind: kind, Length: walk.DefaultLength, Weighted: m.Weighted}
	if d.lim.MaxWalkLength > 0 {
		a.Length = min(a.Length, d.lim.MaxWalkLength)
	}
	if m.Length != nil {
		a.Length = *m.Length
	}
	if a.Length < 1 {
		return d.reject(ReasonInvalidParameters, "length %d must be at least 1", a.Length)
	}
	if d.lim.MaxWalkLength > 0 && a.Length > d.lim.MaxWalkLength {
		return d.reject(ReasonTooLarge, "length %d exceeds the limit %d", a.Length, d.lim.MaxWalkLength)
	}
	r.WalksPerSeed = DefaultWalksPerSeed
	if m.WalksPerSeed != nil {
		r.WalksPerSeed = *m.WalksPerSeed
	}
	if r.WalksPerSeed < 1 {
		return d.reject(ReasonInvalidParameters, "walks_per_seed %d must be at least 1", r.WalksPerSeed)
	}
	if d.lim.MaxWalksPerSeed > 0 && r.WalksPerSeed > d.lim.MaxWalksPerSeed {
		return d.reject(ReasonTooLarge, "walks_per_seed %d exceeds the limit %d", r.WalksPerSeed, d.lim.MaxWalksPerSeed)
	}
	if err := d.algorithmParams(m, &a); err != nil {
		return err
	}
	if err := a.Validate(d.g); err != nil {
		return d.reject(ReasonInvalidParameters, "%v", err)
	}
	r.Algorithm = a
	return nil
}

// algorithmParams sets the parameters of a.Kind (stop probability, p and q,
// schema, sampler). Parameters that belong to another algorithm are an
// error, not silently ignored: a typo'd algorithm name should not pass.
func (d *decoder) algorithmParams(m *requestV1, a *walk.Algorithm) error {
	switch a.Kind {
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
	if a.Kind != walk.PPR && m.StopProb != nil {
		return d.reject(ReasonInvalidParameters, "stop_probability is only for ppr, not %s", a.Kind)
	}
	if a.Kind != walk.Node2Vec && (m.P != nil || m.Q != nil) {
		return d.reject(ReasonInvalidParameters, "p and q are only for node2vec, not %s", a.Kind)
	}
	if len(m.Schema) > walk.MaxSchemaLen {
		return d.reject(ReasonInvalidParameters, "schema has %d labels, limit %d", len(m.Schema), walk.MaxSchemaLen)
	}
	for i, l := range m.Schema {
		if l < 0 || l > math.MaxUint8 {
			return d.reject(ReasonInvalidParameters, "schema[%d] = %d is not a label (0..255)", i, l)
		}
		a.Schema = append(a.Schema, uint8(l))
	}
	if m.Sampler != "" {
		var err error
		if a.Sampler, err = walk.ParseSampler(m.Sampler); err != nil {
			return d.reject(ReasonInvalidParameters, "%v", err)
		}
	}
	return nil
}

// resolveSeeds checks the seed list or range against the limits and maps
// the seeds to dense ids (g nil: external id = dense id), skipping or
// rejecting the unknown ones.
func (d *decoder) resolveSeeds(m *requestV1, r *Request) error {
	switch {
	case m.SeedRange != nil && m.Seeds != nil:
		return d.reject(ReasonInvalidParameters, "give seeds or seed_range, not both")
	case m.SeedRange == nil && len(m.Seeds) == 0:
		return d.reject(ReasonInvalidParameters, "seeds (a non-empty list) or seed_range is required")
	}
	n := int64(len(m.Seeds))
	seedAt := func(i int64) int64 { return m.Seeds[i] }
	if sr := m.SeedRange; sr != nil {
		if sr.Count < 1 {
			return d.reject(ReasonInvalidParameters, "seed_range.count %d must be at least 1", sr.Count)
		}
		if sr.First > math.MaxInt64-sr.Count+1 {
			return d.reject(ReasonInvalidParameters, "seed_range overflows int64")
		}
		n = sr.Count
		seedAt = func(i int64) int64 { return sr.First + i }
	}
	if d.lim.MaxSeeds > 0 && n > int64(d.lim.MaxSeeds) {
		return d.reject(ReasonTooLarge, "%d seeds exceed the limit %d", n, d.lim.MaxSeeds)
	}
	if d.lim.MaxWalksPerBatch > 0 && n*int64(r.WalksPerSeed) > int64(d.lim.MaxWalksPerBatch) {
		return d.reject(ReasonTooLarge, "%d seeds x %d walks_per_seed = %d walks exceed the limit %d",
			n, r.WalksPerSeed, n*int64(r.WalksPerSeed), d.lim.MaxWalksPerBatch)
	}
	dense := func(ext int64) (uint32, bool) {
		if d.g != nil {
			return d.g.DenseID(ext)
		}
		return uint32(ext), ext >= 0 && ext <= math.MaxUint32-1
	}
	r.Seeds = make([]int64, 0, n)
	r.Starts = make([]uint32, 0, n)
	var unknown []int64
	unknownCount := 0
	for i := range n {
		ext := seedAt(i)
		v, ok := dense(ext)
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
		if !d.lim.SkipUnknown {
			return d.reject(ReasonUnknownVertices, "%d of %d seeds are not in the graph, e.g. %s",
				unknownCount, n, idList(unknown, 10))
		}
		r.Skipped, r.SkippedIDs = unknownCount, unknown
		if len(r.Starts) == 0 {
			return d.reject(ReasonUnknownVertices, "none of the %d seeds is in the graph, e.g. %s", n, idList(unknown, 10))
		}
	}
	return nil
}

// ParseRNGSeed reads an rng_seed: a JSON number or a JSON string of decimal
// digits, 0 to 2^64-1 either way. The string form exists because readers
// that hold numbers as doubles (JavaScript, jq 1.6) round integers above
// 2^53; completion events write the seed as a string for the same reason.
func ParseRNGSeed(raw []byte) (uint64, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, fmt.Errorf("%q is not a decimal integer 0..18446744073709551615", truncate(s, 32))
			}
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a decimal integer 0..18446744073709551615", truncate(s, 32))
		}
		return v, nil
	}
	var v uint64
	err := json.Unmarshal(raw, &v)
	return v, err
}

func parseSeedSpan(raw []byte) (*seedSpan, error) {
	fields, err := objectFields(raw, "seed_range")
	if err != nil {
		if errors.Is(err, errNotObject) {
			return nil, json.Unmarshal(raw, new(struct{})) // the type error
		}
		return nil, err
	}
	var sr seedSpan
	dst := map[string]*int64{"first": &sr.First, "count": &sr.Count}
	for _, f := range fields {
		p, ok := dst[f.name]
		if !ok {
			return nil, unknownField("seed_range."+f.name, map[string]*int64{"seed_range.first": nil, "seed_range.count": nil})
		}
		if err := json.Unmarshal(f.raw, p); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return &sr, nil
}

// unknownField names a member that no field matches, pointing to the right
// spelling when only the case differs.
func unknownField[V any](name string, known map[string]V) error {
	for k := range known {
		if strings.EqualFold(k, name) {
			return fmt.Errorf("unknown field %q: field names are case-sensitive, did you mean %q?", name, k)
		}
	}
	return fmt.Errorf("unknown field %q", truncate(name, 64))
}

func fieldRaw(fields []jsonField, name string) []byte {
	for _, f := range fields {
		if f.name == name {
			return f.raw
		}
	}
	return nil
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
