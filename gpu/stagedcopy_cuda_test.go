//go:build cuda

package gpu

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/graphsample"
)

// stagedCopies brings back every span byte for byte, the spans' pieces in
// one pipeline: spans under stagedCopyMin (copied directly), spans cut
// into pieces smaller than a buffer and across the two buffers, pieces
// that end mid-span, and no staging at all.
func TestStagedCopiesMatchTheDevice(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 1, Name: "rmat10"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	sizes := []int64{0, 100, stagedCopyMin + 12345, 3*stagedCopyMin + 7, 9<<20 + 3, stagedCopyMin - 1}
	want := make([][]byte, len(sizes))
	dev := make([]cu.DevicePtr, len(sizes))
	for i, n := range sizes {
		want[i] = make([]byte, n)
		for k := range want[i] {
			want[i][k] = byte(k*7 + i*131 + k>>12)
		}
		if n == 0 {
			continue
		}
		if err := e.dev.do(func() (err error) {
			dev[i], err = upload(e, fmt.Sprintf("test.span%d", i), want[i])
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = e.dev.do(func() error {
			for i := range dev {
				if dev[i] != 0 {
					e.free(fmt.Sprintf("test.span%d", i), &dev[i])
				}
			}
			return nil
		})
	})
	for _, staging := range []int64{defaultStagingBytes, stagedCopyMin + 4096, 0} {
		e.staging.size = staging
		got := make([][]byte, len(sizes))
		spans := make([]stagedSpan, len(sizes))
		for i, n := range sizes {
			got[i] = make([]byte, n)
			if n > 0 {
				spans[i] = stagedSpan{dst: unsafe.Pointer(&got[i][0]), src: dev[i], n: n}
			}
		}
		if err := e.dev.do(func() error { return e.stagedCopies(spans) }); err != nil {
			t.Fatalf("staging %d: %v", staging, err)
		}
		for i := range sizes {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("staging %d: span %d of %d bytes differs", staging, i, sizes[i])
			}
		}
	}
	e.staging.size = defaultStagingBytes
}

// The staging buffers are pinned as large as a call's pieces (rounded up
// to a power of two: stagingPinned), not at the most a buffer may hold: a
// wave's columns (a few tens of MB) come back in pieces of stagedCopyMin,
// and pinning 2 x 32 MiB took 32 ms, more than the wave. A call with
// larger pieces grows them, up to the most.
func TestStagingPinsWhatTheCallsNeed(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 1, Name: "rmat10"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	const big = 8 * (defaultStagingBytes + 1<<20)
	var dev cu.DevicePtr
	if err := e.dev.do(func() (err error) {
		dev, err = e.alloc("test.span", big)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.dev.do(func() error { e.free("test.span", &dev); return nil }) })
	host := make([]byte, big)
	for _, c := range []struct {
		n, held int64
	}{{stagedCopyMin - 1, 0}, {20 << 20, stagedCopyMin}, {12 << 20, stagedCopyMin}, {64 << 20, 8 << 20},
		{64<<20 + 8*4096, 16 << 20}, {big, defaultStagingBytes}, {20 << 20, defaultStagingBytes}} {
		if err := e.dev.do(func() error { return e.stagedCopy(unsafe.Pointer(&host[0]), dev, c.n) }); err != nil {
			t.Fatalf("%d bytes: %v", c.n, err)
		}
		if e.staging.held != c.held {
			t.Errorf("after a copy of %d bytes the staging buffers hold %d bytes each, want %d", c.n, e.staging.held, c.held)
		}
	}
}

// A device sampling call checks the seeds its instances start from, not
// the whole request's (a wave scanned the request's every seed, as long
// as its own sampling), and still refuses a call that starts from a seed
// beyond the graph.
func TestSampleChecksOnlyItsSeeds(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 1, Undirected: true, Name: "rmat10"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g)
	p := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{5, 3}, Seed: 9, InstancesPerSeed: 2}
	starts := []uint32{1, 2, 3, uint32(g.NumVertices()) + 5}
	var got graphsample.Columns
	if _, err := e.SampleNeighborColumns(ctx, p, starts, 0, 6, &got); err != nil {
		t.Fatalf("instances 0..5 start from good seeds: %v", err)
	}
	want, _, err := graphsample.SampleRange(ctx, g, p, starts, 0, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	for k := range want {
		w := want[k]
		for r := range w {
			w[r].Edge = 0
		}
		if gk := got.Instance(k); len(gk)+len(w) > 0 && fmt.Sprint(gk) != fmt.Sprint(w) {
			t.Errorf("instance %d: device %v, CPU %v", k, gk, w)
		}
	}
	if _, err := e.SampleNeighborColumns(ctx, p, starts, 5, 2, &got); err == nil {
		t.Error("instances 5..6 (6 from a seed beyond the graph): no error")
	}
}
