package livegraph

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	cases := []struct {
		name, rec string
		want      []Update
		err       string // substring of the error; empty for success
	}{
		{"one insert", `{"op":"insert","src":17,"dst":42}`, []Update{{Op: Insert, Src: 17, Dst: 42}}, ""},
		{"all fields", `{"op":"insert","src":1,"dst":2,"weight":0.5,"label":3,"time":1700000000000}`,
			[]Update{{Op: Insert, Src: 1, Dst: 2, Weight: 0.5, Label: 3, Time: 1700000000000, Has: HasWeight | HasLabel | HasTime}}, ""},
		{"64-bit ids as strings", `{"op":"delete","src":"9007199254740993","dst":"-5"}`,
			[]Update{{Op: Delete, Src: 9007199254740993, Dst: -5}}, ""},
		{"array", ` [{"op":"insert","src":1,"dst":2},{"op":"delete","src":2,"dst":1}] `,
			[]Update{{Op: Insert, Src: 1, Dst: 2}, {Op: Delete, Src: 2, Dst: 1}}, ""},
		{"empty", ``, nil, "empty record"},
		{"empty array", `[]`, nil, "empty array"},
		{"unknown op", `{"op":"upsert","src":1,"dst":2}`, nil, `op "upsert" is neither insert nor delete`},
		{"missing op", `{"src":1,"dst":2}`, nil, `"op" is missing`},
		{"missing dst", `{"op":"insert","src":1}`, nil, `"src" and "dst" are required`},
		{"float id", `{"op":"insert","src":1.5,"dst":2}`, nil, "1.5 is not a 64-bit integer"},
		{"id beyond int64", `{"op":"insert","src":"9223372036854775808","dst":2}`, nil, "not a 64-bit integer"},
		{"zero weight", `{"op":"insert","src":1,"dst":2,"weight":0}`, nil, "weight 0 must be finite and > 0"},
		{"weight beyond float32", `{"op":"insert","src":1,"dst":2,"weight":1e39}`, nil, "must be finite and > 0"},
		{"label beyond 255", `{"op":"insert","src":1,"dst":2,"label":256}`, nil, "label 256 must be in [0, 255]"},
		{"unknown field", `{"op":"insert","src":1,"dst":2,"colour":"red"}`, nil, `unknown field "colour"`},
		{"delete with weight", `{"op":"delete","src":1,"dst":2,"weight":2}`, nil, "a delete takes only src and dst"},
		{"bad element named", `[{"op":"insert","src":1,"dst":2},{"op":"insert","src":1}]`, nil, "update 1:"},
		{"trailing text", `{"op":"insert","src":1,"dst":2} x`, nil, "text after the update object"},
		{"not JSON", `hello`, nil, "not an update object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode([]byte(c.rec))
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrBadUpdate) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("Decode(%s) = %v, %v; want an ErrBadUpdate containing %q", c.rec, got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Decode(%s) = %+v, %v; want %+v", c.rec, got, err, c.want)
			}
		})
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	cases := [][]Update{
		{{Op: Insert, Src: 1, Dst: 2}},
		{{Op: Insert, Src: -1 << 62, Dst: 1<<63 - 1, Weight: 2.5, Has: HasWeight}, {Op: Delete, Src: 3, Dst: 4}},
		{{Op: Insert, Src: 5, Dst: 6, Weight: 1, Label: 7, Time: -3, Has: HasWeight | HasLabel | HasTime}, {Op: Delete, Src: 5, Dst: 6}},
	}
	for i, ups := range cases {
		rec := AppendBinary(nil, ups)
		if len(rec) != binaryBytes(len(ups), rec[5]) {
			t.Fatalf("case %d: %d bytes, want %d", i, len(rec), binaryBytes(len(ups), rec[5]))
		}
		got, err := Decode(rec)
		if err != nil || !reflect.DeepEqual(got, ups) {
			t.Fatalf("case %d: Decode(AppendBinary(%+v)) = %+v, %v", i, ups, got, err)
		}
	}
}

func TestDecodeBinaryErrors(t *testing.T) {
	good := AppendBinary(nil, []Update{{Op: Insert, Src: 1, Dst: 2, Weight: 1, Has: HasWeight}, {Op: Delete, Src: 1, Dst: 2}})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name string
		rec  []byte
		err  string
	}{
		{"short", []byte("WSEU\x01"), "has no WSEU header"},
		{"version", mut(func(b []byte) []byte { b[4] = 2; return b }), "version 2"},
		{"unknown flag", mut(func(b []byte) []byte { b[5] |= 0x80; return b }), "unknown bits"},
		{"zero count", mut(func(b []byte) []byte { b[8] = 0; return b }), "of 0 updates"},
		{"truncated", good[:len(good)-1], "want 54"},
		{"appended", append(append([]byte(nil), good...), 0), "want 54"},
		{"bad op", mut(func(b []byte) []byte { b[12] = 3; return b }), "update 0: op byte 3"},
		{"zero weight", mut(func(b []byte) []byte { copy(b[12+2*17:], []byte{0, 0, 0, 0}); return b }), "update 0: weight 0"},
		{"delete with weight", mut(func(b []byte) []byte { b[12+2*17+4+3] = 0x3f; return b }), "update 1: a delete's weight must be 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(c.rec)
			if err == nil || !errors.Is(err, ErrBadUpdate) || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("Decode = %v, %v; want an ErrBadUpdate containing %q", got, err, c.err)
			}
		})
	}
}

// FuzzDecode feeds arbitrary records to the decoders: they return updates
// that pass their own checks and survive a binary round trip, or an
// ErrBadUpdate, and never panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"op":"insert","src":17,"dst":42,"weight":1.5}`))
	f.Add([]byte(`[{"op":"delete","src":"1","dst":2},{"op":"insert","src":1,"dst":2,"label":1,"time":5}]`))
	f.Add(AppendBinary(nil, []Update{{Op: Insert, Src: 1, Dst: 2, Weight: 1, Label: 1, Time: 9, Has: HasWeight | HasLabel | HasTime}, {Op: Delete, Src: 2, Dst: 1}}))
	f.Fuzz(func(t *testing.T, rec []byte) {
		ups, err := Decode(rec)
		if err != nil {
			if !errors.Is(err, ErrBadUpdate) {
				t.Fatalf("error %v does not wrap ErrBadUpdate", err)
			}
			return
		}
		if len(ups) == 0 || len(ups) > MaxBatch {
			t.Fatalf("%d updates", len(ups))
		}
		for i, u := range ups {
			if u.Op == Delete && u.Has != 0 || u.Has&HasWeight != 0 && !(u.Weight > 0) {
				t.Fatalf("update %d %+v passed the decoder", i, u)
			}
		}
		// A batch whose inserts carry different optional fields does not
		// round-trip (AppendBinary's contract); one that is uniform does.
		uniform := true
		for _, u := range ups {
			uniform = uniform && (u.Op == Delete || u.Has == ups[0].Has || ups[0].Op == Delete)
		}
		if !uniform {
			return
		}
		if _, err := Decode(AppendBinary(nil, ups)); err != nil {
			t.Fatalf("re-encoded %+v: %v", ups, err)
		}
	})
}
