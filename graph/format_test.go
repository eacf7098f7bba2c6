package graph

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameGraph compares everything a user can observe about two graphs.
func sameGraph(t *testing.T, got, want *Graph) {
	t.Helper()
	if got.Name != want.Name || got.Version != want.Version || got.NumLabels != want.NumLabels {
		t.Fatalf("name/version/labels = %q %q %d, want %q %q %d", got.Name, got.Version, got.NumLabels, want.Name, want.Version, want.NumLabels)
	}
	eq := func(what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s differ:\n got %v\nwant %v", what, a, b)
		}
	}
	eq("offsets", got.Offsets, want.Offsets)
	eq("targets", nonNil(got.Targets), nonNil(want.Targets))
	eq("weights", got.Weights == nil, want.Weights == nil)
	eq("labels", got.Labels == nil, want.Labels == nil)
	eq("ids", got.IDs == nil, want.IDs == nil)
	if got.Weights != nil {
		eq("weights", nonNil(got.Weights), nonNil(want.Weights))
	}
	if got.Labels != nil {
		eq("labels", nonNil(got.Labels), nonNil(want.Labels))
	}
	if got.IDs != nil {
		eq("ids", nonNil(got.IDs), nonNil(want.IDs))
		for v := range got.IDs {
			if d, ok := got.DenseID(got.IDs[v]); !ok || d != uint32(v) {
				t.Fatalf("DenseID(%d) = %d, %v; want %d", got.IDs[v], d, ok, v)
			}
		}
	}
	eq("times", got.Times == nil, want.Times == nil)
	if got.Times != nil {
		eq("times", nonNil(got.Times), nonNil(want.Times))
		eq("time order", nonNil(got.ByTime), nonNil(want.ByTime))
	}
	eq("string ids", got.HasStringIDs(), want.HasStringIDs())
	for v := range uint32(got.NumVertices()) {
		s := got.ExternalString(v)
		if w := want.ExternalString(v); s != w {
			t.Fatalf("ExternalString(%d) = %q, want %q", v, s, w)
		}
		if d, ok := got.DenseIDString(s); !ok || d != v {
			t.Fatalf("DenseIDString(%q) = %d, %v; want %d", s, d, ok, v)
		}
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func testGraphs(t *testing.T) map[string]*Graph { return testGraphsTB(t) }

func testGraphsTB(t testing.TB) map[string]*Graph {
	t.Helper()
	edges := []Edge{
		{Src: 10, Dst: 20, Weight: 1.5, Label: 1, Time: 500}, {Src: 20, Dst: 30, Weight: 2, Time: -3},
		{Src: 30, Dst: 10, Weight: 0.25, Label: 2, Time: 7}, {Src: 10, Dst: 30, Weight: 3, Label: 1, Time: 100},
		{Src: -7, Dst: 10, Weight: 1, Time: 7}, {Src: 1 << 40, Dst: 20, Weight: 9, Label: 3, Time: 1 << 41},
		// The same pair at another time: one edge untimed, two when timed.
		{Src: 10, Dst: 20, Weight: 4, Label: 1, Time: 50},
	}
	out := map[string]*Graph{}
	for name, o := range map[string]BuildOptions{
		"plain":      {Name: "plain"},
		"weighted":   {Name: "w", Weighted: true},
		"labelled":   {Name: "l", Labelled: true, Undirected: true},
		"all":        {Name: "all ünïcode", Weighted: true, Labelled: true, Undirected: true, SelfLoops: true},
		"dense":      {Name: "dense", DenseIDs: true, NumVertices: 50},
		"denseEmpty": {Name: "", DenseIDs: true, NumVertices: 3},
		"timed":      {Name: "timed", Weighted: true, Labelled: true, Timed: true, Undirected: true},
	} {
		in := edges
		if o.DenseIDs {
			in = []Edge{{Src: 1, Dst: 2, Weight: 1}, {Src: 2, Dst: 1, Weight: 1}, {Src: 40, Dst: 2, Weight: 1}}
			if o.Name == "" {
				in = nil
			}
		}
		g, err := FromEdges(in, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = g
	}
	empty, err := FromEdges(nil, BuildOptions{Name: "empty", Weighted: true, Labelled: true})
	if err != nil {
		t.Fatal(err)
	}
	out["empty"] = empty
	rm, err := GenerateRMAT(context.Background(), RMATOptions{Scale: 8, EdgeFactor: 4, Seed: 3, Weighted: true, Labels: 4, Name: "rmat"})
	if err != nil {
		t.Fatal(err)
	}
	out["rmat"] = rm
	sedges := []StringEdge{
		{Src: "user:10599066174", Dst: "item:ü", Weight: 2, Time: 9}, {Src: "item:ü", Dst: "b", Weight: 1, Time: 3},
		{Src: "b", Dst: "user:10599066174", Weight: 5, Time: 3}, {Src: "user:10599066174", Dst: "b", Weight: 1, Time: 1},
	}
	for name, o := range map[string]BuildOptions{
		"strings":      {Name: "strings", Weighted: true},
		"stringsTimed": {Name: "st", Weighted: true, Timed: true, Undirected: true},
	} {
		g, err := FromStringEdges(sedges, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = g
	}
	none, err := FromStringEdges(nil, BuildOptions{Name: "no vertices", Timed: true})
	if err != nil {
		t.Fatal(err)
	}
	out["stringsEmpty"] = none
	return out
}

func TestSaveLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for name, g := range testGraphs(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".wsg")
			if err := Save(path, g); err != nil {
				t.Fatal(err)
			}
			for _, o := range []LoadOptions{{}, {VerifyChecksum: true}, {SkipValidate: true, Populate: true}} {
				got, err := LoadWith(path, o)
				if err != nil {
					t.Fatal(err)
				}
				sameGraph(t, got, g)
				if err := got.Close(); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Save is deterministic: saving the loaded graph gives the same bytes.
			got, err := Decode(data, LoadOptions{VerifyChecksum: true})
			if err != nil {
				t.Fatal(err)
			}
			path2 := filepath.Join(dir, name+"2.wsg")
			if err := Save(path2, got); err != nil {
				t.Fatal(err)
			}
			data2, _ := os.ReadFile(path2)
			if !bytes.Equal(data, data2) {
				t.Fatal("re-saving a loaded graph changed its bytes")
			}
		})
	}
}

