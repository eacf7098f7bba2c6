package stage

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// TestPartitionFor: the cases that need no GPU to decide — off, one
// device, and on over two — give no stripes, an error and stripes over the
// listed devices.
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
		stripes  bool
		bad      bool
	}{
		{"off over two", []int{0, 1}, PartitionOff, false, false},
		{"auto on one", []int{0}, PartitionAuto, false, false},
		{"off on one", []int{0}, PartitionOff, false, false},
		{"on needs two", []int{0}, PartitionOn, false, true},
		{"on over two", []int{0, 1}, PartitionOn, true, false},
		{"on over one device twice", []int{0, 0}, PartitionOn, true, false},
	} {
		s, err := partitionFor(g, c.ordinals, EngineSettings{GPUPartition: c.mode}, log)
		if (err != nil) != c.bad || (s != nil) != c.stripes {
			t.Errorf("%s: stripes %v, error %v", c.name, s, err)
		}
		if s != nil && s.String() != fmt.Sprintf("partitioned over devices %v:", c.ordinals) {
			t.Errorf("%s: %s", c.name, s)
		}
	}
}
