package gpu

import (
	"slices"
	"testing"
)

// TestPlanHostBatchSizesByTheDevice: with a result window the pinned share
// bounds a batch only through its tasks and lengths (20 bytes a walk), so
// the scale-22 run from disk under a 2.4 GB budget (16.8 M walks of 80
// steps, 729 MiB of pinned results) is one batch where whole rows cut it
// into 9 (the batches measured before the window); the device's memory,
// the configured cap and the 32-bit pack bound it still, and a batch whose
// rows fit the window comes back whole.
func TestPlanHostBatchSizesByTheDevice(t *testing.T) {
	const (
		result  = 729 << 20 // DiskStream.ResultBytes at scale 22, 2.4 GB
		walks   = 4 << 22   // four walks per vertex
		stride  = 88        // rowPitch(80)
		devFree = 120 << 30 // the H200's free memory after the plan
		perWalk = 2*stride*4 + 4 + 16 + 12
	)
	if rowPitch(80) != stride {
		t.Fatalf("rowPitch(80) = %d", rowPitch(80))
	}
	cases := []struct {
		name              string
		host, window      int64
		total, devWalks   int64
		maxWalks          int
		wantBatches       int64
		wantWalks         int64
		wantWords         int64
		wantWindowed      bool
		wantWindowAtLeast int64
	}{
		{name: "rows whole (before)", host: result, total: walks, devWalks: devFree / perWalk,
			wantBatches: 9, wantWalks: result / (stride*4 + 20), wantWords: result / (stride*4 + 20) * stride},
		{name: "window", host: result, window: resultWindow(result), total: walks, devWalks: devFree / perWalk,
			wantBatches: 1, wantWalks: walks, wantWords: resultWindow(result) / 4, wantWindowed: true},
		{name: "window, device bound", host: result, window: resultWindow(result), total: walks, devWalks: 5 << 20,
			wantBatches: 4, wantWalks: walks, wantWords: resultWindow(result) / 4, wantWindowed: true},
		{name: "window, the pack's 32-bit bound", host: 8 << 30, window: resultWindow(8 << 30), total: 100 << 20, devWalks: 1 << 30,
			wantBatches: 5, wantWalks: maxBatchWords / stride, wantWords: maxResultWindow / 4, wantWindowed: true},
		{name: "window, capped", host: result, window: resultWindow(result), total: walks, devWalks: devFree / perWalk, maxWalks: 2500,
			wantBatches: (walks + 2499) / 2500, wantWalks: 2500, wantWords: 2500 * stride},
		{name: "rows fit the window", host: result, window: resultWindow(result), total: 100_000, devWalks: devFree / perWalk,
			wantBatches: 1, wantWalks: 100_000, wantWords: 100_000 * stride},
		{name: "tiny window holds a walk in each half", host: 1 << 20, window: 100, total: 10_000, devWalks: 1 << 20,
			wantBatches: 1, wantWalks: 10_000, wantWords: 2 * stride, wantWindowed: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := planHostBatch(c.host, c.window, stride, c.total, c.maxWalks)
			if got := batchCount(c.total, c.devWalks, h); got != c.wantBatches {
				t.Fatalf("%d batches, want %d (%+v)", got, c.wantBatches, h)
			}
			if h.walks != c.wantWalks || h.words != c.wantWords || h.windowed != c.wantWindowed {
				t.Fatalf("host batch %+v, want %d walks, %d words, windowed %v", h, c.wantWalks, c.wantWords, c.wantWindowed)
			}
			// The pinned bytes stay within the share: tasks and
			// lengths of every walk, and the rows or the window.
			per := min(c.devWalks, h.walks)
			if pinned := per*20 + 4*h.rowsFor(per, stride); pinned > max(c.host, 2*stride*4+per*20) {
				t.Fatalf("%d pinned bytes for a share of %d", pinned, c.host)
			}
			if h.windowed && h.rowsFor(per, stride) >= per*stride {
				t.Fatalf("windowed, but the window holds the batch's %d rows", per)
			}
		})
	}
	if batchCount(0, 10, hostBatch{walks: 10}) != 0 || batchCount(10, 0, hostBatch{walks: 10}) != 0 {
		t.Fatal("no walks or no room: no batches")
	}
}

// TestWindowPiecesKeepChunksWholeAndInOrder: pieces go into windows in
// order, each window at most half the window's words, a piece never split,
// and a piece above a half is refused (windowChunkWalks prevents it).
func TestWindowPiecesKeepChunksWholeAndInOrder(t *testing.T) {
	for _, c := range []struct {
		words []int64
		half  int64
		want  []int
	}{
		{[]int64{4, 4, 4, 4, 4}, 8, []int{2, 4, 5}},
		{[]int64{8, 1, 7, 2}, 8, []int{1, 3, 4}},
		{[]int64{3}, 8, []int{1}},
		{nil, 8, nil},
		{[]int64{0, 0, 9}, 9, []int{3}},
	} {
		got, ok := windowPieces(c.words, c.half)
		if !ok || !slices.Equal(got, c.want) {
			t.Fatalf("windowPieces(%v, %d) = %v, %v, want %v", c.words, c.half, got, ok, c.want)
		}
		lo := 0
		for _, hi := range got {
			var n int64
			for _, w := range c.words[lo:hi] {
				n += w
			}
			if n > c.half || hi <= lo {
				t.Fatalf("window [%d, %d) of %v: %d words over half %d", lo, hi, c.words, n, c.half)
			}
			lo = hi
		}
	}
	if _, ok := windowPieces([]int64{4, 9, 4}, 8); ok {
		t.Fatal("a piece above half a window was taken")
	}
	// Chunks of windowChunkWalks walks of at most maxVertices fit a half.
	for _, c := range []struct {
		chunk             int
		maxVertices, hold int64
		want              int
	}{
		{1 << 16, 81, 64 << 20, 1 << 16},
		{1000, 81, 64 << 10, 404},
		{1000, 81, 100, 1},
	} {
		got := windowChunkWalks(c.chunk, c.maxVertices, c.hold)
		if got != c.want || int64(got)*c.maxVertices > max(c.hold/2, c.maxVertices) {
			t.Fatalf("windowChunkWalks(%d, %d, %d) = %d, want %d", c.chunk, c.maxVertices, c.hold, got, c.want)
		}
	}
}
