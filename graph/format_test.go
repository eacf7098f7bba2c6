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
	edges := []Edge{{10, 20, 1.5, 1}, {20, 30, 2, 0}, {30, 10, 0.25, 2}, {10, 30, 3, 1}, {-7, 10, 1, 0}, {1 << 40, 20, 9, 3}}
	out := map[string]*Graph{}
	for name, o := range map[string]BuildOptions{
		"plain":      {Name: "plain"},
		"weighted":   {Name: "w", Weighted: true},
		"labelled":   {Name: "l", Labelled: true, Undirected: true},
		"all":        {Name: "all ünïcode", Weighted: true, Labelled: true, Undirected: true, SelfLoops: true},
		"dense":      {Name: "dense", DenseIDs: true, NumVertices: 50},
		"denseEmpty": {Name: "", DenseIDs: true, NumVertices: 3},
	} {
		in := edges
		if o.DenseIDs {
			in = []Edge{{1, 2, 1, 0}, {2, 1, 1, 0}, {40, 2, 1, 0}}
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
	binary.LittleEndian.PutUint64(b[hHeaderCRC:], crcOf(b[:hHeaderCRC]))
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
