package message

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/visits"
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
	r := &Request{BatchID: d.id, Graph: m.Graph, GraphVersion: m.GraphVersion, EdgeOffsets: m.EdgeOffsets}
	d.deferUnknown = len(m.EdgeOffsets) > 0 && d.lim.Vertices != nil
	if m.RNGSeed != nil {
		r.RNGSeed = *m.RNGSeed
	} else {
		r.RNGSeed, r.RNGSeedDerived = DeriveSeed(d.id), true
	}
	if kind, ok := graphsample.ParseSampleKind(m.Algorithm); ok {
		if err := d.checkSample(m, r, kind); err != nil {
			return nil, err
		}
		if err := d.resolveSeeds(m, r); err != nil {
			return nil, err
		}
		if err := d.checkSampleSize(r); err != nil {
			return nil, err
		}
		r.Unresolved = d.deferred
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
	if m.WithTimes != nil && *m.WithTimes {
		if r.Output != OutputWalks {
			return nil, d.reject(ReasonInvalidParameters, "with_times is only for \"output\": \"walks\"")
		}
		r.WithTimes = true
	}
	if m.Queries != nil {
		if err := d.resolveQueries(m, r); err != nil {
			return nil, err
		}
	} else if err := d.resolveSeeds(m, r); err != nil {
		return nil, err
	}
	r.Unresolved = d.deferred
	if r.Visits != nil {
		r.Visits.Params.Algorithm, r.Visits.Params.Seed = r.Algorithm, r.RNGSeed
		if m.Queries == nil { // each seed its own query
			for i, s := range r.Starts {
				if r.StringSeeds != nil {
					r.Visits.QueryIDs = append(r.Visits.QueryIDs, r.StringSeeds[i])
					r.Visits.QueryStringSeeds = append(r.Visits.QueryStringSeeds, []string{r.StringSeeds[i]})
				} else {
					r.Visits.QueryIDs = append(r.Visits.QueryIDs, strconv.FormatInt(r.Seeds[i], 10))
					r.Visits.QuerySeeds = append(r.Visits.QuerySeeds, []int64{r.Seeds[i]})
				}
				r.Visits.Queries = append(r.Visits.Queries, visits.VisitQuery{Starts: []uint32{s}})
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
	// deferUnknown keeps seeds Limits.Vertices does not know as
	// placeholders (a request with edge_offsets); deferred says some were.
	deferUnknown, deferred bool
}

func (d *decoder) reject(r Reason, format string, a ...any) error {
	id := d.id
	if id == "" {
		// The key may be any size the input topic takes; the id becomes
		// the event's key and a log field.
		id = BoundID(d.keyID)
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
		return d.reject(ReasonInvalidParameters, "algorithm is required (deepwalk, ppr, node2vec, metapath, temporal; samplers neighbor, layer, forest_fire, snowball, frontier)")
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
	case walk.Temporal:
		// p or q makes it temporal Node2Vec; the other defaults to 1.
		if m.P != nil || m.Q != nil {
			a.P, a.Q = DefaultPQ, DefaultPQ
			if m.P != nil {
				a.P = *m.P
			}
			if m.Q != nil {
				a.Q = *m.Q
			}
		}
	}
	if a.Kind != walk.PPR && m.StopProb != nil {
		return d.reject(ReasonInvalidParameters, "stop_probability is only for ppr, not %s", a.Kind)
	}
	if a.Kind != walk.Node2Vec && a.Kind != walk.Temporal && (m.P != nil || m.Q != nil) {
		return d.reject(ReasonInvalidParameters, "p and q are only for node2vec and temporal, not %s", a.Kind)
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
		if a.Stepper, err = walk.ParseStepper(m.Sampler); err != nil {
			return d.reject(ReasonInvalidParameters, "%v", err)
		}
	}
	return d.timeParams(m, a)
}

// timeParams sets a temporal walk's parameters; on any other algorithm
// each of them is an error naming the field.
func (d *decoder) timeParams(m *requestV1, a *walk.Algorithm) error {
	if a.Kind != walk.Temporal {
		for _, f := range []struct {
			name string
			set  bool
		}{{"time_bias", m.TimeBias != ""}, {"time_scale", m.TimeScale != nil}, {"start_time", m.StartTime != nil},
			{"max_time_gap", m.MaxTimeGap != nil}, {"direction", m.Direction != ""}, {"with_times", m.WithTimes != nil}} {
			if f.set {
				return d.reject(ReasonInvalidParameters, "%s is only for temporal, not %s", f.name, a.Kind)
			}
		}
		return nil
	}
	t := &a.Time
	if m.TimeBias != "" {
		var err error
		if t.Bias, err = walk.ParseTimeBias(m.TimeBias); err != nil {
			return d.reject(ReasonInvalidParameters, "%v", err)
		}
	}
	if m.TimeScale != nil {
		t.Scale = *m.TimeScale
	}
	if m.StartTime != nil {
		t.Start, t.HasStart = *m.StartTime, true
	}
	if m.MaxTimeGap != nil {
		t.MaxGap, t.HasMaxGap = *m.MaxTimeGap, true
	}
	switch m.Direction {
	case "", "forward":
	case "backward":
		t.Backward = true
	default:
		return d.reject(ReasonInvalidParameters, "direction %q is not \"forward\" or \"backward\"", truncate(m.Direction, 32))
	}
	return nil
}

// resolveSeeds checks the seed list or range against the limits and maps
// the seeds to dense ids (g nil: external id = dense id), skipping or
// rejecting the unknown ones. A graph with string ids takes a list of
// strings only (eachSeed).
func (d *decoder) resolveSeeds(m *requestV1, r *Request) error {
	switch {
	case m.SeedRange != nil && m.Seeds != nil:
		return d.reject(ReasonInvalidParameters, "give seeds or seed_range, not both")
	case m.SeedRange == nil && m.Seeds.len() == 0:
		return d.reject(ReasonInvalidParameters, "seeds (a non-empty list) or seed_range is required")
	case m.SeedRange != nil && d.stringIDs():
		return d.reject(ReasonInvalidParameters, "seed_range needs integer ids: graph %q has string ids, list them in seeds", d.graphName())
	}
	n := int64(m.Seeds.len())
	sr := m.SeedRange
	if sr != nil {
		if sr.Count < 1 {
			return d.reject(ReasonInvalidParameters, "seed_range.count %d must be at least 1", sr.Count)
		}
		if sr.First > math.MaxInt64-sr.Count+1 {
			return d.reject(ReasonInvalidParameters, "seed_range overflows int64")
		}
		n = sr.Count
	}
	if d.lim.MaxSeeds > 0 && n > int64(d.lim.MaxSeeds) {
		return d.reject(ReasonTooLarge, "%d seeds exceed the limit %d", n, d.lim.MaxSeeds)
	}
	if d.lim.MaxWalksPerBatch > 0 && n*int64(r.WalksPerSeed) > int64(d.lim.MaxWalksPerBatch) {
		return d.reject(ReasonTooLarge, "%d seeds x %d walks_per_seed = %d walks exceed the limit %d",
			n, r.WalksPerSeed, n*int64(r.WalksPerSeed), d.lim.MaxWalksPerBatch)
	}
	strs := d.stringIDs()
	if strs {
		r.StringSeeds = make([]string, 0, n)
	} else {
		r.Seeds = make([]int64, 0, n)
	}
	r.Starts = make([]uint32, 0, n)
	var unknown []string
	unknownCount := 0
	add := func(s seedRef) {
		if !s.known {
			unknownCount++
			if len(unknown) < maxSkippedIDs {
				unknown = append(unknown, s.id(strs))
			}
			return
		}
		if strs {
			r.StringSeeds = append(r.StringSeeds, s.str)
		} else {
			r.Seeds = append(r.Seeds, s.ext)
		}
		r.Starts = append(r.Starts, s.dense)
	}
	if sr != nil {
		for i := range n {
			ext := sr.First + i
			v, ok := d.dense(ext)
			add(seedRef{ext: ext, dense: v, known: ok})
		}
	} else if err := d.eachSeed(m.Seeds, "seeds", add); err != nil {
		return err
	}
	if unknownCount > 0 {
		if !d.lim.SkipUnknown {
			return d.reject(ReasonUnknownVertices, "%d of %d seeds are not in the graph, e.g. %s",
				unknownCount, n, idList(unknown, 10, strs))
		}
		r.Skipped, r.SkippedIDs = unknownCount, unknown
		if len(r.Starts) == 0 {
			return d.reject(ReasonUnknownVertices, "none of the %d seeds is in the graph, e.g. %s", n, idList(unknown, 10, strs))
		}
	}
	return nil
}