// Graphs without times or string ids are still written as version 1, so
// their files and Versions do not change; the others are version 2.
func TestSaveWritesTheOldestVersionThatHoldsTheGraph(t *testing.T) {
	for name, g := range testGraphs(t) {
		want := uint32(formatVersion1)
		if g.Timed() || g.HasStringIDs() {
			want = FormatVersion
		}
		if got := binary.LittleEndian.Uint32(savedBytes(t, g)[hVersion:]); got != want {
			t.Errorf("%s: version %d, want %d", name, got, want)
		}
	}
}

func TestTimesAndStringIDs(t *testing.T) {
	gs := testGraphs(t)
	g := gs["timed"]
	u, _ := g.DenseID(10)
	v, _ := g.DenseID(20)
	// 10 -> 20 at 50 and 500, 10 -> 30 at 100, 10 -> -7 at 7 (reverse edge).
	var got []int64
	for e := g.Offsets[u]; e < g.Offsets[u+1]; e++ {
		got = append(got, g.ExternalID(g.Targets[e]), g.EdgeTime(e))
	}
	if want := []int64{-7, 7, 20, 50, 20, 500, 30, 7, 30, 100}; !reflect.DeepEqual(got, want) {
		t.Fatalf("vertex 10's edges (target, time) = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(g.Times[g.Offsets[u]:g.Offsets[u+1]], []int64{7, 7, 50, 100, 500}) {
		t.Fatalf("vertex 10's times in time order = %v", g.Times[g.Offsets[u]:g.Offsets[u+1]])
	}
	if !g.HasEdge(u, v) {
		t.Fatal("HasEdge(10, 20) is false on the timed graph")
	}
	if lo, hi := g.TimeRange(); lo != -3 || hi != 1<<41 {
		t.Fatalf("TimeRange = %d, %d", lo, hi)
	}
	s := gs["strings"]
	for _, c := range []struct {
		id string
		ok bool
	}{{"user:10599066174", true}, {"item:ü", true}, {"b", true}, {"a", false}, {"", false}, {"user:1", false}} {
		d, ok := s.DenseIDString(c.id)
		if ok != c.ok || ok && s.ExternalString(d) != c.id {
			t.Errorf("DenseIDString(%q) = %d, %v", c.id, d, ok)
		}
	}
	// Dense ids follow the strings' byte order, whatever the input order.
	if s.ExternalString(0) != "b" || s.ExternalString(2) != "user:10599066174" {
		t.Fatalf("dense order: %q %q %q", s.ExternalString(0), s.ExternalString(1), s.ExternalString(2))
	}
	if d, ok := gs["plain"].DenseIDString("1099511627776"); !ok || gs["plain"].ExternalID(d) != 1<<40 {
		t.Fatal("DenseIDString does not parse a decimal id of an integer graph")
	}
	if _, err := FromStringEdges([]StringEdge{{Src: "a", Dst: string([]byte{0xff})}}, BuildOptions{}); err == nil {
		t.Fatal("a string id that is not UTF-8 was accepted")
	}
}

func TestSaveIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "g.wsg")
	g := testGraphs(t)["all"]
	if err := Save(path, g); err != nil {
		t.Fatal(err)
	}
	// A failing save (directory gone) leaves no temporary files behind and
	// the old file intact.
	bad := &Graph{Offsets: []uint64{0, 5}}
	if err := Save(path, bad); err == nil {
		t.Fatal("saving an invalid graph succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries after a failed save, want 1", len(ents))
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
}

