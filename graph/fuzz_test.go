package graph

import (
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the binary reader: it must return a
// graph that passes Validate or an error, never panic or index outside the
// data.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"all", "dense", "empty", "plain"} {
		f.Add(savedBytes(f, testGraphsTB(f)[name]))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoded(t, data)
		// The header CRC stops almost every mutation at the header; restamp
		// the size and CRC so the section and content checks get explored.
		if len(data) >= headerSize {
			fixed := slices.Clone(data)
			binary.LittleEndian.PutUint64(fixed[hFileSize:], uint64(len(fixed)))
			rehead(fixed)
			checkDecoded(t, fixed)
		}
	})
}

func checkDecoded(t *testing.T, data []byte) {
	g, err := Decode(data, LoadOptions{VerifyChecksum: len(data)%2 == 0})
	if err != nil {
		return
	}
	if err := g.Validate(); err != nil {
		t.Fatalf("Decode accepted a graph that fails Validate: %v", err)
	}
	for v := 0; v < g.NumVertices(); v++ {
		for _, u := range g.Neighbors(uint32(v)) {
			_ = g.ExternalID(u)
		}
		if d, ok := g.DenseID(g.ExternalID(uint32(v))); !ok || d != uint32(v) {
			t.Fatalf("DenseID(ExternalID(%d)) = %d, %v", v, d, ok)
		}
	}
	for _, l := range g.Labels {
		if int(l) >= g.NumLabels {
			t.Fatalf("label %d >= NumLabels %d", l, g.NumLabels)
		}
	}
}
