package gpu

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/walkstage/walkstage/internal/directio"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// pageAligned is n bytes starting on a page boundary, as pinned host
// memory does (O_DIRECT reads need it).
func pageAligned(n int) []byte {
	raw := make([]byte, n+directio.Align)
	d := (directio.Align - int(uintptr(unsafe.Pointer(&raw[0]))%directio.Align)) % directio.Align
	return raw[d : d+n : d+n]
}

// savedGraph is an R-MAT graph written to a file and loaded back (mapped),
// as the stage loads one.
func savedGraph(t *testing.T, weighted bool) *graph.Graph {
	t.Helper()
	return savedGraphOf(t, graph.RMATOptions{Scale: 11, EdgeFactor: 8, Seed: 3,
		Undirected: true, Weighted: weighted, Labels: 3, Name: "disk"})
}

// savedGraphOf is the R-MAT graph of o written to a file and loaded back.
func savedGraphOf(t *testing.T, o graph.RMATOptions) *graph.Graph {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.wsg")
	if err := graph.Save(path, g); err != nil {
		t.Fatal(err)
	}
	g.Close()
	l, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestEntriesFileMatchesThePinnedEntries: the entries file built from the
// graph file's targets and weights holds, edge for edge, the 12-byte alias
// entries the pinned path computes in memory (walk.ForAliasVertices), so
// an alias walk reads the same table from either; and the targets section
// graphSections finds holds the graph's targets (what uniform walks read).
func TestEntriesFileMatchesThePinnedEntries(t *testing.T) {
	g := savedGraph(t, true)
	want := make([]uint32, 3*g.NumEdges())
	walk.ForAliasVertices(g, func(_ int, first uint64, adj []uint32, prob []float32, col []uint32) {
		putStreamEntries(want[3*first:3*(first+uint64(len(adj)))], adj, prob, col)
	})
	f, _, read, err := buildEntriesFile(context.Background(), g, t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if read != 8*g.NumEdges() {
		t.Fatalf("read %d bytes, want %d (targets and weights once)", read, 8*g.NumEdges())
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytesOf(want)) {
		n := 0
		for n < len(got) && n < len(bytesOf(want)) && got[n] == bytesOf(want)[n] {
			n++
		}
		t.Fatalf("entries file (%d bytes) differs from the pinned entries (%d bytes) at byte %d (edge %d)", len(got), 4*len(want), n, n/12)
	}
	sec, err := graphSections(g)
	tOff := sec.targets
	if err != nil {
		t.Fatal(err)
	}
	r, err := openDiskReader(g.File(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 4 * (int64(g.Offsets[900]) - int64(g.Offsets[100]))
	buf := pageAligned(int(directio.Span(n)))
	at, err := r.ReadRange(context.Background(), buf, tOff+4*int64(g.Offsets[100]), n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[at:at+n], bytesOf(g.Targets[g.Offsets[100]:g.Offsets[900]])) {
		t.Fatal("targets section range differs from the graph's targets")
	}
}

// TestEntriesFileRefusesAGraphWithoutItsFile: a graph built in memory, or
// whose file no longer matches its layout, cannot stream from disk.
func TestEntriesFileRefusesAGraphWithoutItsFile(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 6, EdgeFactor: 4, Seed: 1, Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := buildEntriesFile(context.Background(), g, t.TempDir(), 0); err == nil || !strings.Contains(err.Error(), "not loaded from a file") {
		t.Fatalf("in-memory graph: %v", err)
	}
	s := savedGraph(t, true)
	if err := os.Truncate(s.File(), 100); err == nil {
		if _, err := graphSections(s); !errors.Is(err, graph.ErrFormat) {
			t.Fatalf("truncated file: %v", err)
		}
	}
}

// TestPlanStreamDiskWithinHostBudget: from a budget that holds one
// partition's ring to one that would pin everything, the disk plan's
// ring stays within half the host budget with at least three buffers,
// each holding any streamed partition, at most one buffer per streamed
// partition; the device side is the pinned plan's rules (checkStreamPlan).
// PlanStreamHost switches to the disk plan exactly where the pinned copy
// exceeds half the budget; a budget too small says which variable to raise.
func TestPlanStreamDiskWithinHostBudget(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		g := savedGraph(t, weighted)
		s := shapeOf(g)
		whole := s.edges * streamEntryBytes(weighted)
		device := streamFixedBytes(s.vertices, streamLabelBytes(s.vertices, streamLabels(s))) + whole/2
		pinned, err := PlanStream(g, device, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, host := range []int64{pinned.HostBytes, 3 * pinned.HostBytes / 2, 2 * pinned.HostBytes, 4 * pinned.HostBytes} {
			p, err := PlanStreamHost(g, device, host)
			if err != nil {
				t.Fatalf("weighted=%v host %d: %v", weighted, host, err)
			}
			checkStreamPlan(t, g, p)
			if p.DeviceBytes() > device {
				t.Fatalf("device %d > budget %d", p.DeviceBytes(), device)
			}
			if wantDisk := 2*pinned.HostBytes > host; (p.Disk != nil) != wantDisk {
				t.Fatalf("weighted=%v host %d (pinned needs %d): disk plan %v, want %v", weighted, host, pinned.HostBytes, p.Disk != nil, wantDisk)
			}
			d := p.Disk
			if d == nil {
				continue
			}
			if d.RingBytes() > host/2 || d.RingBuffers < minRingBuffers || d.RingBuffers > p.Streamed() && d.RingBuffers > minRingBuffers {
				t.Fatalf("host %d: ring %d x %d bytes, %d streamed partitions", host, d.RingBuffers, d.BufferBytes, p.Streamed())
			}
			if d.ResultBytes < 1<<20 || d.ResultBytes > max(3*host/4-d.RingBytes(), 1<<20) {
				t.Fatalf("host %d: result buffer %d beside a ring of %d", host, d.ResultBytes, d.RingBytes())
			}
			if d.BufferBytes < directio.Span(p.BufferEdges*p.EntryBytes) || d.Entries != weighted || d.File != g.File() || p.HostBytes != d.RingBytes() {
				t.Fatalf("host %d: %+v for buffers of %d edges", host, d, p.BufferEdges)
			}
			if !strings.Contains(p.String(), "read from disk") {
				t.Fatalf("plan string: %s", p)
			}
			t.Logf("weighted=%v host %d: %s", weighted, host, p)
		}
		if _, err := PlanStreamHost(g, device, 1<<10); err == nil || !strings.Contains(err.Error(), "WALKSTAGE_HOST_MEMORY_LIMIT") {
			t.Fatalf("a 1 KiB host budget: %v", err)
		}
	}
}

// TestRingVictimKeepsTheBusiest: an empty ring buffer first, else the one
// whose partition has the fewest waiting walkers.
func TestRingVictimKeepsTheBusiest(t *testing.T) {
	counts := []uint32{5, 0, 9, 2, 7}
	cases := []struct {
		parts []int
		want  int
	}{
		{[]int{0, -1, 2}, 1},
		{[]int{0, 2, 4}, 0},
		{[]int{2, 4, 3}, 2},
		{[]int{2, 1, 3}, 1},
		{[]int{4, 4, 0}, 2},
	}
	for _, c := range cases {
		if got := ringVictim(c.parts, counts); got != c.want {
			t.Errorf("%v: victim %d, want %d", c.parts, got, c.want)
		}
	}
}
