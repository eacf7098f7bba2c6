package gpu

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

func TestStripeCuts(t *testing.T) {
	const g = 2 << 20
	for _, c := range []struct {
		size int64
		k    int
		host float64
		want []int64
	}{
		{g, 2, 0, []int64{g, 0}},
		{2 * g, 2, 0, []int64{g, g}},
		{5 * g, 2, 0, []int64{3 * g, 2 * g}},
		{7 * g, 4, 0, []int64{2 * g, 2 * g, 2 * g, g}},
		{8 * g, 4, 0, []int64{2 * g, 2 * g, 2 * g, 2 * g}},
		{3 * g, 8, 0, []int64{g, g, g, 0, 0, 0, 0, 0}},
		// A host share takes its granules (rounded up) off the end.
		{10 * g, 2, 0.5, []int64{3 * g, 2 * g, 5 * g}},
		{10 * g, 2, 0.01, []int64{5 * g, 4 * g, g}},
		{9 * g, 4, 0.3, []int64{2 * g, 2 * g, g, g, 3 * g}},
		{g, 2, 0.5, []int64{0, 0, g}},
	} {
		got := stripeCuts(c.size, g, c.k, c.host)
		if !slices.Equal(got, c.want) {
			t.Errorf("stripeCuts(%d granules, %d, %v) = %v, want %v", c.size/g, c.k, c.host, got, c.want)
		}
		var sum int64
		for _, x := range got {
			sum += x
		}
		if sum != c.size {
			t.Errorf("stripeCuts(%d granules, %d) sums to %d", c.size/g, c.k, sum)
		}
	}
	if roundUp(1, g) != g || roundUp(g, g) != g || roundUp(g+1, g) != 2*g || roundUp(0, g) != 0 {
		t.Fatal("roundUp")
	}
}

func TestNewStripes(t *testing.T) {
	if _, err := NewStripes([]int{0}, 0); err == nil {
		t.Fatal("one device accepted")
	}
	if _, err := NewStripes([]int{0, -1}, 0); err == nil {
		t.Fatal("device -1 accepted")
	}
	for _, h := range []float64{-0.1, 1, 1.5, math.NaN()} {
		if _, err := NewStripes([]int{0, 1}, h); err == nil {
			t.Fatalf("host share %v accepted", h)
		}
	}
	s, err := NewStripes([]int{0, 0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.arrays["graph.targets"] = &stripedArray{name: "graph.targets", used: 3 << 20, size: 4 << 20,
		pieces: []stripePiece{{device: 0, size: 2 << 20}, {device: 1, off: 2 << 20, size: 2 << 20}}}
	if got := s.String(); !strings.Contains(got, "graph.targets 3.0 MiB (2.0 MiB on 0, 2.0 MiB on 1)") {
		t.Fatalf("String() = %q", got)
	}
	if b := s.DeviceBytes(); b[0] != 2<<20 || b[1] != 2<<20 {
		t.Fatalf("DeviceBytes() = %v", b)
	}
	if !isStriped("alias.table") || isStriped("graph.offsets") {
		t.Fatal("isStriped")
	}
	h, err := NewStripes([]int{0, 1}, 0.25)
	if err != nil {
		t.Fatal(err)
	}
	h.arrays["graph.targets"] = &stripedArray{name: "graph.targets", used: 8 << 20, size: 8 << 20,
		pieces: []stripePiece{{device: 0, size: 4 << 20}, {device: 1, off: 4 << 20, size: 2 << 20}, {device: hostPiece, off: 6 << 20, size: 2 << 20}}}
	if got := h.String(); !strings.Contains(got, "and the host (25.0%)") || !strings.Contains(got, "2.0 MiB on the host") {
		t.Fatalf("String() = %q", got)
	}
	if b := h.DeviceBytes(); b[hostPiece] != 2<<20 || b[1] != 2<<20 {
		t.Fatalf("DeviceBytes() = %v", b)
	}
}

// TestPartitionHostShare: no host share while the pieces fit the devices;
// past that, a share that leaves each device its fixed arrays and its piece
// within the free memory; an error when the devices cannot hold even the
// offsets, or the host would take (nearly) all.
func TestPartitionHostShare(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 14, EdgeFactor: 16, Seed: 1,
		Undirected: true, Weighted: true, Name: "rmat-s14"})
	if err != nil {
		t.Fatal(err)
	}
	sh := shapeOf(g)
	fixed := uploadBytes((sh.vertices+1)*8) + uploadBytes(sh.vertices*placeRecordBytes) + 8*(2<<20)
	striped := DeviceBytesNeeded(g) - uploadBytes((sh.vertices+1)*8)
	for _, k := range []int{2, 4} {
		if h, err := PartitionHostShare(g, k, fixed+striped/int64(k)+1); err != nil || h != 0 {
			t.Fatalf("k=%d, room for every piece: share %v, %v", k, h, err)
		}
		for _, part := range []int64{2, 3, 8} {
			free := fixed + striped/int64(k)/part
			h, err := PartitionHostShare(g, k, free)
			if err != nil {
				t.Fatalf("k=%d free %d: %v", k, free, err)
			}
			if onDevice := float64(striped) * (1 - h) / float64(k); h <= 0 || h >= 1 || onDevice > float64(free-fixed) {
				t.Fatalf("k=%d, a 1/%d of a piece free: share %v puts %.0f bytes on each device, %d free after the fixed arrays", k, part, h, onDevice, free-fixed)
			}
		}
	}
	var mpe *MemoryPlanError
	if _, err := PartitionHostShare(g, 2, fixed/2); !errors.As(err, &mpe) {
		t.Fatalf("offsets do not fit: %v", err)
	}
	if _, err := PartitionHostShare(g, 2, fixed+striped/1000); err == nil || !strings.Contains(err.Error(), "host memory") {
		t.Fatalf("a 0.1%% device share: %v", err)
	}
}
