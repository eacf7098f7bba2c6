package ooc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/directio"
)

// TestPlanCoversTheGraphWithinBudget: partitions are contiguous, cover
// every vertex and edge, and each fits the partition size.
func TestPlanCoversTheGraphWithinBudget(t *testing.T) {
	g := saveRMAT(t, graph.RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 3, Weighted: true, Labels: 4})
	for _, budget := range []int64{2 << 20, 8 << 20, 1 << 30} {
		p, err := PlanFor(context.Background(), g, g.File(), budget, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.PartitionBytes != p.PoolBytes/DefaultSlots || p.PoolBytes+p.WalkerBytes > budget {
			t.Fatalf("budget %d: pool %d walkers %d partition %d", budget, p.PoolBytes, p.WalkerBytes, p.PartitionBytes)
		}
		var next uint32
		var edge uint64
		for i, q := range p.Partitions {
			if q.Lo != next || q.EdgeLo != edge || q.Hi <= q.Lo {
				t.Fatalf("budget %d: partition %d is [%d, %d) edges [%d, %d), after vertex %d edge %d", budget, i, q.Lo, q.Hi, q.EdgeLo, q.EdgeHi, next, edge)
			}
			if q.EdgeLo != g.Offsets[q.Lo] || q.EdgeHi != g.Offsets[q.Hi] {
				t.Fatalf("partition %d: edges [%d, %d), the graph says [%d, %d)", i, q.EdgeLo, q.EdgeHi, g.Offsets[q.Lo], g.Offsets[q.Hi])
			}
			want := int64(q.Vertices()+1)*p.BytesPerVertex + q.Edges()*p.BytesPerEdge
			if q.Bytes != want || q.Bytes > p.PartitionBytes {
				t.Fatalf("partition %d: %d bytes, want %d within %d", i, q.Bytes, want, p.PartitionBytes)
			}
			next, edge = q.Hi, q.EdgeHi
		}
		if int(next) != g.NumVertices() || edge != uint64(g.NumEdges()) {
			t.Fatalf("partitions end at vertex %d edge %d of %d, %d", next, edge, g.NumVertices(), g.NumEdges())
		}
		if budget == 2<<20 && len(p.Partitions) < 3 || budget == 1<<30 && len(p.Partitions) != 1 {
			t.Fatalf("budget %d: %d partitions", budget, len(p.Partitions))
		}
	}
}

// TestHubAboveAPartitionFails: a vertex whose edges exceed a partition is
// not split; the plan fails naming it and the budget that would do.
func TestHubAboveAPartitionFails(t *testing.T) {
	// A star: vertex 5 points at every other vertex.
	var edges []graph.Edge
	for v := int64(0); v < 20000; v++ {
		if v != 5 {
			edges = append(edges, graph.Edge{Src: 5, Dst: v})
		}
	}
	g, err := graph.FromEdges(edges, graph.BuildOptions{Name: "star", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "star.wsg")
	if err := graph.Save(path, g); err != nil {
		t.Fatal(err)
	}
	lg, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	_, err = New(context.Background(), lg, path, WithMemoryLimit(200<<10), WithLogger(quiet())) // 30 KB partitions, the hub takes 80 KB
	var hub *HubError
	if !errors.As(err, &hub) || !errors.Is(err, ErrHubTooLarge) {
		t.Fatalf("got %v, want a HubError", err)
	}
	if hub.Degree != 19999 || hub.Vertex != 5 || !strings.Contains(err.Error(), EnvHostMemoryLimit) {
		t.Fatalf("hub %+v: %v", hub, err)
	}
	// The budget the error names is enough.
	var need int64
	if _, err := fmt.Sscanf(err.Error()[strings.LastIndex(err.Error(), " "):], "%d", &need); err != nil {
		t.Fatal(err)
	}
	e, err := New(context.Background(), lg, path, WithMemoryLimit(need), WithLogger(quiet()))
	if err != nil {
		t.Fatalf("with the %d bytes the error names: %v", need, err)
	}
	e.Close()
}

// TestReaderReadsUnalignedRanges: ranges at any offset and length read
// back the file's bytes, with O_DIRECT and without.
func TestReaderReadsUnalignedRanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 3*directio.Piece+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, direct := range []bool{true, false} {
		r, err := openReader(path, direct)
		if err != nil {
			t.Fatal(err)
		}
		var buf alignedBuf
		for _, c := range [][2]int64{{0, 1}, {4095, 2}, {4096, 4096}, {100, directio.Piece + 5}, {int64(len(data)) - 7, 7}, {13, int64(len(data)) - 13}} {
			got, err := r.read(&buf, c[0], c[1])
			if err != nil {
				t.Fatalf("direct=%v %v: %v", direct, c, err)
			}
			if string(got) != string(data[c[0]:c[0]+c[1]]) {
				t.Fatalf("direct=%v %v: wrong bytes", direct, c)
			}
		}
		if _, err := r.read(&buf, int64(len(data))-4, 8); err == nil {
			t.Fatalf("direct=%v: a read past the end succeeded", direct)
		}
		r.close()
	}
}
