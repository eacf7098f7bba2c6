package gpu

import "testing"

// The arrays the first wave of a neighbour sample allocates hold the next
// waves' (their sizes as the H200 run's debug log gave them: seeds
// 0-999,999 of R-MAT scale 22, fan-outs [25, 10]): instances and edges of
// the first wave, then the largest of the later ones.
func TestKeptArraysHoldTheNextWaves(t *testing.T) {
	for _, c := range []struct {
		what        string
		first, next int64
	}{
		{"instances", 30_504, 35_946},
		{"edges", 1_784_284, 2_157_000},
	} {
		if got := keptBytes(c.first * 4); got < c.next*4 {
			t.Errorf("%s: an array for the first wave's %d holds %d bytes, the next waves need %d", c.what, c.first, got, c.next*4)
		}
	}
}
