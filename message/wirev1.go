package message

// The wire form of a version 1 request (docs/reference/messages.md) and the readers
// of its members; DecodeRequest (decode.go) validates what they read.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// requestV1 is the wire form of version 1 (docs/reference/messages.md), filled member
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
	// Temporal walks (docs/reference/messages.md).
	TimeBias   string
	TimeScale  *float64
	StartTime  *int64
	MaxTimeGap *int64
	Direction  string
	WithTimes  *bool
	Seeds      *seedsV1
	SeedRange  *seedSpan
	RNGSeed    *uint64
	// Output "visits" (docs/reference/messages.md).
	Output           string
	TopK             *int
	StepsPerQuery    *int64
	NP, NV           *int64
	ExcludeSeeds     *bool
	ExcludeNeighbors *bool
	MinVisits        *int64
	Queries          []queryV1
	// Sampling algorithms (sample.go).
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
	// Read-your-writes on a live graph (docs/reference/messages.md).
	EdgeOffsets map[int32]int64
}

// queryV1 is one member of "queries".
type queryV1 struct {
	ID      string
	Seeds   *seedsV1
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
	"time_bias":        func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.TimeBias) },
	"time_scale":       func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.TimeScale) },
	"start_time":       func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.StartTime) },
	"max_time_gap":     func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.MaxTimeGap) },
	"direction":        func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.Direction) },
	"with_times":       func(m *requestV1, raw []byte) error { return json.Unmarshal(raw, &m.WithTimes) },
	"seeds": func(m *requestV1, raw []byte) (err error) {
		m.Seeds, err = parseSeeds(raw)
		return err
	},
	"seed_range": func(m *requestV1, raw []byte) (err error) {
		m.SeedRange, err = parseSeedSpan(raw)
		return err
	},
	"edge_offsets": func(m *requestV1, raw []byte) (err error) {
		m.EdgeOffsets, err = parseEdgeOffsets(raw)
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

// maxEdgePartitions bounds the partitions edge_offsets may name: a request
// cannot make the stage hold an unbounded map.
const maxEdgePartitions = 4096

// parseEdgeOffsets reads "edge_offsets": an object from partition numbers
// (decimal, as JSON member names are strings) to offsets, both >= 0.
func parseEdgeOffsets(raw []byte) (map[int32]int64, error) {
	var m map[string]int64
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("want an object of partition: offset, e.g. {\"0\": 123}: %w", err)
	}
	if len(m) > maxEdgePartitions {
		return nil, fmt.Errorf("%d partitions, limit %d", len(m), maxEdgePartitions)
	}
	out := make(map[int32]int64, len(m))
	for k, off := range m {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil || p < 0 || strconv.FormatInt(p, 10) != k {
			return nil, fmt.Errorf("partition %q is not a partition number", truncate(k, 32))
		}
		if off < 0 {
			return nil, fmt.Errorf("partition %d: offset %d is negative", p, off)
		}
		out[int32(p)] = off
	}
	return out, nil
}
