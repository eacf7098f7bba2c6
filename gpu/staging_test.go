package gpu

import "testing"

// A copy's pieces are an eighth of it within [stagedCopyMin, most], and the
// buffers are pinned at the next power of two: a run of waves a few per
// cent apart (a layer sample's, about 51 MB each) pins once, where pinning
// each wave's own piece pinned again for every wave larger than those
// before.
func TestStagingSizes(t *testing.T) {
	const most = defaultStagingBytes
	for _, c := range []struct {
		total, piece, pinned int64
	}{
		{1, stagedCopyMin, stagedCopyMin},
		{20 << 20, stagedCopyMin, stagedCopyMin},
		{51_000_000, 6_377_472, 8 << 20},
		{64 << 20, 8 << 20, 8 << 20},
		{64<<20 + 8*4096, 8<<20 + 4096, 16 << 20},
		{1 << 30, most, most},
	} {
		if got := stagingPiece(most, c.total); got != c.piece {
			t.Errorf("a copy of %d bytes: pieces of %d, want %d", c.total, got, c.piece)
		}
		if got := stagingPinned(most, c.piece); got != c.pinned {
			t.Errorf("pieces of %d bytes: buffers pinned at %d, want %d", c.piece, got, c.pinned)
		}
	}
	// The waves of a layer sample: one pinning for all.
	held, pins := int64(0), 0
	for _, total := range []int64{51_162_792, 51_939_012, 52_011_420, 52_732_704, 51_994_200, 52_440_000} {
		if p := stagingPiece(most, total); p > held {
			held, pins = stagingPinned(most, p), pins+1
		}
	}
	if pins != 1 {
		t.Errorf("six waves of 51-53 MB pinned the staging %d times, want once", pins)
	}
	if got := stagingPiece(0, 1<<20); got != 0 {
		t.Errorf("no staging (most 0): pieces of %d", got)
	}
}
