package engines

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk/cpu"
)

// The CPU engine builds what the settings ask for before it is handed on:
// the alias table always, MetaPath's label tables only when eager.
func TestNewCPUBuildsTheTablesSettingsAskFor(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 10, EdgeFactor: 8, Seed: 4, Undirected: true, Weighted: true, Labels: 3})
	if err != nil {
		t.Fatal(err)
	}
	sizes := cpu.EstimateTables(g)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name string
		cpu  Settings
		want int64
	}{
		{"defaults", Settings{FusedTableBytes: -1}, sizes.Fused},
		{"no fused table", Settings{FusedTableBytes: 0}, sizes.Packed},
		{"eager label tables", Settings{FusedTableBytes: 0, EagerLabelTables: true}, sizes.Packed + sizes.Labels},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := New(g, "cpu", c.cpu, log)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			cpu, ok := e.(*cpu.Engine)
			if !ok {
				t.Fatalf("engine %T, want *cpu.Engine", e)
			}
			if got := cpu.TableBytes(); got != c.want {
				t.Fatalf("tables built at start: %d bytes, want %d", got, c.want)
			}
		})
	}
}

func TestParseGPUs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		bad  bool
	}{{"all", nil, false}, {"", nil, false}, {"0", []int{0}, false}, {"0,1, 3", []int{0, 1, 3}, false}, {"0,0", []int{0, 0}, false},
		{"-1", nil, true}, {"one", nil, true}, {"0,", nil, true}} {
		got, err := ParseGPUs(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("ParseGPUs(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestParsePartition(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Partition
		bad  bool
	}{{"auto", PartitionAuto, false}, {"", PartitionAuto, false}, {"on", PartitionOn, false}, {"off", PartitionOff, false},
		{"yes", 0, true}, {"ON", 0, true}} {
		got, err := ParsePartition(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParsePartition(%q) = %v, %v", c.in, got, err)
		}
	}
}

// The hybrid engine needs the GPU engine as "gpu" does: without one (this
// build has no CUDA) it fails, naming the GPU, rather than walking on the
// CPU alone under a name that says otherwise.
func TestHybridNeedsTheGPU(t *testing.T) {
	if gpu.Available() == nil {
		t.Skip("a CUDA build: the cuda tests cover the hybrid engine")
	}
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 8, EdgeFactor: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := New(g, "hybrid", Settings{}, log)
	if err == nil {
		e.Close()
		t.Fatalf("New(hybrid) built %s without a GPU", e.Name())
	}
	if !errors.Is(err, gpu.ErrUnavailable) || !strings.Contains(err.Error(), "gpu engine") {
		t.Fatalf("New(hybrid) = %v, want the GPU engine unavailable", err)
	}
	if _, err := New(g, "hybird", Settings{}, log); err == nil || !strings.Contains(err.Error(), "hybrid") {
		t.Fatalf("an unknown engine: %v, want the list of engines", err)
	}
}
