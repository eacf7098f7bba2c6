package engines

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
)

// TestPartitionFor: the cases that need no GPU to decide — off, one
// device, and on over two with a host share given — give no stripes, an
// error and stripes over the listed devices; on over two without a share
// asks the devices for their free memory, which a build without the cuda
// tag cannot.
func TestPartitionFor(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 8, EdgeFactor: 4, Seed: 1, Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name     string
		ordinals []int
		mode     Partition
		share    float64
		stripes  bool
		bad      bool
	}{
		{"off over two", []int{0, 1}, PartitionOff, 0, false, false},
		{"auto on one", []int{0}, PartitionAuto, 0, false, false},
		{"off on one", []int{0}, PartitionOff, 0, false, false},
		{"on needs two", []int{0}, PartitionOn, 0, false, true},
		{"on over two, a share given", []int{0, 1}, PartitionOn, 0.25, true, false},
		{"on over one device twice, a share given", []int{0, 0}, PartitionOn, 0.5, true, false},
		{"on over two, no device to ask", []int{0, 1}, PartitionOn, 0, false, true},
		{"a share of 1", []int{0, 1}, PartitionOn, 1, false, true},
	} {
		if c.share == 0 && c.mode == PartitionOn && len(c.ordinals) > 1 && gpu.Available() == nil {
			continue // a GPU build on a GPU machine has devices to ask
		}
		s, err := partitionFor(g, c.ordinals, Settings{GPUPartition: c.mode, GPUHostShare: c.share}, log)
		if (err != nil) != c.bad || (s != nil) != c.stripes {
			t.Errorf("%s: stripes %v, error %v", c.name, s, err)
		}
		if s != nil && s.String() != fmt.Sprintf("partitioned over devices %v and the host (%.1f%%):", c.ordinals, 100*c.share) {
			t.Errorf("%s: %s", c.name, s)
		}
	}
}
