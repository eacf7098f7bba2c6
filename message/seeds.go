package message

// Seeds as requests list them: integer external ids, or, for a graph with
// string ids, JSON strings (docs/reference/messages.md, "String ids").

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// MaxStringIDLen bounds one string id, as the graph format does.
const MaxStringIDLen = 1024

// seedsV1 is a "seeds" array as sent. Integers, the common case, stay in
// ints. An array that holds a JSON string (a string id, or a decimal id
// from a producer that holds numbers as doubles) is kept as text: each
// element's string, or a number's literal, nums marking the numbers.
type seedsV1 struct {
	ints []int64
	text []string
	nums []bool
}

func (s *seedsV1) len() int {
	switch {
	case s == nil:
		return 0
	case s.text != nil:
		return len(s.text)
	}
	return len(s.ints)
}

// parseSeeds reads a seeds array (valid JSON without nulls: the caller
// checked). Arrays of integers take parseInt64Array's fast path.
func parseSeeds(raw []byte) (*seedsV1, error) {
	if bytes.IndexByte(raw, '"') < 0 {
		ints, err := parseInt64Array(raw)
		if err != nil {
			return nil, err
		}
		if ints == nil {
			ints = []int64{}
		}
		return &seedsV1{ints: ints}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	s := &seedsV1{text: make([]string, len(elems)), nums: make([]bool, len(elems))}
	for i, e := range elems {
		if e[0] == '"' {
			if err := json.Unmarshal(e, &s.text[i]); err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			continue
		}
		if _, next, ok := parseInt64(e, 0); !ok || next != len(e) {
			return nil, fmt.Errorf("element %d (%s) is neither an integer in the int64 range nor a string", i, truncate(string(e), 32))
		}
		s.text[i], s.nums[i] = string(e), true
	}
	return s, nil
}

// stringIDs reports whether the graph requests are decoded against has
// string ids.
func (d *decoder) stringIDs() bool { return d.g != nil && d.g.HasStringIDs() }

// graphName names the graph in errors.
func (d *decoder) graphName() string {
	if d.g == nil {
		return ""
	}
	return d.g.Name
}

// seedRef is one requested seed once checked: its external id (ext for
// integer ids, str for string ids) and its dense id when the graph has it.
type seedRef struct {
	ext   int64
	str   string
	dense uint32
	known bool
}

// id is the seed's external id as events write it.
func (s seedRef) id(stringIDs bool) string {
	if stringIDs {
		return s.str
	}
	return strconv.FormatInt(s.ext, 10)
}

// eachSeed checks every seed of s (path names the list in errors) against
// the graph's id type and calls f with each, in order. For a graph with
// string ids every seed must be a JSON string of 1 to MaxStringIDLen
// bytes; for integer ids a string must be a decimal id. Violations are
// invalid_parameters; seeds the graph lacks are passed on unknown, for the
// caller's policy.
func (d *decoder) eachSeed(s *seedsV1, path string, f func(seedRef)) error {
	if d.stringIDs() {
		for i := range s.len() {
			if s.text == nil || s.nums[i] {
				num := ""
				if s.text == nil {
					num = strconv.FormatInt(s.ints[i], 10)
				} else {
					num = s.text[i]
				}
				return d.reject(ReasonInvalidParameters, "%s[%d] is the number %s: graph %q has string ids, give every seed as a JSON string",
					path, i, num, d.graphName())
			}
			id := s.text[i]
			switch {
			case id == "":
				return d.reject(ReasonInvalidParameters, "%s[%d] is empty: string ids are 1 to %d bytes", path, i, MaxStringIDLen)
			case len(id) > MaxStringIDLen:
				return d.reject(ReasonInvalidParameters, "%s[%d] is %d bytes (%q): string ids are 1 to %d bytes",
					path, i, len(id), truncate(id, 32), MaxStringIDLen)
			}
			v, ok := d.g.DenseIDString(id)
			f(seedRef{str: id, dense: v, known: ok})
		}
		return nil
	}
	for i := range s.len() {
		var ext int64
		if s.text == nil {
			ext = s.ints[i]
		} else {
			var ok bool
			if ext, ok = parseDecimalID(s.text[i]); !ok {
				return d.reject(ReasonInvalidParameters, "%s[%d] = %q is not a decimal id: graph %q has 64-bit integer ids",
					path, i, truncate(s.text[i], 64), d.graphName())
			}
		}
		v, ok := d.dense(ext)
		if !ok && d.deferUnknown {
			// Resolved after the wait for the request's edge offsets,
			// which may add the vertex (Limits.Vertices).
			v, ok, d.deferred = 0, true, true
		}
		f(seedRef{ext: ext, dense: v, known: ok})
	}
	return nil
}

// parseDecimalID reads an int64 written in decimal: an optional minus and
// 1 to 19 digits, nothing else (no plus, spaces, exponent or hex).
func parseDecimalID(s string) (int64, bool) {
	b := []byte(s)
	v, next, ok := parseInt64(b, 0)
	return v, ok && next == len(b)
}
