package engines

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk/cpu"
	"github.com/walkstage/walkstage/walk/ooc"
)

// A graph larger than the host memory budget gets the out-of-core engine,
// from the setting or, left at 0, from WALKSTAGE_HOST_MEMORY_LIMIT; one
// within it, or with the setting at -1, the in-memory engine.
func TestNewWalksOutOfCoreBeyondTheHostBudget(t *testing.T) {
	rg, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 12, EdgeFactor: 8, Seed: 4, Weighted: true})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "g.wsg")
	if err := graph.Save(path, rg); err != nil {
		t.Fatal(err)
	}
	g, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	need := ooc.InMemoryBytes(g)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		name   string
		limit  int64
		env    string
		wantOC bool
	}{
		{"below the graph", need / 4, "", true},
		{"above the graph", need * 2, "", false},
		{"never", -1, strconv.FormatInt(need/4, 10), false},
		{"from the environment", 0, strconv.FormatInt(need/4, 10), true},
		{"environment above the graph", 0, strconv.FormatInt(need*2, 10), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(ooc.EnvHostMemoryLimit, c.env)
			e, err := New(g, "cpu", Settings{FusedTableBytes: 0, HostMemoryLimit: c.limit}, log)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			switch e.(type) {
			case *ooc.Engine:
				if !c.wantOC {
					t.Fatal("out-of-core engine for a graph within the budget")
				}
			case *cpu.Engine:
				if c.wantOC {
					t.Fatal("in-memory engine for a graph beyond the budget")
				}
			default:
				t.Fatalf("engine %T", e)
			}
		})
	}
}
