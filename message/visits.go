package message

// Output "visits" requests: the fields, their validation and the queries
// (docs/reference/messages.md, "Visit counts").

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/walkstage/walkstage/walk/visits"
)

// MaxQueryIDLen bounds a query id, which is stored in every output row.
const MaxQueryIDLen = 256

// checkOutput validates "output" and the fields that belong to output
// "visits", and sets r.Output and r.Visits (without the queries).
func (d *decoder) checkOutput(m *requestV1, r *Request) error {
	switch m.Output {
	case "", OutputWalks:
		r.Output = OutputWalks
	case OutputVisits:
		r.Output = OutputVisits
	default:
		return d.reject(ReasonInvalidParameters, "output %q is not %q or %q", truncate(m.Output, 32), OutputWalks, OutputVisits)
	}
	if r.Output == OutputWalks {
		for name, set := range map[string]bool{"top_k": m.TopK != nil, "steps_per_query": m.StepsPerQuery != nil,
			"n_p": m.NP != nil, "n_v": m.NV != nil, "exclude_seeds": m.ExcludeSeeds != nil,
			"exclude_neighbors": m.ExcludeNeighbors != nil, "min_visits": m.MinVisits != nil, "queries": m.Queries != nil} {
			if set {
				return d.reject(ReasonInvalidParameters, "%s is only for \"output\": \"visits\"", name)
			}
		}
		return nil
	}
	v := &VisitSpec{}
	p := &v.Params
	if m.TopK == nil {
		return d.reject(ReasonInvalidParameters, "top_k is required with \"output\": \"visits\"")
	}
	p.TopK = *m.TopK
	if p.TopK < 1 {
		return d.reject(ReasonInvalidParameters, "top_k %d must be at least 1", p.TopK)
	}
	if d.lim.MaxTopK > 0 && p.TopK > d.lim.MaxTopK {
		return d.reject(ReasonTooLarge, "top_k %d exceeds the limit %d", p.TopK, d.lim.MaxTopK)
	}
	switch {
	case m.StepsPerQuery != nil && m.WalksPerSeed != nil:
		return d.reject(ReasonInvalidParameters, "give steps_per_query or walks_per_seed, not both")
	case m.StepsPerQuery == nil && m.WalksPerSeed == nil:
		return d.reject(ReasonInvalidParameters, "steps_per_query or walks_per_seed is required with \"output\": \"visits\"")
	case m.StepsPerQuery != nil:
		p.StepsPerQuery = *m.StepsPerQuery
		if p.StepsPerQuery < 1 {
			return d.reject(ReasonInvalidParameters, "steps_per_query %d must be at least 1", p.StepsPerQuery)
		}
		if d.lim.MaxStepsPerQuery > 0 && p.StepsPerQuery > d.lim.MaxStepsPerQuery {
			return d.reject(ReasonTooLarge, "steps_per_query %d exceeds the limit %d", p.StepsPerQuery, d.lim.MaxStepsPerQuery)
		}
	default:
		p.WalksPerSeed = r.WalksPerSeed // checked against its limits already
	}
	switch {
	case (m.NP == nil) != (m.NV == nil):
		return d.reject(ReasonInvalidParameters, "early stopping needs both n_p and n_v")
	case m.NP != nil && (*m.NP < 1 || *m.NV < 1):
		return d.reject(ReasonInvalidParameters, "n_p %d and n_v %d must be at least 1", *m.NP, *m.NV)
	case m.NP != nil:
		p.NP, p.NV = *m.NP, *m.NV
	}
	p.MinVisits = 1
	if m.MinVisits != nil {
		if p.MinVisits = *m.MinVisits; p.MinVisits < 1 {
			return d.reject(ReasonInvalidParameters, "min_visits %d must be at least 1", p.MinVisits)
		}
	}
	p.ExcludeSeeds = m.ExcludeSeeds != nil && *m.ExcludeSeeds
	p.ExcludeNeighbors = m.ExcludeNeighbors != nil && *m.ExcludeNeighbors
	r.Visits = v
	return nil
}

