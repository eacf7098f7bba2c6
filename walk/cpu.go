package walk

import (
	"context"
	"errors"
	"runtime"

	"github.com/walkstage/walkstage/graph"
)

// CPUOption configures the CPU engine.
type CPUOption func(*cpuConfig)

type cpuConfig struct {
	workers   int
	chunkSize int
}

// WithWorkers sets the number of walking goroutines (default GOMAXPROCS).
func WithWorkers(n int) CPUOption { return func(c *cpuConfig) { c.workers = n } }

// WithChunkSize sets how many walks form one emitted chunk and one unit of
// scheduling (default 1024). Memory in flight is about
// workers * 2 * chunkSize * (Length+1) * 4 bytes.
func WithChunkSize(n int) CPUOption { return func(c *cpuConfig) { c.chunkSize = n } }

// CPU is the multi-core reference engine.
type CPU struct {
	g   *graph.Graph
	cfg cpuConfig
}

// NewCPU builds a CPU engine for g.
func NewCPU(g *graph.Graph, opts ...CPUOption) (*CPU, error) {
	cfg := cpuConfig{workers: runtime.GOMAXPROCS(0), chunkSize: 1024}
	for _, o := range opts {
		o(&cfg)
	}
	return &CPU{g: g, cfg: cfg}, nil
}

func (e *CPU) Name() string { return "cpu" }
func (e *CPU) Close() error { return nil }

// Run is being written.
func (e *CPU) Run(ctx context.Context, jobs []Job, emit EmitFunc) error {
	return errors.New("cpu engine: not written yet")
}
