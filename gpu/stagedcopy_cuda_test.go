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

// Columns handed over again (a caller sampling in waves into two column
// sets taking turns, as `walkstage walk` does) are page-locked the second
// time and copied into by the device alone, and hold the CPU's samples
// every time: the first two waves staged, the next ones straight into the
// locked memory; Close unlocks it.
func TestSampleColumnsCopiedIntoLockedMemory(t *testing.T) {
	ctx := context.Background()
	g, err := graph.GenerateRMAT(ctx, graph.RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 5, Undirected: true, Name: "rmat16"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := openEngine(g)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	starts := make([]uint32, g.NumVertices())
	for i := range starts {
		starts[i] = uint32(i)
	}
	p := graphsample.SampleParams{Kind: graphsample.NeighborSampling, Fanouts: []int{25, 10}, Seed: 11, InstancesPerSeed: 2}
	const wave = 16384
	// Room for any wave (275 edges an instance at most), so that no set
	// grows into fresh memory midway.
	sets := [2]*graphsample.Columns{{WithEdges: true}, {WithEdges: true}}
	for _, c := range sets {
		c.Reset(wave, wave*275)
	}
	n := p.NumInstances(len(starts))
	for i, lo := 0, 0; lo < n; i, lo = i+1, lo+wave {
		cols := sets[i%2]
		if _, err := graphsample.SampleColumnsOn(ctx, e, g, p, starts, lo, wave, 0, cols); err != nil {
			t.Fatal(err)
		}
		direct := e.staging.times.directBytes
		if min(cols.Len()*4, int64(cap(cols.Src))*4) < stagedCopyMin {
			t.Fatalf("wave %d: %d edges, columns under stagedCopyMin: the test needs larger waves", i, cols.Len())
		}
		if want := i >= 2; (direct > 0) != want {
			t.Errorf("wave %d (%d edges): %d bytes copied straight into locked memory, want them %v", i, cols.Len(), direct,
				map[bool]string{true: "all but the offsets", false: "none"}[want])
		}
		want, _, err := graphsample.SampleRange(ctx, g, p, starts, lo, wave, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff, _ := diffSamples(t, fmt.Sprintf("wave %d", i), lo, cols.Edges(), want); diff > 0 {
			t.Errorf("wave %d: %d of %d instances differ from the CPU's", i, diff, len(want))
		}
	}
	if len(e.staging.locked) != 2*4 {
		t.Errorf("%d ranges locked, want the two sets' four columns", len(e.staging.locked))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if len(e.staging.locked) != 0 {
		t.Errorf("after Close %d ranges still locked", len(e.staging.locked))
	}
}