// resolveQueries checks "queries" (output visits only, instead of seeds or
// seed_range) and maps their seeds to dense ids. Under SkipUnknown an
// unknown seed is removed from its query with its weight, and a query left
// without seeds is left out.
func (d *decoder) resolveQueries(m *requestV1, r *Request) error {
	switch {
	case r.Visits == nil:
		return d.reject(ReasonInvalidParameters, "queries is only for \"output\": \"visits\"")
	case m.Seeds != nil || m.SeedRange != nil:
		return d.reject(ReasonInvalidParameters, "give queries, seeds or seed_range: one of them")
	case len(m.Queries) == 0:
		return d.reject(ReasonInvalidParameters, "queries must not be empty")
	}
	total := 0
	for _, q := range m.Queries {
		total += q.Seeds.len()
	}
	if d.lim.MaxSeeds > 0 && total > d.lim.MaxSeeds {
		return d.reject(ReasonTooLarge, "%d seeds in queries exceed the limit %d", total, d.lim.MaxSeeds)
	}
	if w := r.Visits.Params.WalksPerSeed; d.lim.MaxWalksPerBatch > 0 && int64(total)*int64(w) > int64(d.lim.MaxWalksPerBatch) {
		return d.reject(ReasonTooLarge, "%d seeds x %d walks_per_seed exceed the limit %d walks", total, w, d.lim.MaxWalksPerBatch)
	}
	ids := make(map[string]bool, len(m.Queries))
	var unknown []string
	unknownCount := 0
	strs := d.stringIDs()
	for k, q := range m.Queries {
		switch {
		case q.ID == "":
			return d.reject(ReasonInvalidParameters, "queries[%d].id is required (a non-empty string)", k)
		case len(q.ID) > MaxQueryIDLen:
			return d.reject(ReasonInvalidParameters, "queries[%d].id is %d bytes, limit %d", k, len(q.ID), MaxQueryIDLen)
		case !utf8.ValidString(q.ID):
			return d.reject(ReasonInvalidParameters, "queries[%d].id is not UTF-8", k)
		case ids[q.ID]:
			return d.reject(ReasonInvalidParameters, "queries[%d].id %q is given twice", k, truncate(q.ID, 64))
		case q.Seeds.len() == 0:
			return d.reject(ReasonInvalidParameters, "queries[%d].seeds must not be empty", k)
		case q.Weights != nil && len(q.Weights) != q.Seeds.len():
			return d.reject(ReasonInvalidParameters, "queries[%d] has %d weights for %d seeds", k, len(q.Weights), q.Seeds.len())
		case q.Weights != nil && r.Visits.Params.WalksPerSeed > 0:
			return d.reject(ReasonInvalidParameters, "queries[%d].weights split steps_per_query; with walks_per_seed every seed walks the same", k)
		}
		ids[q.ID] = true
		for i, w := range q.Weights {
			if !(w > 0) || math.IsInf(w, 0) {
				return d.reject(ReasonInvalidParameters, "queries[%d].weights[%d] = %v must be positive", k, i, w)
			}
		}
		vq := visits.VisitQuery{}
		var weights []float64
		var known []int64     // external ids of the seeds kept
		var knownStr []string // the same, for string ids
		i := -1
		err := d.eachSeed(q.Seeds, fmt.Sprintf("queries[%d].seeds", k), func(s seedRef) {
			i++
			if !s.known {
				unknownCount++
				if len(unknown) < maxSkippedIDs {
					unknown = append(unknown, s.id(strs))
				}
				return
			}
			vq.Starts = append(vq.Starts, s.dense)
			if strs {
				knownStr = append(knownStr, s.str)
				r.StringSeeds = append(r.StringSeeds, s.str)
			} else {
				known = append(known, s.ext)
				r.Seeds = append(r.Seeds, s.ext)
			}
			r.Starts = append(r.Starts, s.dense)
			if q.Weights != nil {
				weights = append(weights, q.Weights[i])
			}
		})
		if err != nil {
			return err
		}
		if len(vq.Starts) == 0 {
			continue
		}
		vq.Weights = weights
		r.Visits.QueryIDs = append(r.Visits.QueryIDs, q.ID)
		r.Visits.Queries = append(r.Visits.Queries, vq)
		if strs {
			r.Visits.QueryStringSeeds = append(r.Visits.QueryStringSeeds, knownStr)
		} else {
			r.Visits.QuerySeeds = append(r.Visits.QuerySeeds, known)
		}
	}
	if unknownCount > 0 {
		if !d.lim.SkipUnknown {
			return d.reject(ReasonUnknownVertices, "%d of %d seeds are not in the graph, e.g. %s", unknownCount, total, idList(unknown, 10, strs))
		}
		r.Skipped, r.SkippedIDs = unknownCount, unknown
		if len(r.Starts) == 0 {
			return d.reject(ReasonUnknownVertices, "none of the %d seeds is in the graph, e.g. %s", total, idList(unknown, 10, strs))
		}
	}
	return nil
}

// dense maps an external id to a dense one (g nil: external id = dense id).
func (d *decoder) dense(ext int64) (uint32, bool) {
	if d.lim.Vertices != nil {
		return d.lim.Vertices.DenseID(ext)
	}
	if d.g != nil {
		return d.g.DenseID(ext)
	}
	return uint32(ext), ext >= 0 && ext <= math.MaxUint32-1
}

// parseQueries reads "queries": an array of {"id", "seeds", "weights"}
// objects with exact member names (the whole message has been checked for
// nulls and duplicate names already).
func parseQueries(raw []byte) ([]queryV1, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	out := make([]queryV1, len(elems))
	for k, e := range elems {
		path := fmt.Sprintf("queries[%d]", k)
		fields, err := objectFields(e, path)
		if errors.Is(err, errNotObject) {
			return nil, fmt.Errorf("%s is not an object", path)
		}
		if err != nil {
			return nil, err
		}
		q := &out[k]
		for _, f := range fields {
			var err error
			switch f.name {
			case "id":
				err = json.Unmarshal(f.raw, &q.ID)
			case "seeds":
				q.Seeds, err = parseSeeds(f.raw)
			case "weights":
				err = json.Unmarshal(f.raw, &q.Weights)
				if err == nil && q.Weights == nil {
					q.Weights = []float64{}
				}
			default:
				return nil, unknownField(path+"."+f.name, map[string]bool{path + ".id": true, path + ".seeds": true, path + ".weights": true})
			}
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", path, f.name, err)
			}
		}
	}
	return out, nil
}