func savedBytes(t testing.TB, g *Graph) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "g.wsg")
	if err := Save(path, g); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rehead rewrites the header's CRC after a test edits a header field, so the
// check under test is the one that fires.
func rehead(b []byte) {
	at := crcAt(binary.LittleEndian.Uint32(b[hVersion:]))
	binary.LittleEndian.PutUint64(b[at:], crcOf(b[:at]))
}

// Version 2's sections get the same scrutiny: a reader with SkipValidate
// off must never index outside them or accept an order that would make a
// temporal step or an id lookup wrong.
func TestLoadRejectsBadVersion2Files(t *testing.T) {
	g := testGraphs(t)["stringsTimed"]
	good := savedBytes(t, g)
	h, err := decodeHeader(good, uint64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	cases := []struct {
		name string
		edit func([]byte)
		want string
	}{
		{"v2 flags in a v1 file", func(b []byte) {
			le.PutUint32(b[hVersion:], formatVersion1)
			rehead(b)
		}, "unknown flags"},
		{"int and string ids", func(b []byte) { b[hFlags] |= byte(flagIDs); rehead(b) }, "both integer and string ids"},
		{"times out of order", func(b []byte) { le.PutUint64(b[h.sections[secTimes].off:], 1<<60) }, "times of vertex"},
		{"time order not a permutation", func(b []byte) { le.PutUint32(b[h.sections[secByTime].off:], 7) }, "not a permutation"},
		{"string not UTF-8", func(b []byte) { b[h.sections[secStrBytes].off] = 0xff }, "UTF-8"},
		{"string offsets", func(b []byte) { le.PutUint64(b[h.sections[secStrOffsets].off+8:], 1<<20) }, "string offsets"},
		{"string index", func(b []byte) { le.PutUint32(b[h.sections[secByExt].off:], 2) }, "string-id index"},
		{"strbytes too long", func(b []byte) {
			le.PutUint64(b[hSections+16*secStrBytes+8:], 1<<40)
			rehead(b)
		}, "strbytes section"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			c.edit(b)
			_, err := Decode(b, LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestLoadRejectsBadFiles(t *testing.T) {
	g := testGraphs(t)["all"]
	good := savedBytes(t, g)
	h, err := decodeHeader(good, uint64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name string
		edit func([]byte) []byte
		want string
	}
	cases := []tc{
		{"empty", func(b []byte) []byte { return nil }, "shorter than the 256-byte header"},
		{"short header", func(b []byte) []byte { return b[:100] }, "shorter than the 256-byte header"},
		{"bad magic", func(b []byte) []byte { copy(b, "PAR1xxxx"); return b }, "bad magic"},
		{"wrong version", func(b []byte) []byte { b[hVersion] = 9; rehead(b); return b }, "format version 9"},
		{"header corrupt", func(b []byte) []byte { b[hVertices]++; return b }, "header checksum"},
		{"unknown flag", func(b []byte) []byte { b[hFlags+3] = 0x80; rehead(b); return b }, "unknown flags"},
		{"appended", func(b []byte) []byte { return append(b, 0) }, "truncated or appended"},
		{"too many edges", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[hEdges:], 1<<50)
			rehead(b)
			return b
		}, "cannot fit"},
		{"section overlap", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[hSections+16*secTargets:], h.sections[secOffsets].off)
			rehead(b)
			return b
		}, "targets section"},
		{"section misaligned", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[hSections+16*secLabels:], h.sections[secLabels].off+1)
			rehead(b)
			return b
		}, "labels section"},
		{"target out of range", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[h.sections[secTargets].off:], 1000)
			return b
		}, "beyond"},
		{"bad weight", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[h.sections[secWeights].off:], 0xffc00000) // NaN
			return b
		}, "weight"},
		{"label beyond count", func(b []byte) []byte { b[h.sections[secLabels].off] = 200; return b }, "header says"},
		{"bad index", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[h.sections[secByExt].off:], 1)
			return b
		}, "external-id index"},
		{"bad offsets", func(b []byte) []byte {
			binary.LittleEndian.PutUint64(b[h.sections[secOffsets].off+8:], 1<<40)
			return b
		}, "offsets"},
	}
	// Truncation inside every section (the header's file size catches it
	// before any section is touched).
	for i, s := range h.sections {
		if s.len == 0 {
			continue
		}
		cut := s.off + s.len/2
		cases = append(cases, tc{"truncated in " + sectionNames[i], func(b []byte) []byte { return b[:cut] }, "truncated"})
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".wsg")
			if err := os.WriteFile(path, c.edit(bytes.Clone(good)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if err == nil {
				t.Fatal("Load accepted a bad file")
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name the file and %q", err, c.want)
			}
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %q wraps neither ErrFormat nor ErrInvalid", err)
			}
		})
	}
}

