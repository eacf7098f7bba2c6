package graph

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A writer that fills the sections at FileLayout's offsets and writes its
// Header (what graph/edgelist does) produces Save's bytes, for every shape
// of graph, also when it first laid the file out for more edges and moved
// the later sections down with WithEdges.
func TestFileLayoutWritesSaveBytes(t *testing.T) {
	for name, g := range testGraphs(t) {
		t.Run(name, func(t *testing.T) {
			want := savedBytes(t, g)
			for _, spare := range []uint64{0, 5} {
				shape := FileShape{Vertices: uint64(g.NumVertices()), Edges: uint64(g.NumEdges()) + spare, NameBytes: len(g.Name),
					Weighted: g.Weights != nil, Labelled: g.Labels != nil, External: g.IDs != nil,
					Timed: g.Timed(), StringIDs: g.HasStringIDs(), StringBytes: uint64(len(g.StrBytes))}
				l, err := NewFileLayout(shape)
				if err != nil {
					t.Fatal(err)
				}
				if spare > 0 {
					l = l.WithEdges(uint64(g.NumEdges()))
				}
				if l.Size() != uint64(len(want)) {
					t.Fatalf("spare %d: Size %d, Save wrote %d bytes", spare, l.Size(), len(want))
				}
				path := filepath.Join(t.TempDir(), "g.wsg")
				err = WriteFileAtomic(path, func(f *os.File) error {
					if err := f.Truncate(int64(l.Size())); err != nil {
						return err
					}
					for id, b := range map[SectionID][]byte{
						SectionName: []byte(g.Name), SectionOffsets: bytesOf(g.Offsets), SectionTargets: bytesOf(g.Targets),
						SectionWeights: bytesOf(g.Weights), SectionLabels: bytesOf(g.Labels), SectionIDs: bytesOf(g.IDs), SectionByExt: bytesOf(g.byExt),
						SectionTimes: bytesOf(g.Times), SectionByTime: bytesOf(g.ByTime), SectionStrOffsets: bytesOf(g.StrOffsets), SectionStrBytes: g.StrBytes,
					} {
						off, n := l.Section(id)
						if n != uint64(len(b)) {
							t.Fatalf("section %d: %d bytes laid out for %d", id, n, len(b))
						}
						if _, err := f.WriteAt(b, int64(off)); err != nil {
							return err
						}
					}
					sum, err := l.Checksum(f)
					if err != nil {
						return err
					}
					_, err = f.WriteAt(l.Header(uint32(g.NumLabels), sum), 0)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("spare %d: the file differs from Save's", spare)
				}
			}
		})
	}
}

func TestDuplicatePolicyValid(t *testing.T) {
	for _, p := range []DuplicatePolicy{DupKeepFirst, DupSumWeights, DupKeepAll, DupError} {
		if !p.Valid() {
			t.Errorf("%v is not Valid", p)
		}
	}
	if DuplicatePolicy(9).Valid() {
		t.Error("DuplicatePolicy(9) is Valid")
	}
}
