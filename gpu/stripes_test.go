package gpu

import (
	"slices"
	"strings"
	"testing"
)

func TestStripeCuts(t *testing.T) {
	const g = 2 << 20
	for _, c := range []struct {
		size int64
		k    int
		want []int64
	}{
		{g, 2, []int64{g, 0}},
		{2 * g, 2, []int64{g, g}},
		{5 * g, 2, []int64{3 * g, 2 * g}},
		{7 * g, 4, []int64{2 * g, 2 * g, 2 * g, g}},
		{8 * g, 4, []int64{2 * g, 2 * g, 2 * g, 2 * g}},
		{3 * g, 8, []int64{g, g, g, 0, 0, 0, 0, 0}},
	} {
		got := stripeCuts(c.size, g, c.k)
		if !slices.Equal(got, c.want) {
			t.Errorf("stripeCuts(%d granules, %d) = %v, want %v", c.size/g, c.k, got, c.want)
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
	if _, err := NewStripes([]int{0}); err == nil {
		t.Fatal("one device accepted")
	}
	if _, err := NewStripes([]int{0, -1}); err == nil {
		t.Fatal("device -1 accepted")
	}
	s, err := NewStripes([]int{0, 0})
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
}