func TestLoadVerifyChecksumCatchesSilentCorruption(t *testing.T) {
	g := testGraphs(t)["all"]
	b := savedBytes(t, g)
	h, _ := decodeHeader(b, uint64(len(b)))
	// A weight change that keeps the structure valid: only the checksum
	// can see it.
	binary.LittleEndian.PutUint32(b[h.sections[secWeights].off:], 0x40400000) // 3.0
	if _, err := Decode(b, LoadOptions{}); err != nil {
		t.Fatalf("structural check rejected a valid structure: %v", err)
	}
	_, err := Decode(b, LoadOptions{VerifyChecksum: true})
	if err == nil || !strings.Contains(err.Error(), "content checksum") {
		t.Fatalf("VerifyChecksum: got %v, want a content checksum error", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.wsg"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope.wsg") {
		t.Fatalf("got %v", err)
	}
}

func BenchmarkLoad(b *testing.B) {
	g, err := GenerateRMAT(context.Background(), RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 1, Undirected: true, Weighted: true})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "g.wsg")
	if err := Save(path, g); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	for _, bc := range []struct {
		name string
		o    LoadOptions
	}{{"trusted", LoadOptions{SkipValidate: true}}, {"validate", LoadOptions{}}, {"checksum", LoadOptions{VerifyChecksum: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(st.Size())
			for b.Loop() {
				g, err := LoadWith(path, bc.o)
				if err != nil {
					b.Fatal(err)
				}
				g.Close()
			}
		})
	}
}

func TestReadAlignedFallbackMatchesMapping(t *testing.T) {
	g := testGraphs(t)["all"]
	path := filepath.Join(t.TempDir(), "g.wsg")
	if err := Save(path, g); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	data, _, err := readAligned(f, int(st.Size()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data, LoadOptions{VerifyChecksum: true})
	if err != nil {
		t.Fatal(err)
	}
	sameGraph(t, got, g)
}
