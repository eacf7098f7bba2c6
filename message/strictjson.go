package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Strict JSON structure for the request decoder: encoding/json accepts
// nulls for any type, matches names case-insensitively and lets the last
// of two equal names win; the request contract allows none of these.

// jsonField is one member of a JSON object: its name (unescaped) and its
// raw value.
type jsonField struct {
	name string
	raw  []byte
}

var errNotObject = errors.New("not a JSON object")

// objectFields splits a JSON object, already known to be valid JSON (see
// json.Valid), into its members in order. It rejects what encoding/json
// accepts silently: a null anywhere (a member's value or an array element,
// at any depth) and a name given twice in one object. path names the
// object in errors ("" for the request itself).
func objectFields(b []byte, path string) ([]jsonField, error) {
	s := strictScanner{b: b}
	s.i = skipSpace(b, 0)
	switch {
	case s.i < len(b) && b[s.i] == '{':
	case s.i < len(b) && b[s.i] == 'n':
		if path == "" {
			return nil, errors.New("the request is null, not a JSON object")
		}
		return nil, fmt.Errorf("%s is null", path)
	case path == "":
		return nil, fmt.Errorf("%w: the body is a JSON %s", errNotObject, jsonKind(b[s.i]))
	default:
		return nil, errNotObject
	}
	var fields []jsonField
	err := s.object(path, func(name string, raw []byte) { fields = append(fields, jsonField{name, raw}) })
	return fields, err
}

func jsonKind(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// strictScanner walks valid JSON; it checks structure, not syntax.
type strictScanner struct {
	b []byte
	i int
}

// elemPath names an array element or an object member for error messages;
// it is built only when one is needed.
type elemPath struct {
	parent string
	name   string // member name, or "" for element idx
	idx    int
}

func (p elemPath) String() string {
	switch {
	case p.name == "":
		return fmt.Sprintf("%s[%d]", p.parent, p.idx)
	case p.parent == "":
		return p.name
	}
	return p.parent + "." + p.name
}

func (s *strictScanner) value(p elemPath) error {
	switch s.b[s.i] {
	case '{':
		return s.object(p.String(), nil)
	case '[':
		return s.array(p)
	case '"':
		s.skipString()
	case 'n':
		return fmt.Errorf("%s is null", p)
	case 't':
		s.i += len("true")
	case 'f':
		s.i += len("false")
	default:
		for s.i < len(s.b) && (s.b[s.i] >= '0' && s.b[s.i] <= '9' || s.b[s.i] == '-' || s.b[s.i] == '+' ||
			s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
			s.i++
		}
	}
	return nil
}

// object reads the object at s.i, calling each (if not nil) with every
// member's name and raw value.
func (s *strictScanner) object(path string, each func(name string, raw []byte)) error {
	var names []string
	var seen map[string]bool // past 16 names: adversarial objects must not be quadratic
	s.i = skipSpace(s.b, s.i+1)
	if s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		start := s.i
		s.skipString()
		name, err := unquoteName(s.b[start:s.i])
		if err != nil {
			return err
		}
		p := elemPath{parent: path, name: name}
		if seen == nil && len(names) >= 16 {
			seen = make(map[string]bool, 2*len(names))
			for _, n := range names {
				seen[n] = true
			}
		}
		if (seen != nil && seen[name]) || (seen == nil && slices.Contains(names, name)) {
			return fmt.Errorf("duplicate field %q", truncate(p.String(), 64))
		}
		if seen != nil {
			seen[name] = true
		} else {
			names = append(names, name)
		}
		s.i = skipSpace(s.b, skipSpace(s.b, s.i)+1) // the colon
		vstart := s.i
		if err := s.value(p); err != nil {
			return err
		}
		if each != nil {
			each(name, s.b[vstart:s.i])
		}
		s.i = skipSpace(s.b, s.i)
		if s.b[s.i] == '}' {
			s.i++
			return nil
		}
		s.i = skipSpace(s.b, s.i+1) // the comma
	}
}

func (s *strictScanner) array(p elemPath) error {
	s.i = skipSpace(s.b, s.i+1)
	if s.b[s.i] == ']' {
		s.i++
		return nil
	}
	parent := p.String()
	for k := 0; ; k++ {
		if err := s.value(elemPath{parent: parent, idx: k}); err != nil {
			return err
		}
		s.i = skipSpace(s.b, s.i)
		if s.b[s.i] == ']' {
			s.i++
			return nil
		}
		s.i = skipSpace(s.b, s.i+1)
	}
}

func (s *strictScanner) skipString() {
	for s.i++; ; s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return
		}
	}
}

// unquoteName unescapes a member name; most have no escapes.
func unquoteName(q []byte) (string, error) {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// parseInt64Array reads a JSON array of integers (valid JSON, no nulls: the
// caller checked) without encoding/json's reflection, which is most of the
// decoding time of a large seed list. Anything else goes to encoding/json
// for its error message.
func parseInt64Array(raw []byte) ([]int64, error) {
	slow := func() ([]int64, error) {
		var v []int64
		err := json.Unmarshal(raw, &v)
		return v, err
	}
	if len(raw) < 2 || raw[0] != '[' {
		return slow()
	}
	out := make([]int64, 0, bytes.Count(raw, []byte{','})+1)
	i := skipSpace(raw, 1)
	if raw[i] == ']' {
		return out, nil
	}
	for {
		v, next, ok := parseInt64(raw, i)
		if !ok {
			return slow()
		}
		out = append(out, v)
		i = skipSpace(raw, next)
		if raw[i] == ']' {
			return out, nil
		}
		i = skipSpace(raw, i+1) // the comma
	}
}

// parseInt64 reads a JSON integer literal at b[i:] that fits an int64; ok
// is false for anything else (a fraction, an exponent, another type).
func parseInt64(b []byte, i int) (v int64, next int, ok bool) {
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var u uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		u = u*10 + uint64(b[i]-'0')
		i++
	}
	if n := i - start; n == 0 || n > 19 {
		return 0, i, false // 19 digits never overflow a uint64
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, i, false
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), i, true
	case neg && u <= 1<<63:
		return int64(-u), i, true
	}
	return 0, i, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
